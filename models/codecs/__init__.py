"""Codecs, vocoders and codec parts more than one family decodes with (a family imports them from here,
never from another family): the streaming causal convolutions, the codec transformers' rotary embedding,
Mimi, DAC, the X-Codec encoder parts and HiFT."""

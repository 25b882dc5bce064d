"""Dia (Nari Labs, transformers `DiaForConditionalGeneration`): a byte-level text encoder, an audio
decoder over 9 delay-pattern DAC 44.1 kHz codebooks, classifier-free guidance as co-scheduled pairs.
See program.py for how the family maps onto the engine, dac.py for the codec."""

"""Codecs and vocoders that more than one family decodes with (family-neutral library code)."""

"""Orpheus 3B (canopylabs): a plain Llama-3.2-3B LM emitting a flat stream of SNAC codes, seven tokens a
frame."""

"""Higgs Audio (Boson AI): v2 (Llama-3.2-3B + DualFFN) and v3 (Qwen3 4B, tied head) with the delay pattern
and the DAC-based audio tokenizer streamed exactly."""

"""Zonos v0.1 (Zyphra): prefix-conditioned transformer over nine DAC 44.1 kHz codebooks (see program.py)."""

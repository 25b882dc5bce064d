"""The CosyVoice 3 cloning case shared by tests/test_cosyvoice_clone_parity.py (which asserts it) and
`python -m benchmarks figures_cosyvoice_clone` (which prints its figures): the texts, upstream's prompt
formats for them, and a synthetic voiced clip (`write_clip`) that both sides read exactly."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import soundfile as sf

TEXT = "Hello world. This is a test."
REF_TEXT = "This is my voice."
INSTRUCTION = "Please speak slowly."
# upstream's CosyVoice 3 prompt formats (its examples and cosyvoice/utils/common.py instruct_list)
UPSTREAM_PROMPT = "You are a helpful assistant.<|endofprompt|>This is my voice."
UPSTREAM_INSTRUCT = "You are a helpful assistant. Please speak slowly.<|endofprompt|>"


def write_clip(path: str | Path, rate: int, channels: int, seconds: float = 1.9, seed: int = 0) -> None:
    """A voiced-like clip (a gliding 140 Hz tone, amplitude-modulated, with a little noise) at `rate`;
    float samples, so every reader gets exactly these values."""
    rs = np.random.RandomState(seed + rate)
    t = np.arange(int(rate * seconds)) / rate
    voiced = 0.3 * np.sin(2 * np.pi * (140 + 40 * np.sin(2 * np.pi * 1.5 * t)) * t)
    x = voiced * (0.6 + 0.4 * np.sin(2 * np.pi * 3 * t)) + 0.03 * rs.randn(t.size)
    if channels == 2:
        x = np.stack([x, 0.7 * x + 0.02 * rs.randn(t.size)], axis=1)
    sf.write(str(path), x.astype(np.float32), rate, subtype="FLOAT")

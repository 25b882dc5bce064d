"""Shared inputs and ONE oracle run for the audio tests (codec, speaker encoder, Mimi encoder).

The tiny speech tokenizer is built by the project's own builder (`tiny_audio`); the official package
loading it in the oracle venv is the proof that the layout is exact. The oracle subprocess runs once
per test session (module-level cache), producing every reference output the three test modules need.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from oracle.interpreters import run_oracle

SR = 24000
ORACLE_FRAMES = 320  # > 300 and > 72: the sliding window and the package's 300-frame chunking both matter


@dataclass
class AudioCase:
    root: Path  # holds speech_tokenizer/
    codes: torch.Tensor  # [2, 16, ORACLE_FRAMES]
    ref: np.ndarray  # synthetic 24 kHz reference clip
    short_refs: list[np.ndarray]  # odd lengths around the 1920-sample frame for the frame-count rule
    spk_config: dict
    spk_state: dict[str, torch.Tensor]


def synthetic_reference(seconds: float = 1.7) -> np.ndarray:
    """A chirp plus a little noise: deterministic, speech-band, inside [-1, 1]."""
    t = np.arange(int(seconds * SR)) / SR
    noise = 0.02 * np.random.RandomState(0).randn(t.size)
    return (0.3 * np.sin(2 * np.pi * (180 + 60 * t) * t) + noise).astype(np.float32)


@functools.cache
def audio_case(root: Path) -> AudioCase:
    from voxcli.models.qwen3_tts.tiny_audio import (
        build_speech_tokenizer,
        speaker_encoder_config,
        speaker_encoder_weights,
    )

    build_speech_tokenizer(root, "tiny", seed=1235)
    g = torch.Generator().manual_seed(7)
    codes = torch.randint(0, 128, (2, 16, ORACLE_FRAMES), generator=g)
    cfg = speaker_encoder_config(64)
    ref = synthetic_reference()
    short = [ref[:n].copy() for n in (1, 1919, 1921, 5000)]
    return AudioCase(root, codes, ref, short, cfg, speaker_encoder_weights(cfg, seed=1236))


@functools.cache
def oracle_outputs(root: Path) -> dict:
    case = audio_case(root)
    inp, out = root / "oracle_in.pt", root / "oracle_out.pt"
    torch.save(
        {
            "st_dir": str(root / "speech_tokenizer"),
            "codes": case.codes,
            "ref": torch.from_numpy(case.ref),
            "short_refs": [torch.from_numpy(r) for r in case.short_refs],
            "spk_config": case.spk_config,
            "spk_state": case.spk_state,
        },
        inp,
    )
    run_oracle("run_audio.py", str(inp), str(out))
    return torch.load(out, weights_only=False)

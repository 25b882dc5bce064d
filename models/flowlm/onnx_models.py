"""The checkpoint's two ONNX models, run with onnxruntime as upstream's frontend runs them (CPU provider,
all graph optimisations, one intra-op thread; inputs fed by position, as upstream names them from the
session): `speech_tokenizer_v3.onnx` (Whisper log-mel [1, 128, T] + its length [1] int32 -> 25 Hz speech
tokens) and `campplus.onnx` (fbank [1, T, 80] -> a 192-d speaker embedding).

onnxruntime is optional (voice cloning only): imported on first use, with one sentence saying how to get it.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..base import CheckpointError, InputError
from .spec import CAMPPLUS, SPEECH_TOKENIZER  # noqa: E402,F401 - named once, without torch (describe)


def _onnxruntime() -> Any:
    try:
        import onnxruntime
    except ImportError:
        raise InputError(
            "voice cloning from --ref-audio needs onnxruntime, which is not installed; install it with "
            "`pip install 'voxcli[clone]'` (or `pip install onnxruntime`)"
        ) from None
    return onnxruntime


@lru_cache(maxsize=4)
def session(path: Path) -> Any:
    if not path.is_file():
        raise InputError(
            f"{path} is missing; voice cloning from --ref-audio needs the checkpoint's {path.name}, which "
            "the released checkpoint has and the demo never does (offline, build a random-weight checkpoint "
            "with it: python scripts/make_tiny.py OUT --family cosyvoice3 --clone-models, which needs the "
            "onnx package; then -m OUT), or use a saved voice instead (vox voices)"
        )
    ort = _onnxruntime()
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    opts.intra_op_num_threads = 1
    try:
        return ort.InferenceSession(str(path), sess_options=opts, providers=["CPUExecutionProvider"])
    except Exception as e:  # noqa: BLE001 - onnxruntime raises its own types for a bad file: name it
        raise CheckpointError(f"{path} cannot be loaded by onnxruntime ({type(e).__name__}: {e})") from None


def speech_tokens(root: Path, whisper_mel: torch.Tensor, name: str = SPEECH_TOKENIZER) -> list[int]:
    """[1, 128, T] -> the speech tokens (upstream: `run(None, {in0: feat, in1: [T]})[0].flatten()`);
    `name`: the tokenizer file (CosyVoice 2's is speech_tokenizer_v2.onnx, same interface)."""
    s = session(root / name)
    ins = s.get_inputs()
    if len(ins) != 2:
        raise CheckpointError(
            f"{root / name} has {len(ins)} inputs; a speech tokenizer takes the log-mel "
            "and its length"
        )
    feat = whisper_mel.detach().cpu().numpy().astype(np.float32, copy=False)
    out = s.run(None, {ins[0].name: feat, ins[1].name: np.array([feat.shape[2]], dtype=np.int32)})[0]
    return [int(t) for t in np.asarray(out).reshape(-1).tolist()]


def speaker_embedding(root: Path, fbank: torch.Tensor) -> torch.Tensor:
    """[1, T, 80] -> [192] float32 (upstream: `run(None, {in0: feat})[0].flatten()`)."""
    s = session(root / CAMPPLUS)
    feat = fbank.detach().cpu().numpy().astype(np.float32, copy=False)
    out = s.run(None, {s.get_inputs()[0].name: feat})[0]
    return torch.tensor(np.asarray(out).reshape(-1).tolist(), dtype=torch.float32)

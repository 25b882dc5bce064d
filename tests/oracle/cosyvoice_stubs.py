"""Import-time stubs for upstream CosyVoice on torch 2.13 CPU (../shared/oracle/cosyvoice3/README.md):
modules its package imports at module level but inference never calls (whisper, torchaudio, modelscope,
matcha.utils' hydra/lightning chain), and onnxruntime sessions for checkpoints without ONNX files. Then
the pinned upstream folder goes on sys.path. Imported first by every run_cosyvoice*.py script."""

import os
import sys
import types
from pathlib import Path

HERE = Path(__file__).resolve()
UPSTREAM = Path(
    os.environ.get("VOX_COSYVOICE_UPSTREAM") or HERE.parents[3] / "shared" / "oracle" / "cosyvoice3"
)


def _module(name: str, **attrs) -> types.ModuleType:
    m = types.ModuleType(name)
    m.__spec__ = types.SimpleNamespace(name=name, loader=None, origin=None, submodule_search_locations=[])
    m.__path__ = []
    for k, v in attrs.items():
        setattr(m, k, v)
    sys.modules[name] = m
    return m


def _unused(*_a, **_k):
    raise RuntimeError("stubbed in the oracle: not used by the code paths the tests run")


def install(real_onnx: bool = True) -> None:
    import logging

    _module("whisper", log_mel_spectrogram=_unused)
    _module("whisper.tokenizer", Tokenizer=type("Tokenizer", (), {}))
    _module("modelscope", snapshot_download=_unused)
    ta = _module("torchaudio", load=_unused)
    comp = _module("torchaudio.compliance")
    comp.kaldi = _module("torchaudio.compliance.kaldi", fbank=_unused)
    ta.compliance = comp
    mu = _module("matcha.utils")
    mu.pylogger = _module("matcha.utils.pylogger", get_pylogger=lambda name=__name__: logging.getLogger(name))
    mu.audio = _module("matcha.utils.audio", mel_spectrogram=_unused)
    import matcha  # the real package (installed --no-deps); its utils is the stub

    matcha.utils = mu
    if not real_onnx:
        _module(
            "onnxruntime",
            InferenceSession=lambda *a, **k: None,
            SessionOptions=types.SimpleNamespace,
            GraphOptimizationLevel=types.SimpleNamespace(ORT_ENABLE_ALL=99),
        )
    if not UPSTREAM.is_dir():
        raise SystemExit(f"upstream CosyVoice folder {UPSTREAM} not found")
    sys.path.insert(0, str(UPSTREAM))

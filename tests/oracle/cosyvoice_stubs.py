"""Import-time stubs for upstream CosyVoice on torch 2.13 CPU (../shared/oracle/cosyvoice3/README.md):
modules its package imports at module level but inference never calls (whisper, torchaudio, modelscope,
matcha.utils' hydra/lightning chain), and onnxruntime sessions for checkpoints without ONNX files. Then
the pinned upstream folder goes on sys.path. Imported first by every run_cosyvoice*.py script.

`install(real_frontend=True)` runs upstream's audio frontend on the real libraries instead, without
importing what breaks: torchaudio's own Python files (kaldi.fbank, transforms.Resample) from the wheel
unpacked by scripts/setup_oracle_cosyvoice.sh into <venv>/torchaudio-py (its C extension is never
loaded: torchaudio._extension is a stub saying it is absent), `torchaudio.load` as its soundfile backend
reads (float32, channels first), Whisper's audio.py (openai-whisper installed --no-deps, its package
__init__ skipped) and Matcha-TTS's real utils/audio.py (librosa's mel filters)."""

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


TORCHAUDIO_PY = Path(sys.prefix) / "torchaudio-py" / "torchaudio"


def frontend_missing() -> str | None:
    """Why upstream's real audio frontend cannot run in this interpreter (None: it can)."""
    import importlib.util

    missing = [m for m in ("onnxruntime", "librosa", "whisper") if importlib.util.find_spec(m) is None]
    if not (TORCHAUDIO_PY / "compliance" / "kaldi.py").is_file():
        missing.append(f"torchaudio's Python files in {TORCHAUDIO_PY.parent}")
    if not missing:
        return None
    return f"{', '.join(missing)} missing; rebuild the venv with scripts/setup_oracle_cosyvoice.sh"


def _soundfile_load(path, *_a, **_k):
    import soundfile as sf
    import torch

    data, rate = sf.read(str(path), dtype="float32", always_2d=True)
    return torch.from_numpy(data.T.copy()), rate


def _package(m: types.ModuleType, where: Path) -> None:
    """Make stub `m` a package whose submodules are the real files in `where` (its __init__ unrun)."""
    import importlib.machinery

    m.__spec__ = importlib.machinery.ModuleSpec(m.__name__, None, is_package=True)
    m.__spec__.submodule_search_locations = [str(where)]
    m.__path__ = [str(where)]


def _real_frontend(mu: types.ModuleType) -> None:
    import importlib.util

    why = frontend_missing()
    if why is not None:
        raise SystemExit(f"upstream's audio frontend cannot run: {why}")
    whisper_dir = Path(importlib.util.find_spec("whisper").origin).parent
    _module("whisper.tokenizer", Tokenizer=type("Tokenizer", (), {}))
    w = _module("whisper")
    _package(w, whisper_dir)
    import whisper.audio

    w.log_mel_spectrogram = whisper.audio.log_mel_spectrogram
    ta = _module("torchaudio", load=_soundfile_load)
    _package(ta, TORCHAUDIO_PY)
    _module("torchaudio._extension", _IS_TORCHAUDIO_EXT_AVAILABLE=False, fail_if_no_align=lambda f: f)
    import matcha
    import torchaudio.compliance.kaldi  # noqa: F401 - upstream's frontend reads it as an attribute
    import torchaudio.transforms  # noqa: F401

    _package(mu, Path(matcha.__file__).parent / "utils")
    import matcha.utils.audio  # noqa: F401


def install(real_onnx: bool = True, real_frontend: bool = False) -> None:
    import logging

    _module("modelscope", snapshot_download=_unused)
    mu = _module("matcha.utils")
    mu.pylogger = _module("matcha.utils.pylogger", get_pylogger=lambda name=__name__: logging.getLogger(name))
    if real_frontend:
        _real_frontend(mu)
    else:
        _module("whisper", log_mel_spectrogram=_unused)
        _module("whisper.tokenizer", Tokenizer=type("Tokenizer", (), {}))
        ta = _module("torchaudio", load=_unused)
        comp = _module("torchaudio.compliance")
        comp.kaldi = _module("torchaudio.compliance.kaldi", fbank=_unused)
        ta.compliance = comp
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

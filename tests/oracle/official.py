"""Import the official `qwen_tts` package offline, in the oracle venv.

`import qwen_tts` pulls in the 25 Hz tokenizer, whose modules import sox, onnxruntime and
torchaudio.compliance.kaldi at import time; the 12 Hz models never use them, so empty stand-in modules
are registered first. transformers is imported BEFORE that: it probes optional packages with find_spec
on import, and a stand-in must not be mistaken for an installed package.
"""

import importlib.machinery
import os
import sys
import types

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import transformers  # noqa: E402,F401  (must precede the stand-ins, see above)


def _standin(name: str) -> types.ModuleType:
    mod = types.ModuleType(name)
    mod.__spec__ = importlib.machinery.ModuleSpec(name, None)
    sys.modules[name] = mod
    return mod


for _name in ("sox", "onnxruntime"):
    try:
        __import__(_name)
    except Exception:  # noqa: BLE001 - any import failure means "use the stand-in"
        _standin(_name)
try:
    import torchaudio.compliance.kaldi  # noqa: F401
except Exception:  # noqa: BLE001
    for _k in [k for k in sys.modules if k == "torchaudio" or k.startswith("torchaudio.")]:
        del sys.modules[_k]
    _ta, _comp, _kaldi = (
        _standin(n) for n in ("torchaudio", "torchaudio.compliance", "torchaudio.compliance.kaldi")
    )
    _ta.compliance, _comp.kaldi = _comp, _kaldi

from qwen_tts import Qwen3TTSModel  # noqa: E402,F401
from qwen_tts.inference.qwen3_tts_model import VoiceClonePromptItem  # noqa: E402,F401

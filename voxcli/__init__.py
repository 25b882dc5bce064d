"""voxcli: streaming text-to-speech for speech language models on an urgency-aware engine.

The Python API (`voxcli.api`): `voxcli.load(model, ...)` opens an engine and returns a `TTS`, whose
`say`, `stream`, `astream` and `batch` speak; see the README's "Python" section and docs/python.md. The API
loads on first use, so `import voxcli` (and `vox --help`) stays light: no numpy, no torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"
__all__ = ["TTS", "Audio", "RequestFieldError", "VoxError", "load", "__version__"]

if TYPE_CHECKING:
    from voxcli.api import TTS, Audio, RequestFieldError, load
    from voxcli.errors import VoxError

_API = ("TTS", "Audio", "RequestFieldError", "load")


def __getattr__(name: str) -> Any:
    # Even VoxError loads on first use: importing any submodule imports this package first, and the model
    # code under voxcli.models must pull in no other voxcli module (tests/test_model_seam.py).
    if name in _API:
        from voxcli import api

        return getattr(api, name)
    if name == "VoxError":
        from voxcli.errors import VoxError

        return VoxError
    raise AttributeError(f"module 'voxcli' has no attribute {name!r}")

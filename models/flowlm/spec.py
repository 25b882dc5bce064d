"""The ModelSpec of a checkpoint in upstream's CosyVoice layout, built the same way for a loaded program
and from its files alone (each family's `describe`: `vox voices` answers without torch;
tests/test_preflight.py checks they agree). The saved
voices are the keys of spk2info.pt, a torch pickle: read here without torch (their tensors are skipped)."""

from __future__ import annotations

import pickle
import zipfile
from collections import OrderedDict
from pathlib import Path
from typing import Any

from ..base import CheckpointError, ChunkSchedule, ModelSpec
from ..dtypes import FLOAT32_AT_LEAST, FOLLOWS, DtypePolicy, Part
from .config import FlowLMConfig

# Upstream's streaming hops (25 + pad, 50, 100 tokens, each + 3 look-ahead) as engine chunks: a chunk
# whose tokens do not complete a hop waits in the codec slot for the next one.
DEFAULT_CHUNKS = ChunkSchedule(first=28, ramp=(50,), steady=100)
SPEECH_TOKENIZER = "speech_tokenizer_v3.onnx"  # upstream's newest; CosyVoice 2's v2 has the same interface
CAMPPLUS = "campplus.onnx"


def cosyvoice_dtypes(vocoder_own: dict[str, Part] | None = None) -> DtypePolicy:
    """A CosyVoice generation's dtype policy: the LM and flow follow --dtype; the vocoder keeps float32
    (upstream halves only the LM and flow: HiFT's source signal is float32 and the CPU has no bfloat16
    istft); float64 is for the exactness checks. `vocoder_own`: vocoder children that are parts of their
    own, by child name (checkpoint.load_weights loads each in its part's dtype)."""
    own = vocoder_own or {}
    return DtypePolicy(
        parts={
            "lm": Part(FOLLOWS, ("lm",)),
            "flow": Part(FOLLOWS, ("codec_stage.flow.w",)),
            "vocoder": Part(FLOAT32_AT_LEAST, ("codec_stage.hift.w",)),
            **own,
        },
        accepts=("float32", "bfloat16", "float64"),
    )


def has_clone_models(root: Path, tokenizer: str = SPEECH_TOKENIZER) -> bool:
    """The two ONNX models voice cloning reads are in the checkpoint (upstream's release has them;
    CosyVoice 2 names its speech tokenizer v2)."""
    return (root / tokenizer).is_file() and (root / CAMPPLUS).is_file()


def cosyvoice_spec(root: Path, cfg: FlowLMConfig[Any], voices: tuple[str, ...], name: str,
                   tokenizer: str = SPEECH_TOKENIZER) -> ModelSpec:
    return ModelSpec(
        name=name,
        sample_rate=cfg.sample_rate,
        frame_rate=float(cfg.token_frame_rate),
        samples_per_frame=cfg.sample_rate // cfg.token_frame_rate,
        codebooks=1,
        chunk=DEFAULT_CHUNKS,
        max_context=cfg.lm.qwen.max_position_embeddings,
        voices=voices,
        languages=("english",),
        modes=("zero_shot", *(("clone",) if has_clone_models(root, tokenizer) else ()), "instruct"),
        split_sentences=False,
    )


class _Skipped:
    """Whatever a torch pickle builds (tensors, storages): nothing, here."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def __setstate__(self, state: Any) -> None:
        pass


class _KeysOnly(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        if (module, name) == ("collections", "OrderedDict"):
            return OrderedDict
        return _Skipped  # torch's rebuild functions and storage types; nothing else is ever called

    def persistent_load(self, pid: Any) -> Any:
        return None  # a tensor's storage: not read


def saved_voice_names(path: Path) -> tuple[str, ...]:
    """The speakers in spk2info.pt (a torch.save zip; absent: none), in file order, without torch."""
    if not path.exists():
        return ()
    try:
        with zipfile.ZipFile(path) as z:
            data = next(n for n in z.namelist() if n.endswith("/data.pkl") or n == "data.pkl")
            with z.open(data) as f:
                raw = _KeysOnly(f).load()
    except (OSError, zipfile.BadZipFile, StopIteration, pickle.UnpicklingError, EOFError) as e:
        what = f"{type(e).__name__}: {e}"
        raise CheckpointError(f"{path} cannot be read as a torch.save file ({what})") from None
    if not isinstance(raw, dict):
        raise CheckpointError(f"{path} does not hold a dict of speakers")
    return tuple(str(k) for k in raw)


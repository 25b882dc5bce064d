"""Shared fixtures: tiny random-weight Qwen3-TTS checkpoints in the official layout, built once per
test session by the project's own builder (`voxcli.models.qwen3_tts.tiny`)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

# The oracle subprocesses run with 2 threads; reduction order (and so the last bits of a random tiny
# decoder whose activations reach the hundreds) depends on the thread count.
ORACLE_THREADS = 2


@pytest.fixture(autouse=True)
def _pin_torch_threads():
    """Every test starts at the oracle's thread count, whatever an earlier test (an executor created
    with `threads=1`, say) left behind."""
    torch.set_num_threads(ORACLE_THREADS)
    yield


@pytest.fixture(scope="session")
def tiny_root(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("tiny_ckpts")


def _build(root: Path, name: str, **kw) -> Path:
    from voxcli.models.qwen3_tts.tiny import build_tiny

    out = root / name
    if not (out / "config.json").exists():
        build_tiny(out, **kw)
    return out


@pytest.fixture(scope="session")
def tiny_custom_voice(tiny_root) -> Path:
    """0.6B-like CustomVoice (predictor width = talker width, no projection)."""
    return _build(tiny_root, "tiny-custom-voice", variant="custom_voice")


@pytest.fixture(scope="session")
def tiny_base_proj(tiny_root) -> Path:
    """1.7B-like Base (voice clone) with the small_to_mtp projection."""
    return _build(tiny_root, "tiny-base-proj", variant="base", proj=True)


@pytest.fixture(scope="session")
def tiny_voice_design(tiny_root) -> Path:
    return _build(tiny_root, "tiny-voice-design", variant="voice_design")


@pytest.fixture(scope="session")
def audio_root(tmp_path_factory) -> Path:
    """The audio tests' shared case (speech tokenizer + speaker encoder weights, inputs), built once;
    see tests/support/audio_case.py."""
    from support.audio_case import audio_case

    r = tmp_path_factory.getbasetemp() / "audio_case"
    r.mkdir(exist_ok=True)
    audio_case(r)
    return r


@pytest.fixture(scope="session")
def cosyvoice_ckpt(tmp_path_factory):
    """A tiny CosyVoice 3 checkpoint whose spk2info holds a second speaker (another prompt length and pad);
    built once per session for every module that asks (the codec, role-binding and preflight tests: they
    only read it, and copy it before changing anything)."""
    from voxcli.models.cosyvoice3.tiny import SPEAKER, build_tiny, speaker_entry

    d = build_tiny(tmp_path_factory.mktemp("cosy") / "ckpt")
    spk = torch.load(d / "spk2info.pt", weights_only=True)
    spk["second"] = speaker_entry(d, 22, torch.Generator().manual_seed(5))  # another prompt length / pad
    torch.save({SPEAKER: spk[SPEAKER], "second": spk["second"]}, d / "spk2info.pt")
    return d


@pytest.fixture(scope="session")
def demo_store(tmp_path_factory):
    """Demo checkpoints built once per session; `demo_store.cache(dir, "demo-csm", ...)` makes `dir` a
    VOX_CACHE holding copies (tests/support/demo_store.py)."""
    from support.demo_store import DemoStore

    return DemoStore(tmp_path_factory.getbasetemp() / "demo_store")

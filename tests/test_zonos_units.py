"""Zonos without the oracle: the hybrid refused, requests refused in one sentence before any work, the
delay tracker's stop diagonal, a missing espeak named, the option schema's bounds, and the registration
(claims its folder, demo alias, sim model)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from voxcli.models.base import CheckpointError, InputError, SynthesisRequest


@pytest.fixture(scope="module")
def program(tmp_path_factory):
    from voxcli.models import load_model
    from voxcli.models.zonos.tiny import build_tiny

    return load_model(str(build_tiny(tmp_path_factory.mktemp("zonos_units") / "ckpt")))


def test_hybrid_checkpoint_is_refused_in_one_sentence():
    from voxcli.models.zonos.config import parse_config
    from voxcli.models.zonos.tiny import SIZES

    cfg = json.loads(json.dumps(SIZES["tiny"]))
    cfg["backbone"]["ssm_cfg"] = {"layer": "Mamba2"}
    with pytest.raises(CheckpointError, match="mamba-ssm.*Zonos-v0.1-transformer"):
        parse_config(cfg, "config.json")


@pytest.mark.parametrize(
    "req,msg",
    [
        (SynthesisRequest(text="hi", cfg_scale=1.0), "cfg_scale must not be 1"),
        (SynthesisRequest(text="hi", language="xx"), "does not speak language 'xx'"),
        (SynthesisRequest(text="hi", voice="nobody"), "no voice 'nobody'"),
        (SynthesisRequest(text="hi", options={"pitch_std": 500.0}), "options.pitch_std must be"),
        (
            SynthesisRequest(
                text="hi",
                options={
                    "emotion_happiness": 0.0,
                    "emotion_sadness": 0.0,
                    "emotion_disgust": 0.0,
                    "emotion_fear": 0.0,
                    "emotion_surprise": 0.0,
                    "emotion_anger": 0.0,
                    "emotion_other": 0.0,
                    "emotion_neutral": 0.0,
                },
            ),
            "must not all be 0",
        ),
        (
            SynthesisRequest(text="hi", ref_audio=np.zeros(4000, dtype=np.float32), ref_sample_rate=16000),
            r"250 ms; give at least 0.5 s",
        ),
        (
            SynthesisRequest(text="hi", ref_audio=np.zeros(16000, dtype=np.float32), ref_sample_rate=4000),
            "4000 Hz; Zonos' speaker model needs at least 8000 Hz",
        ),
        (
            SynthesisRequest(
                text="hi", ref_audio=np.zeros(16000 * 31, dtype=np.float32), ref_sample_rate=16000
            ),
            "31.0 s; Zonos' speaker model takes at most 30 s",
        ),
        (
            SynthesisRequest(text="hi", ref_audio=np.zeros(16000, dtype=np.float32), ref_sample_rate=16000,
                             voice="aurora"),
            "not both",
        ),
        (
            SynthesisRequest(text="hi", ref_audio=np.zeros(16000, dtype=np.float32), ref_sample_rate=16000,
                             ref_text="hello"),
            "drop the transcript",
        ),
        (SynthesisRequest(text="   "), "empty"),
    ],
)
def test_bad_requests_are_refused_before_work(program, req, msg):
    with pytest.raises(InputError, match=msg):
        program.check(req)


def test_prompt_is_one_pair_with_prefix_and_lead(program):
    p = program.prepare(SynthesisRequest(text="Hello.", voice="aurora", max_frames=10))
    assert p.width == 2 and p.lead_steps == 8
    assert p.length == len(p.data.ids) + 6 + 1  # phonemes, six conditioner tokens, the first column
    assert p.data.values["speaker"].shape == (128,)
    assert program.prepare(SynthesisRequest(text="Hello.")).data.values["speaker"] is None


def _voice_clip(rate: int, seconds: float = 1.2) -> np.ndarray:
    t = np.arange(int(rate * seconds)) / rate
    return (0.3 * np.sin(2 * np.pi * 150 * t) * np.sin(2 * np.pi * 2 * t)).astype(np.float32)


def test_clip_speaker_is_an_embedding_at_any_rate(program):
    """A clip at 16 kHz and the same clip at 24 kHz (resampled as the reference does) give close but not
    identical embeddings; each is bfloat16-valued, the prefix's speaker, and cached per clip."""
    a = program.prepare(SynthesisRequest(text="Hello.", ref_audio=_voice_clip(16000), ref_sample_rate=16000))
    b = program.prepare(SynthesisRequest(text="Hello.", ref_audio=_voice_clip(24000), ref_sample_rate=24000))
    ea, eb = a.data.values["speaker"], b.data.values["speaker"]
    assert ea.shape == eb.shape == (128,) and np.isfinite(ea).all()
    assert not np.array_equal(ea, eb) and np.abs(ea - eb).max() < 0.1 * np.abs(ea).max()
    import torch

    assert np.array_equal(torch.from_numpy(ea).bfloat16().float().numpy(), ea)
    assert len(program.speaker_clips.items) == 2
    program.prepare(SynthesisRequest(text="Again.", ref_audio=_voice_clip(16000), ref_sample_rate=16000))
    assert len(program.speaker_clips.items) == 2


def test_missing_speaker_model_is_one_sentence(tmp_path, monkeypatch):
    import shutil

    from voxcli.models import load_model
    from voxcli.models.zonos import speaker_model
    from voxcli.models.zonos.tiny import build_tiny

    ckpt = build_tiny(tmp_path / "ckpt", codec=False)
    shutil.rmtree(ckpt / "speaker_embedding")
    monkeypatch.setattr(speaker_model, "cached_snapshot", lambda repo: None)
    prog = load_model(str(ckpt))
    req = SynthesisRequest(text="hi", ref_audio=_voice_clip(16000), ref_sample_rate=16000)
    with pytest.raises(CheckpointError, match=r"vox models pull Zyphra/Zonos-v0.1-speaker-embedding"):
        prog.check(req)


def test_delay_tracker_stop_diagonal():
    from voxcli.models.zonos.delay import DelayTracker

    t = DelayTracker(limit=100, eos=1024, masked=1025)
    frames = []
    t.record(t.plan(np.full(9, 5), prefill=True))
    col = 1
    done = False
    while not done:
        col += 1
        tok = np.full(9, col % 1000)
        if col == 20:
            tok[0] = 1024
        frame, done = t.record(t.plan(tok, prefill=False))
        if frame is not None:
            frames.append(frame)
    # EOS at column 20 is frame 19's codebook 0: frames 0..18 come out, the EOS frame and later do not
    assert col == 20 + 8 and len(frames) == 19
    assert frames[-1].tolist() == [(19 + k) % 1000 for k in range(9)]  # frame 18: codebook k at column 19 + k
    assert all(t.columns[20 + i][i] == 1024 for i in range(9))
    assert all((t.columns[20 + i][:i] == 1025).all() for i in range(9))


def test_max_frames_bound_emits_exactly_the_limit():
    from voxcli.models.zonos.delay import DelayTracker

    t = DelayTracker(limit=5, eos=1024, masked=1025)
    n, done = 0, False
    t.record(t.plan(np.zeros(9, dtype=np.int64), prefill=True))
    while not done:
        frame, done = t.record(t.plan(np.ones(9, dtype=np.int64), prefill=False))
        n += frame is not None
    assert n == 5


def test_missing_espeak_names_the_package(monkeypatch):
    import builtins

    from voxcli.models.zonos import text

    real = builtins.__import__

    def no_phonemizer(name, *a, **k):
        if name.startswith("phonemizer"):
            raise ImportError(name)
        return real(name, *a, **k)

    text.backend.cache_clear()
    monkeypatch.setattr(builtins, "__import__", no_phonemizer)
    with pytest.raises(InputError, match=r"pip install 'voxcli\[zonos\]'"):
        text.phoneme_ids("hi", "en-us")
    text.backend.cache_clear()


def test_numbers_are_spelled_as_the_checkpoint_learned():
    from voxcli.models.zonos.text import spell_numbers

    assert spell_numbers("In 1984 I paid $3.50 for 2,000 apples, the 3rd time.") == (
        "In nineteen eighty-four I paid three dollars, fifty cents for two thousand apples, the third time."
    )


def test_registration():
    from voxcli.models import registry

    fam = registry.find_family("zonos")
    assert fam is not None and registry.find_demo("demo-zonos") is not None
    assert registry.find_sim_model("zonos-v0.1") is not None
    assert registry.find_hub_model("Zyphra/Zonos-v0.1-transformer") is not None

"""Zonos parity with upstream (../shared/oracle/zonos at bc40d98, its own venv): a tiny random checkpoint
built by upstream's own classes in the released layout (config.json + model.safetensors; the DAC at codec/),
codebook 0's EOS calibrated so greedy generation ends by itself, loaded through our normal loader. Float32 on
both sides (upstream computes in bf16, where random weights tie logits; the algorithm is the same).

Checked: the phonemes; greedy codes identical to `Zonos.generate` with the default speaker and conditioning
(ends natural, the nine-column EOS diagonal included) and at guidance 3; other conditioning values through
the option schema; seeded sampling (the request's generator draws what upstream's global one draws after
`torch.manual_seed`); the waveform offline and streamed in chunks; `vox say --greedy` end to end; the speaker
embedding of a clip (upstream's ResNet293 + LDA at a small width, random weights and batch-norm statistics,
its fbank and resampling front end on a 22.05 kHz stereo clip) and `vox say --greedy --ref-audio` against
upstream's generate with `make_speaker_embedding`'s output.
"""

from __future__ import annotations

import numpy as np
import pytest
import soundfile as sf
from oracle.drive_zonos import run_zonos
from support.dia_driver import run_alone
from typer.testing import CliRunner
from voxcli.models.base import CodecItem, SamplingParams, SynthesisRequest

pytestmark = pytest.mark.oracle

TEXT = "Hello there, this is a quick test of 2 voices."
OTHER = "Guten Tag, wie geht es?"
EXPRESSIVE = dict(
    emotion=[0.1, 0.6, 0.0, 0.0, 0.1, 0.0, 0.1, 0.1], pitch_std=80.0, speaking_rate=22.0, fmax=24000.0
)


CLIP_RATE = 22050  # not 16 kHz: the clip goes through both sides' resampler


def _write_clip(path) -> None:
    """1.6 s of stereo 16-bit 'voice': a gliding harmonic tone with noise, different per channel."""
    rng = np.random.default_rng(4)
    t = np.arange(int(1.6 * CLIP_RATE)) / CLIP_RATE
    f0 = 140 + 30 * np.sin(2 * np.pi * 0.7 * t)
    phase = 2 * np.pi * np.cumsum(f0) / CLIP_RATE
    voice = sum(np.sin(k * phase) / k for k in range(1, 8)) * (0.6 + 0.4 * np.sin(2 * np.pi * 3 * t))
    pcm = np.stack([0.25 * voice, 0.2 * voice], axis=1) + 0.02 * rng.standard_normal((t.size, 2))
    sf.write(str(path), pcm.astype(np.float32), CLIP_RATE, subtype="PCM_16")


def _sizes() -> dict:
    from voxcli.models.zonos.tiny import SIZES

    return {
        "speaker": {"width": 4, "seed": 5},
        "seed": 3,
        "config": SIZES["tiny"],
        "calibrate": {"case": {"text": TEXT, "greedy": True}, "lo": 30, "hi": 60},
    }


@pytest.fixture(scope="module")
def oracle(tmp_path_factory):
    from voxcli.models.codecs.dac.tiny import build_tiny_dac

    d = tmp_path_factory.mktemp("zonos_oracle")
    ckpt = d / "ckpt"
    build_tiny_dac(ckpt / "codec", seed=1)
    _write_clip(d / "clip.wav")
    cases = [
        {"name": "clone", "text": TEXT, "greedy": True, "max_new": 40, "ref_audio": str(d / "clip.wav")},
        {"name": "greedy", "text": TEXT, "greedy": True, "max_new": 200},
        {"name": "cfg3", "text": TEXT, "greedy": True, "cfg": 3.0, "max_new": 40},
        {"name": "sampled", "text": TEXT, "seed": 7, "max_new": 40},
        {
            "name": "options",
            "text": OTHER,
            "language": "de",
            "greedy": True,
            "max_new": 30,
            "cond": EXPRESSIVE,
        },
    ]
    return ckpt, run_zonos(ckpt, _sizes(), cases, d)


@pytest.fixture(scope="module")
def program(oracle):
    from voxcli.models import load_model

    return load_model(str(oracle[0]))


def _greedy(text: str = TEXT, frames: int = 200, **kw) -> SynthesisRequest:
    return SynthesisRequest(text=text, sampling=SamplingParams(greedy=True), max_frames=frames, **kw)


def test_phonemes_match_upstream(oracle):
    from voxcli.models.zonos.text import phonemes

    assert phonemes(TEXT, "en-us") == oracle[1]["greedy"]["phonemes"]
    assert phonemes(OTHER, "de") == oracle[1]["options"]["phonemes"]


def test_greedy_default_conditioning_ends_naturally_like_upstream(program, oracle):
    want = oracle[1]["greedy"]["codes"].numpy()
    assert 20 <= want.shape[0] < 200, "the calibrated EOS must end the reference by itself"
    codes = run_alone(program, program.prepare(_greedy()), page_size=4)
    assert codes.shape == want.shape
    bad = np.argwhere(codes != want)
    assert bad.size == 0, f"first mismatch at frame/codebook {bad[0].tolist()}"


def test_greedy_guidance_3(program, oracle):
    want = oracle[1]["cfg3"]["codes"].numpy()
    codes = run_alone(program, program.prepare(_greedy(frames=40, cfg_scale=3.0)), page_size=8)
    assert codes.shape == want.shape == (40, 9) and np.array_equal(codes, want)
    assert not np.array_equal(want, oracle[1]["greedy"]["codes"].numpy()[:40])


def test_conditioning_options_and_language(program, oracle):
    e = EXPRESSIVE
    names = ("happiness", "sadness", "disgust", "fear", "surprise", "anger", "other", "neutral")
    opts = {f"emotion_{n}": v for n, v in zip(names, e["emotion"], strict=True)}
    opts.update(pitch_std=e["pitch_std"], speaking_rate=e["speaking_rate"], fmax=e["fmax"])
    req = _greedy(OTHER, frames=30, language="de", options=opts)
    codes = run_alone(program, program.prepare(req), page_size=8)
    assert np.array_equal(codes, oracle[1]["options"]["codes"].numpy())


def test_seeded_sampling_matches_upstream(program, oracle):
    # min_p 0.1 at temperature 1 (upstream's defaults): the request's generator seeded with 7 draws what
    # upstream draws from torch's global generator after torch.manual_seed(7)
    req = SynthesisRequest(text=TEXT, seed=7, max_frames=40)
    codes = run_alone(program, program.prepare(req), page_size=8)
    want = oracle[1]["sampled"]["codes"].numpy()
    assert codes.shape == want.shape and np.array_equal(codes, want)


def test_waveform_offline_and_streamed(program, oracle):
    ref = oracle[1]["greedy"]
    want, codes = ref["wav"].numpy(), ref["codes"].numpy()
    assert np.abs(want).max() > 0.05  # loud enough for the tolerance to mean something
    offline = program.codec_model.decode_offline(codes)
    assert offline.shape == want.shape and np.abs(offline - want).max() <= 1e-4
    program.init_codec_slots(2)
    parts, start = [], 0
    for i, n in enumerate((12, 4, 6)):
        end = min(start + n, len(codes)) if i < 2 else len(codes)
        parts.append(
            program.codec([CodecItem(slot=1, codes=codes[start:end], first=i == 0, last=end == len(codes))])[
                0
            ]
        )
        start = end
    streamed = np.concatenate(parts)
    assert streamed.shape == want.shape and np.abs(streamed - want).max() <= 1e-4


def test_vox_say_greedy_reproduces_upstream(oracle, tmp_path, monkeypatch):
    from voxcli import cli

    monkeypatch.setattr(cli.console, "STATE", cli.console._State())
    out = tmp_path / "say.wav"
    r = CliRunner().invoke(
        cli.app,
        [
            "say",
            "-m",
            str(oracle[0]),
            TEXT,
            "--greedy",
            "--max-frames",
            "200",
            "--executor",
            "cpu",
            "--device",
            "cpu",
            "-o",
            str(out),
            "--quiet",
        ],
    )
    assert r.exit_code == 0, r.output
    got, sr = sf.read(str(out), dtype="float32")
    want = oracle[1]["greedy"]["wav"].numpy()
    assert sr == 44100 and got.shape == want.shape
    assert np.abs(got - want).max() <= 1e-4  # 16-bit WAV: quantisation is 1.5e-5


def test_speaker_embedding_of_a_clip_matches_upstream(program, oracle):
    from voxcli.models.zonos.speaker_model import conditioning_embedding, embed_clip

    ref = oracle[1]["clone"]
    clip, rate = sf.read(str(oracle[0].parent / "clip.wav"), dtype="float32", always_2d=True)
    model = program.speaker_clips
    emb = model.embedding(clip.mean(axis=1), rate)  # loads the speaker model from speaker_embedding/
    raw, lda = embed_clip(model.model, clip.mean(axis=1), rate)
    want_raw, want_lda = ref["speaker_raw"].numpy(), ref["speaker_lda"].numpy()
    assert raw.shape == want_raw.shape == (256,) and lda.shape == want_lda.shape == (128,)
    assert np.abs(want_lda).max() > 0.1  # the tolerance must mean something
    assert np.abs(raw - want_raw).max() <= 1e-4 and np.abs(lda - want_lda).max() <= 1e-4
    # make_speaker_embedding's bfloat16 rounding, as the prefix conditioner receives it
    assert np.array_equal(emb, ref["speaker"].numpy()) and np.array_equal(emb, conditioning_embedding(lda))


def test_greedy_codes_with_a_clip_speaker_match_upstream(program, oracle):
    clip, rate = sf.read(str(oracle[0].parent / "clip.wav"), dtype="float32", always_2d=True)
    req = _greedy(frames=40, ref_audio=clip.mean(axis=1), ref_sample_rate=rate)
    codes = run_alone(program, program.prepare(req), page_size=8)
    want = oracle[1]["clone"]["codes"].numpy()
    assert codes.shape == want.shape == (40, 9) and np.array_equal(codes, want)
    assert not np.array_equal(want, oracle[1]["greedy"]["codes"].numpy()[:40])  # the speaker matters


def test_vox_say_greedy_ref_audio_reproduces_upstream(oracle, tmp_path, monkeypatch):
    from voxcli import cli

    monkeypatch.setattr(cli.console, "STATE", cli.console._State())
    out = tmp_path / "clone.wav"
    args = ["say", "-m", str(oracle[0]), TEXT, "--greedy", "--max-frames", "40"]
    args += ["--ref-audio", str(oracle[0].parent / "clip.wav"), "--executor", "cpu", "--device", "cpu"]
    r = CliRunner().invoke(cli.app, [*args, "-o", str(out), "--quiet"])
    assert r.exit_code == 0, r.output
    ref = oracle[1]["clone"]
    got, sr = sf.read(str(out), dtype="float32")
    want = ref["wav"].numpy()
    assert sr == 44100 and got.shape == want.shape
    assert np.abs(got - want).max() <= 1e-4

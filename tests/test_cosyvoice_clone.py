"""CosyVoice 3 voice cloning and instructions without the oracle: the feature ports on signals whose answer
is known, the prompt layout the LM gets, the token/mel alignment, the clip cache, and the one-sentence
errors `check` gives before synthesis (the parity with upstream's frontend is
tests/test_cosyvoice_clone_parity.py)."""

from __future__ import annotations

import math
import sys

import numpy as np
import pytest
import torch
from voxcli.models.base import InputError, SamplingParams, SynthesisRequest

pytest.importorskip("onnxruntime", reason="voice cloning needs onnxruntime (the test extra installs it)")
pytest.importorskip("onnx", reason="the tiny ONNX models are exported with onnx (the test extra installs it)")

RATE = 22050


def _clip(seconds: float = 1.5, rate: int = RATE) -> np.ndarray:
    t = np.arange(int(rate * seconds)) / rate
    return (0.3 * np.sin(2 * np.pi * 150 * t) + 0.01 * np.random.RandomState(0).randn(t.size)).astype(
        np.float32
    )


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory):
    from voxcli.models.cosyvoice3.tiny import build_tiny
    from voxcli.models.flowlm.tiny_onnx import write_tiny_onnx

    root = build_tiny(tmp_path_factory.mktemp("cosy_clone_unit") / "ckpt")
    write_tiny_onnx(root)
    return root


@pytest.fixture(scope="module")
def program(ckpt):
    from voxcli.models import load_model

    return load_model(str(ckpt))


def test_resample_keeps_a_band_limited_tone():
    from voxcli.models.audio.torchaudio_resample import resample

    for orig, new in ((48000, 16000), (22050, 24000), (44100, 16000)):
        n = orig  # one second
        x = torch.sin(2 * math.pi * 440 * torch.arange(n, dtype=torch.float64) / orig).float()
        y = resample(x[None], orig, new)[0]
        assert y.shape[0] == math.ceil(new * n / orig)
        ref = torch.sin(2 * math.pi * 440 * torch.arange(y.shape[0], dtype=torch.float64) / new).float()
        mid = slice(new // 10, -new // 10)  # away from the zero-padded edges
        assert (y[mid] - ref[mid]).abs().max() < 2e-3, (orig, new)
    same = x[None]
    assert resample(same, 16000, 16000) is same


def test_kaldi_fbank_frames_and_a_tone_peak():
    from voxcli.models.flowlm.kaldi_fbank import fbank, kaldi_mel_banks

    n = 16000
    x = 0.5 * torch.sin(2 * math.pi * 1000 * torch.arange(n) / 16000)
    f = fbank(x[None])
    assert f.shape == (1 + (n - 400) // 160, 80)
    banks = kaldi_mel_banks(80, 512, 16000.0)
    bin_1k = 1000 * 512 // 16000
    assert int(f.mean(0).argmax()) == int(banks[:, bin_1k].argmax())  # the 1 kHz band is loudest


def test_whisper_log_mel_range_and_frames():
    from voxcli.models.flowlm.features import whisper_log_mel

    x = torch.from_numpy(_clip(1.0, 16000))[None]
    m = whisper_log_mel(x)
    assert m.shape == (1, 128, 16000 // 160)
    # log10 floored 8 below the max, then (x + 4) / 4: a span of at most 2
    assert float(m.max() - m.min()) <= 2.0 + 1e-6


def test_clone_prompt_layout_and_alignment(program, ckpt):
    from voxcli.models.flowlm.clone import clip_prompt, zero_shot_text

    wav = _clip()
    clip = clip_prompt(ckpt, wav, RATE, program.mel_params)
    mel_frames = math.ceil(24000 * wav.size / RATE) // 480  # the prompt mel at 50 Hz before the cut
    whisper_frames = math.ceil(16000 * wav.size / RATE) // 160  # 100 Hz
    tokens = math.ceil(math.ceil(whisper_frames / 2) / 2)  # the tiny tokenizer's two stride-2 convolutions
    assert len(clip.tokens) == min(mel_frames // 2, tokens)
    assert clip.feat.shape == (2 * len(clip.tokens), 80) and clip.embedding.shape == (192,)
    req = SynthesisRequest(
        text="Hello world.",
        ref_audio=wav,
        ref_sample_rate=RATE,
        ref_text="This is my voice.",
        sampling=SamplingParams(greedy=True),
    )
    prompt = program.prepare(req)
    text_ids = program.text_ids("Hello world.")
    prompt_ids = program.tokenizer.encode(zero_shot_text("This is my voice."))
    assert zero_shot_text("x") == "You are a helpful assistant.<|endofprompt|>x"
    # [sos, prompt text + text, task_id, prompt speech tokens]
    assert prompt.length == 1 + len(prompt_ids) + len(text_ids) + 1 + len(clip.tokens)
    assert torch.equal(prompt.data.voice.prompt_tokens, torch.tensor(clip.tokens))


def test_instructions_replace_the_prompt_text_and_drop_lm_speech(program, ckpt):
    from voxcli.models.flowlm.clone import instruct_text

    assert instruct_text("Speak slowly.") == "You are a helpful assistant. Speak slowly.<|endofprompt|>"
    ids = program.text_ids("Hello world.")
    instr = program.tokenizer.encode(instruct_text("Speak slowly."))
    saved = program.prepare(SynthesisRequest(text="Hello world.", instructions="Speak slowly."))
    assert saved.length == 1 + len(instr) + len(ids) + 1  # no prompt speech tokens in the LM
    voice = next(iter(program.speakers.values())).voice
    assert saved.data.voice is voice  # the flow keeps the saved speaker's prompt
    cloned = program.prepare(
        SynthesisRequest(
            text="Hello world.", instructions="Speak slowly.", ref_audio=_clip(), ref_sample_rate=RATE
        )
    )
    assert cloned.length == saved.length
    assert not torch.equal(cloned.data.voice.embedding, voice.embedding)


def test_one_clip_runs_the_onnx_models_once(program, monkeypatch):
    from voxcli.models.flowlm import clone

    calls = []
    real = clone.speech_tokens
    monkeypatch.setattr(clone, "speech_tokens", lambda *a: calls.append(1) or real(*a))
    program.clips.items.clear()
    wav = _clip(1.2)
    for _ in range(3):
        program.prepare(
            SynthesisRequest(text="Hi.", ref_audio=wav, ref_sample_rate=RATE, ref_text="A voice.")
        )
    assert len(calls) == 1


@pytest.mark.parametrize(
    "kwargs,needle",
    [
        (dict(ref_audio=_clip(), ref_sample_rate=8000, ref_text="a"), "at least 16000 Hz"),
        (dict(ref_audio=_clip(31.0, 16000), ref_sample_rate=16000, ref_text="a"), "at most 30 s"),
        (dict(ref_audio=_clip(0.01, 16000), ref_sample_rate=16000, ref_text="a"), "at least 25 ms"),
        (dict(ref_audio=np.zeros((2, 100), np.float32), ref_sample_rate=16000, ref_text="a"), "mono"),
        (dict(ref_audio=np.full(20000, np.nan, np.float32), ref_sample_rate=16000, ref_text="a"), "NaN"),
        (dict(ref_audio=_clip(), ref_sample_rate=RATE), "--ref-text"),
        (dict(ref_audio=_clip(), ref_sample_rate=RATE, ref_text="  "), "--ref-text"),
        (dict(ref_text="hello"), "--ref-audio"),
        (dict(ref_audio=_clip(), ref_sample_rate=RATE, ref_text="a", voice="tiny_speaker"), "not both"),
        (dict(ref_audio=_clip(), ref_sample_rate=RATE, ref_text="a", instructions="b"), "instruct2"),
        (dict(instructions="   "), "instructions are empty"),
        (dict(voice="nobody"), "no voice 'nobody'"),
        (dict(language="chinese"), "english"),
    ],
)
def test_check_refuses_in_one_sentence(program, kwargs, needle):
    with pytest.raises(InputError) as e:
        program.check(SynthesisRequest(text="Hello.", **kwargs))
    assert needle in str(e.value) and "\n" not in str(e.value)


def test_missing_onnx_file_or_runtime_is_one_sentence(tmp_path, ckpt, monkeypatch):
    import shutil

    from voxcli.models import load_model
    from voxcli.models.flowlm import onnx_models

    bare = tmp_path / "bare"
    shutil.copytree(ckpt, bare)
    (bare / "campplus.onnx").unlink()
    p = load_model(str(bare))
    req = SynthesisRequest(text="Hello.", ref_audio=_clip(), ref_sample_rate=RATE, ref_text="a")
    assert "clone" not in p.spec.modes and "clone" in load_model(str(ckpt)).spec.modes
    with pytest.raises(InputError, match="campplus.onnx is missing"):
        p.check(req)
    p.check(SynthesisRequest(text="Hello."))  # a saved voice needs no ONNX model
    onnx_models.session.cache_clear()
    monkeypatch.setitem(sys.modules, "onnxruntime", None)
    with pytest.raises(InputError, match=r"needs onnxruntime, which is not installed; install it with"):
        load_model(str(ckpt)).check(req)
    onnx_models.session.cache_clear()


def test_vox_say_and_voices_with_a_clip(ckpt, tmp_path, monkeypatch):
    import soundfile as sf
    from typer.testing import CliRunner

    from voxcli import cli

    monkeypatch.setattr(cli.console, "STATE", cli.console._State())
    clip = tmp_path / "me.wav"
    sf.write(str(clip), _clip(), RATE)
    out = tmp_path / "o.wav"
    base = ["say", "-m", str(ckpt), "Hello.", "--greedy", "--max-frames", "30", "--quiet", "-o", str(out)]
    r = CliRunner().invoke(cli.app, [*base, "--ref-audio", str(clip), "--ref-text", "This is my voice."])
    assert r.exit_code == 0, r.output
    assert sf.info(str(out)).frames == 30 * 960
    r = CliRunner().invoke(cli.app, [*base, "--ref-audio", str(clip)])
    assert r.exit_code != 0 and "--ref-text" in r.output and not out.with_name("x").exists()
    r = CliRunner().invoke(cli.app, ["voices", "-m", str(ckpt)])
    assert r.exit_code == 0 and "clone" in r.output and "instruct" in r.output, r.output

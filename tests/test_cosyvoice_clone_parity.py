"""CosyVoice 3 zero-shot cloning and instructions against upstream's own frontend (the CosyVoice oracle venv,
with its real audio libraries: torchaudio's resampler and Kaldi fbank, Whisper's log-mel, Matcha's mel,
onnxruntime), on our tiny checkpoint plus tiny random ONNX models (models/flowlm/tiny_onnx.py).

Checked: `frontend_zero_shot` on clips at 16 / 24 / 44.1 kHz (one stereo) gives our prompt text ids,
speech tokens, prompt mel and speaker embedding; upstream's greedy `inference_zero_shot(text, prompt_text,
wav)` and `inference_instruct2(text, instruct, wav)` waveforms are `vox say --ref-audio ... --ref-text ...`
and `vox say --ref-audio ... --instructions ...` (<= 1e-4; the WAV's 16-bit quantisation is 1.5e-5).
"""

from __future__ import annotations

import numpy as np
import pytest
import soundfile as sf
from oracle.drive_cosyvoice import require_audio_frontend, run_cases
from support.cosyvoice_clone_case import (
    INSTRUCTION,
    REF_TEXT,
    TEXT,
    UPSTREAM_INSTRUCT,
    UPSTREAM_PROMPT,
    write_clip,
)
from typer.testing import CliRunner

pytestmark = pytest.mark.oracle
pytest.importorskip("onnxruntime", reason="voice cloning needs onnxruntime (the test extra installs it)")
pytest.importorskip("onnx", reason="the tiny ONNX models are exported with onnx (the test extra installs it)")

CLIPS = {"c16": (16000, 1), "c24": (24000, 1), "c44": (44100, 2)}


@pytest.fixture(scope="module")
def oracle(tmp_path_factory):
    from voxcli.models.cosyvoice3.tiny import build_tiny
    from voxcli.models.flowlm.tiny_onnx import write_tiny_onnx

    require_audio_frontend()
    d = tmp_path_factory.mktemp("cosy_clone")
    ckpt = build_tiny(d / "ckpt")
    write_tiny_onnx(ckpt)
    clips = {}
    for name, (rate, ch) in CLIPS.items():
        clips[name] = d / f"{name}.wav"
        write_clip(clips[name], rate, ch)
    cases = [
        {"name": name, "kind": "frontend", "wav": str(p), "prompt_text": UPSTREAM_PROMPT}
        for name, p in clips.items()
    ]
    cases += [
        {
            "name": "clone",
            "kind": "tts",
            "text": TEXT,
            "wav": str(clips["c44"]),
            "prompt_text": UPSTREAM_PROMPT,
            "stream": True,
        },
        {
            "name": "instruct",
            "kind": "tts",
            "text": TEXT,
            "wav": str(clips["c16"]),
            "instruct": UPSTREAM_INSTRUCT,
            "stream": True,
        },
    ]
    return ckpt, clips, run_cases(ckpt, cases, d)


@pytest.mark.parametrize("name", list(CLIPS))
def test_clone_prompt_matches_upstream_frontend(oracle, name):
    import torch
    from voxcli.models import load_model
    from voxcli.models.flowlm.clone import clip_prompt, zero_shot_text

    from voxcli.request_fields import read_ref_audio

    ckpt, clips, ref = oracle
    program = load_model(str(ckpt))
    want = ref[name]
    wav, rate = read_ref_audio(clips[name])  # what `vox say --ref-audio` reads
    got = clip_prompt(ckpt, wav, rate, program.mel_params)
    assert program.tokenizer.encode(zero_shot_text(REF_TEXT)) == want["prompt_text"]
    assert got.tokens == want["llm_tokens"] == want["flow_tokens"]
    assert len(got.tokens) > 20 and len(set(got.tokens)) > 3  # a real token sequence, not one id
    assert got.feat.shape == want["feat"].shape == (2 * len(got.tokens), 80)
    assert torch.equal(got.feat, want["feat"].float())
    assert torch.allclose(got.embedding, want["embedding"].float(), atol=1e-6, rtol=0)
    assert torch.equal(want["embedding"], want["llm_embedding"])


def _say(ckpt, out, *extra: str):
    from voxcli import cli

    args = ["say", "-m", str(ckpt), TEXT, "--greedy", "--executor", "cpu", "--device", "cpu", "-o", str(out)]
    return CliRunner().invoke(cli.app, [*args, "--quiet", *extra])


@pytest.mark.parametrize(
    "case,flags",
    [
        ("clone", ("--ref-audio", "c44", "--ref-text", REF_TEXT)),
        ("instruct", ("--ref-audio", "c16", "--instructions", INSTRUCTION)),
    ],
)
def test_vox_say_clone_reproduces_upstream(oracle, tmp_path, monkeypatch, case, flags):
    from voxcli import cli

    monkeypatch.setattr(cli.console, "STATE", cli.console._State())
    ckpt, clips, ref = oracle
    flags = tuple(str(clips[f]) if f in clips else f for f in flags)
    out = tmp_path / "say.wav"
    r = _say(ckpt, out, *flags)
    assert r.exit_code == 0, r.output
    got, sr = sf.read(str(out), dtype="float32")
    want = ref[case]["wav"]
    assert len(ref[case]["raw_tokens"]) >= 20
    assert sr == 24000 and got.shape == want.shape
    assert np.abs(got - want).max() <= 1e-4

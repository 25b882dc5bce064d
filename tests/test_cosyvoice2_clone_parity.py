"""CosyVoice 2 cloning and instructions against upstream's own frontend and `CosyVoice2` class (the CosyVoice
oracle venv with its real audio libraries), on our tiny checkpoint plus tiny random ONNX models named as
CosyVoice2-0.5B names them (`speech_tokenizer_v2.onnx`, `campplus.onnx`; models/flowlm/tiny_onnx.py).

Checked: upstream's greedy `inference_zero_shot(text, prompt_text, wav)` (CosyVoice 2 speaks the transcript
as it is) and `inference_instruct2(text, "INSTRUCTION<|endofprompt|>", wav)` after torch.manual_seed(N) are
`vox say --ref-audio ... --ref-text ... --seed N` and `vox say --ref-audio ... --instructions ... --seed N`
(<= 1e-4; the WAV's 16-bit quantisation is 1.5e-5).
"""

from __future__ import annotations

import numpy as np
import pytest
import soundfile as sf
from oracle.drive_cosyvoice import require_audio_frontend, run_cases
from support.cosyvoice_clone_case import INSTRUCTION, REF_TEXT, TEXT, write_clip
from typer.testing import CliRunner

pytestmark = pytest.mark.oracle
pytest.importorskip("onnxruntime", reason="voice cloning needs onnxruntime (the test extra installs it)")
pytest.importorskip("onnx", reason="the tiny ONNX models are exported with onnx (the test extra installs it)")

SEED = 9


@pytest.fixture(scope="module")
def oracle(tmp_path_factory):
    from voxcli.models.registry import get_tiny

    require_audio_frontend()
    d = tmp_path_factory.mktemp("cosy2_clone")
    ckpt = get_tiny("cosyvoice2").build(d / "ckpt", clone_models=True)
    assert (ckpt / "speech_tokenizer_v2.onnx").is_file()
    clips = {"c44": d / "c44.wav", "c16": d / "c16.wav"}
    write_clip(clips["c44"], 44100, 2)
    write_clip(clips["c16"], 16000, 1)
    cases = [
        {"name": "clone", "kind": "tts", "text": TEXT, "wav": str(clips["c44"]), "prompt_text": REF_TEXT,
         "stream": True, "seed": SEED},
        {"name": "instruct", "kind": "instruct", "text": TEXT, "wav": str(clips["c16"]),
         "instruct": INSTRUCTION + "<|endofprompt|>", "stream": True, "seed": SEED},
    ]
    return ckpt, clips, run_cases(ckpt, cases, d, script="run_cosyvoice2.py")


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
    args = ["say", "-m", str(ckpt), TEXT, "--greedy", "--seed", str(SEED), "--executor", "cpu",
            "--device", "cpu", "-o", str(out), "--quiet", *flags]
    r = CliRunner().invoke(cli.app, args)
    assert r.exit_code == 0, r.output
    got, sr = sf.read(str(out), dtype="float32")
    want = ref[case]["wav"]
    assert len(ref[case]["raw_tokens"]) >= 20
    assert sr == 24000 and got.shape == want.shape
    assert np.abs(got - want).max() <= 1e-4

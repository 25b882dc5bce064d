"""CSM-1B parity with transformers 5.24 (CSM oracle venv): our own tiny builder's checkpoint
(models/csm/tiny.py, the transformers layout of sesame/csm-1b with the codec inside) loaded by
`CsmForConditionalGeneration.from_pretrained` with no missing, unexpected or mismatched tensor,
its processor's chat template, `generate(..., do_sample=False, depth_decoder_do_sample=False,
output_audio=True)` and `MimiModel.encode`.

Checked: prompt ids as the processor makes them (a plain turn and a voice clone's context turn); greedy codes
identical to generate for 57 frames ending on the natural end frame (codebooks 0..K-2 all 0, calibrated in the
builder), and for a voice clone from a clip (our Mimi encoder's codes equal `MimiModel.encode`'s) cut by
max_new_tokens; the waveform of `vox say --greedy` end to end against generate's audio.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import soundfile as sf
import torch
from oracle.interpreters import oracle_python, run_oracle
from support.dia_driver import run_alone
from typer.testing import CliRunner
from voxcli.models.base import SamplingParams, SynthesisRequest

pytestmark = pytest.mark.oracle

CLONE_TEXT = "A second sentence, in the cloned voice."
REF_TEXT = "This is my voice."


def _clip(n: int, seed: int) -> np.ndarray:
    """A deterministic stand-in for speech: a few drifting tones plus noise, about -12 dBFS."""
    rs = np.random.RandomState(seed)
    t = np.arange(n) / 24000
    tones = sum(0.1 * np.sin(2 * np.pi * f * t * (1 + 0.1 * t)) for f in rs.uniform(100, 3000, 4))
    return (tones + 0.03 * rs.randn(n)).astype(np.float32)


@pytest.fixture(scope="module")
def oracle(tmp_path_factory):
    from voxcli.models.csm.tiny import CALIBRATION_TEXT, build_tiny

    d = tmp_path_factory.mktemp("csm")
    ckpt = build_tiny(d / "ckpt")
    np.save(d / "clip.npy", _clip(30000, 9))  # 15.6 Mimi frames: not a whole number
    cases = [
        {"name": "eos", "text": CALIBRATION_TEXT, "speaker": "0", "max_new": 80},
        {
            "name": "clone",
            "text": CLONE_TEXT,
            "speaker": "1",
            "max_new": 30,
            "ref_text": REF_TEXT,
            "ref_wav": str(d / "clip.npy"),
        },
    ]
    (d / "cases.json").write_text(json.dumps(cases))
    py = oracle_python("VOX_CSM_ORACLE_PYTHON", ".oracle-tf524-venv", "scripts/setup_oracle_tf524.sh")
    run_oracle("run_csm.py", str(ckpt), str(d / "cases.json"), str(d / "out.pt"), python=py)
    return ckpt, torch.load(d / "out.pt", weights_only=False), d


@pytest.fixture(scope="module")
def program(oracle):
    from voxcli.models.csm.program import CsmProgram

    return CsmProgram.load(str(oracle[0]))


def test_our_checkpoint_loads_in_transformers(oracle):
    info = oracle[1]["loading_info"]
    assert info["missing_keys"] == [] and info["unexpected_keys"] == [] and info["mismatched_keys"] == []


def test_prompt_ids_match_the_processor(oracle, program):
    from voxcli.models.csm.tiny import CALIBRATION_TEXT

    cases = oracle[1]["cases"]
    ours = program.prepare(SynthesisRequest(text=CALIBRATION_TEXT, voice="0"))
    assert ours.data.ids == cases["eos"]["input_ids"].tolist()
    clip = np.load(oracle[2] / "clip.npy")
    ours = program.prepare(
        SynthesisRequest(text=CLONE_TEXT, voice="1", ref_audio=clip, ref_sample_rate=24000, ref_text=REF_TEXT)
    )
    assert ours.data.ids == cases["clone"]["input_ids"].tolist()


def test_greedy_codes_end_naturally_as_generate(oracle, program):
    from voxcli.models.csm.tiny import CALIBRATION_TEXT

    ref = oracle[1]["cases"]["eos"]["codes"].numpy()
    # generate stops on the frame whose codebooks 0..K-2 are all 0 (here all 32 are: it is not played)
    assert ref.shape == (58, 32) and (ref[-1] == 0).all() and (ref[:-1, 0] != 0).all()
    prompt = program.prepare(SynthesisRequest(text=CALIBRATION_TEXT, sampling=SamplingParams(greedy=True)))
    codes = run_alone(program, prompt)
    assert codes.shape[0] >= 25
    np.testing.assert_array_equal(codes, ref[:-1])


def test_voice_clone_codes_and_encoder_match(oracle, program):
    ref = oracle[1]["cases"]["clone"]
    clip = np.load(oracle[2] / "clip.npy")
    enc = program.reference_codes(clip, 24000)
    assert enc.shape == (16, 32) and len(np.unique(enc)) > 8
    np.testing.assert_array_equal(enc, ref["enc_codes"].numpy())
    prompt = program.prepare(
        SynthesisRequest(
            text=CLONE_TEXT,
            voice="1",
            ref_audio=clip,
            ref_sample_rate=24000,
            ref_text=REF_TEXT,
            sampling=SamplingParams(greedy=True),
            max_frames=30,
        )
    )
    np.testing.assert_array_equal(run_alone(program, prompt), ref["codes"].numpy())


def test_vox_say_greedy_reproduces_generate(oracle, tmp_path):
    from voxcli.models.csm.tiny import CALIBRATION_TEXT

    from voxcli.cli import app

    out = tmp_path / "say.wav"
    res = CliRunner().invoke(app, ["say", "-m", str(oracle[0]), CALIBRATION_TEXT, "-o", str(out), "--greedy"])
    assert res.exit_code == 0, res.output
    wav, sr = sf.read(out, dtype="float32")
    ref = oracle[1]["cases"]["eos"]["audio"].numpy()
    assert sr == 24000 and wav.shape == ref.shape == (57 * 1920,)
    assert np.abs(ref).max() > 0.05  # a live decoder, not near silence
    assert np.abs(wav - ref).max() <= 1e-4  # the WAV is 16-bit: within 1.5 / 32768 of the float audio

"""VibeVoice parity with transformers 5.24 + diffusers 0.42.1 (VibeVoice oracle venv): a tiny random
checkpoint built by transformers' own classes (models/vibevoice/hf_build.py, `save_pretrained`: the
released layout by construction) and `VibeVoiceForConditionalGeneration.generate` after `set_seed(s)`,
with the checkpoint's generation_config.json (guidance 1.3: the token guidance processor and the diffusion
head's CFG against the negative sequence; 10 DPM-Solver steps).

Checked: the generated tokens and the audio of our program equal generate's (the calibrated text ends by
itself after 20..60 frames; a second seed and text cut by max_new_tokens); `vox say --seed` end to end
writes generate's audio (<= 1e-4, same length); the request alone equals itself among 7 others on the
engine (its noise from its own seed whatever its neighbours); the LM calls generate makes (three sequences:
the conditional one, the token guidance's from position 0, the diffusion negative from position 0).
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import soundfile as sf
import torch
from oracle.interpreters import run_oracle
from support.vibevoice_ckpt import oracle as oracle_interpreter
from support.vibevoice_ckpt import tiny_checkpoint
from typer.testing import CliRunner
from voxcli.models.base import SynthesisRequest

pytestmark = pytest.mark.oracle

SEED = 7
OTHER = ("Second text, another seed.", 3, 12)  # text, seed, max_new_tokens


@pytest.fixture(scope="module")
def oracle(tmp_path_factory):
    from voxcli.models.vibevoice.hf_build import CALIBRATION_SEED, CALIBRATION_TEXT

    py = oracle_interpreter()
    ckpt = tiny_checkpoint()
    d = tmp_path_factory.mktemp("vibevoice")
    assert SEED == CALIBRATION_SEED
    text, seed, n = OTHER
    cases = [{"text": CALIBRATION_TEXT, "speaker": "0", "seed": SEED},
             {"text": text, "speaker": "1", "seed": seed, "max_new": n}]
    (d / "cases.json").write_text(json.dumps(cases))
    run_oracle("drive_vibevoice.py", str(ckpt), str(d / "ref"), str(d / "cases.json"), python=py)
    return ckpt, dict(np.load(d / "ref0.npz")), dict(np.load(d / "ref1.npz"))


@pytest.fixture(scope="module")
def program(oracle):
    from voxcli.models.vibevoice.program import VibeVoiceProgram

    return VibeVoiceProgram.load(str(oracle[0]))


@pytest.fixture(autouse=True)
def _one_thread():
    torch.set_num_threads(1)
    yield


def test_prompt_ids_match(oracle, program):
    from voxcli.models.vibevoice.hf_build import CALIBRATION_TEXT

    ours = program.prepare(SynthesisRequest(text=CALIBRATION_TEXT, voice="0", seed=SEED))
    assert ours.data.ids == oracle[1]["ids"].tolist()
    assert ours.width == 3  # guidance 1.3: conditional, token guidance and diffusion negative sequences


def test_seeded_generate_ends_naturally_and_matches(oracle, program):
    from voxcli.models.vibevoice.hf_build import CALIBRATION_TEXT
    from voxcli.models.vibevoice.reference import generate_with

    ref = oracle[1]
    tokens, audio = generate_with(program, CALIBRATION_TEXT, SEED)
    c = program.cfg
    frames = int((ref["tokens"] == c.audio_token_id).sum())
    assert frames == 40 and ref["tokens"][-1] == c.eos_token_id  # ended by itself (hf_build's calibration)
    assert tokens == ref["tokens"].tolist()
    assert audio.shape == ref["audio"].shape == (frames * c.hop_length,)
    assert np.abs(ref["audio"]).max() > 0.05  # a live decoder, not near silence
    assert np.abs(audio - ref["audio"]).max() <= 1e-4


def test_other_seed_cut_by_max_new_tokens(oracle, program):
    from voxcli.models.vibevoice.reference import generate_with

    text, seed, n = OTHER
    ref = oracle[2]
    tokens, audio = generate_with(program, text, seed, voice="1", max_frames=n)
    assert 1 <= len(ref["tokens"]) <= n and tokens == ref["tokens"].tolist()
    assert audio.shape == ref["audio"].shape and audio.shape[0] > 0
    assert np.abs(audio - ref["audio"]).max() <= 1e-4


def test_generate_runs_three_sequences(oracle):
    """What the program mirrors: per step the conditional pass, the token guidance pass, and at a frame the
    diffusion negative's pass; one position each after the prompt."""
    ref = oracle[1]
    calls = ref["calls"].tolist()  # input length of every language-model call
    frames = int((ref["tokens"] == 259).sum())
    assert calls[0] == len(ref["ids"]) and calls[1:] == [1] * (2 * len(ref["tokens"]) + frames - 1)


def test_vox_say_seed_reproduces_generate(oracle, tmp_path):
    from voxcli.models.vibevoice.hf_build import CALIBRATION_TEXT

    from voxcli.cli import app

    out = tmp_path / "say.wav"
    res = CliRunner().invoke(app, ["say", "-m", str(oracle[0]), CALIBRATION_TEXT, "-o", str(out),
                                   "--seed", str(SEED)])
    assert res.exit_code == 0, res.output
    wav, sr = sf.read(out, dtype="float32")
    ref = oracle[1]["audio"]
    assert sr == 24000 and wav.shape == ref.shape
    assert np.abs(wav - ref).max() <= 1e-4  # the WAV is 16-bit: within 1.5 / 32768 of the float audio

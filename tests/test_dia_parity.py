"""Dia parity with transformers 4.57.3 (oracle venv): tiny random checkpoints built by transformers itself
(`DiaForConditionalGeneration(DiaConfig(...))` + `DacModel(DacConfig(...))`, save_pretrained, no
download), loaded through our normal loader.

Checked: greedy codes identical to `generate` for >= 40 frames including the delay drain (forced EOS by
max_new_tokens), at guidance 1 and 3; the waveform against the processor's DAC decode (offline and
streamed through the program's codec stage); a voice clone (audio prompt through our DAC encoder);
`vox say --greedy --cfg-scale 3` reproducing the reference waveform; and our own tiny builder's
checkpoint loading in transformers with no missing / unexpected keys.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import soundfile as sf
from oracle.interpreters import run_oracle
from support.dia_driver import run_alone
from typer.testing import CliRunner
from voxcli.models.base import CodecItem, SamplingParams, SynthesisRequest

pytestmark = pytest.mark.oracle

TEXT = "[S1] Hello there. [S2] Hi!"
REF_TEXT = "[S1] This is my voice. "
MAX_NEW = 60  # -> 44 aligned frames (the last 15 positions are the delay drain, one is EOS)
FRAMES = MAX_NEW - 16
EOS_TEXT = "[S2] Short and sweet. [S1] Bye."
EOS_AT = 45  # the builder calibrates channel 0's EOS here (guidance 1): 44 frames, then the natural drain


def _sizes() -> dict:
    from voxcli.models.dia.tiny import GENERATION, SIZES

    return {
        "seed": 0,
        **SIZES["tiny"],
        "generation": dict(GENERATION, max_length=3072),
        "dac": {
            "encoder_hidden_size": 4,
            "downsampling_ratios": [2, 4, 8, 8],
            "decoder_hidden_size": 32,
            "n_codebooks": 9,
            "codebook_size": 1024,
            "codebook_dim": 8,
            "sampling_rate": 44100,
        },
        "dac_output_gain": 30.0,
        "eos_at": {"text": EOS_TEXT, "position": EOS_AT},
    }


def ref_wav() -> np.ndarray:
    """0.3 s synthetic 'voice' at 44.1 kHz (a chirp plus a little noise), identical on every run."""
    sr = 44100
    t = np.arange(int(0.3 * sr)) / sr
    noise = 0.02 * np.random.RandomState(0).randn(t.size)
    return (0.3 * np.sin(2 * np.pi * (180 + 60 * t) * t) + noise).astype(np.float32)


@pytest.fixture(scope="module")
def oracle(tmp_path_factory):
    from voxcli.models.dia.tiny import build_tiny

    d = tmp_path_factory.mktemp("dia_oracle")
    ckpt = d / "ckpt"
    (d / "sizes.json").write_text(json.dumps(_sizes()))
    ours = build_tiny(d / "ours", codec=False)  # our builder's output, checked in the same oracle run
    np.save(d / "ref.npy", ref_wav())
    cases = [
        {"name": "g1", "text": TEXT, "guidance": 1.0, "max_new": MAX_NEW},
        {"name": "g3", "text": TEXT, "guidance": 3.0, "max_new": MAX_NEW},
        {"name": "eos", "text": EOS_TEXT, "guidance": 1.0, "max_new": 120},
        {
            "name": "clone",
            "text": REF_TEXT + TEXT,
            "guidance": 3.0,
            "max_new": 30,
            "ref_wav": str(d / "ref.npy"),
        },
    ]
    (d / "cases.json").write_text(json.dumps(cases))
    run_oracle(
        "run_dia.py",
        "all",
        str(ckpt),
        str(d / "sizes.json"),
        str(d / "out.pt"),
        str(d / "cases.json"),
        str(ours),
    )
    import torch

    return ckpt, torch.load(d / "out.pt", weights_only=False)


@pytest.fixture(scope="module")
def program(oracle):
    from voxcli.models import load_model

    return load_model(str(oracle[0]))


def _request(w: float, frames: int = FRAMES, **kw) -> SynthesisRequest:
    return SynthesisRequest(
        text=TEXT, cfg_scale=w, sampling=SamplingParams(greedy=True), max_frames=frames, **kw
    )


@pytest.mark.parametrize("name,w", [("g1", 1.0), ("g3", 3.0)])
def test_greedy_codes_identical_to_generate(program, oracle, name, w):
    ref = oracle[1][name]
    prompt = program.prepare(_request(w))
    assert prompt.width == (2 if w > 1 else 1)
    assert prompt.data.ids == ref["input_ids"].tolist()
    codes = run_alone(program, prompt, page_size=4)  # small pages: cross K/V spans page boundaries
    want = ref["codes"].numpy()
    assert want.shape == (FRAMES, 9) and FRAMES >= 40
    assert codes.shape == want.shape
    bad = np.argwhere(codes != want)
    assert bad.size == 0, f"first mismatch at frame/channel {bad[0].tolist()}"
    # the delay drain really ran: the reference's last 15 positions carry the forced EOS diagonal
    seq = ref["seq"].numpy()
    assert (seq[-16, 0] == 1024) and (seq[-1, 8] == 1024)


def test_natural_eos_and_its_drain(program, oracle):
    ref = oracle[1]["eos"]
    seq = ref["seq"].numpy()
    assert seq[EOS_AT, 0] == 1024 and seq.shape[0] == EOS_AT + 16  # stopped by itself, not by max_new
    req = SynthesisRequest(text=EOS_TEXT, cfg_scale=1.0, sampling=SamplingParams(greedy=True), max_frames=200)
    codes = run_alone(program, program.prepare(req), page_size=8)
    assert codes.shape == (EOS_AT - 1, 9) and np.array_equal(codes, ref["codes"].numpy())


def test_guidance_changes_the_codes(oracle):
    assert not np.array_equal(oracle[1]["g1"]["codes"].numpy(), oracle[1]["g3"]["codes"].numpy())


@pytest.mark.parametrize("name", ["g1", "g3"])
def test_waveform_offline_and_streamed(program, oracle, name):
    ref = oracle[1][name]
    want = ref["wav"].numpy()
    assert np.abs(want).max() > 0.05  # a codec loud enough for the tolerance to mean something
    codes = ref["codes"].numpy()
    offline = program.codec_model.decode_offline(codes)
    assert offline.shape == want.shape and np.abs(offline - want).max() <= 1e-4
    program.init_codec_slots(2)
    parts, start = [], 0
    for i, n in enumerate((12, 24, 8)):  # the recipe's schedule, then the rest
        end = min(start + n, len(codes)) if i < 2 else len(codes)
        item = CodecItem(slot=1, codes=codes[start:end], first=i == 0, last=end == len(codes))
        parts.append(program.codec([item])[0])
        start = end
    streamed = np.concatenate(parts)
    assert streamed.shape == want.shape and np.abs(streamed - want).max() <= 1e-4


def test_voice_clone_matches_reference(program, oracle):
    ref = oracle[1]["clone"]
    req = SynthesisRequest(
        text=TEXT,
        cfg_scale=3.0,
        sampling=SamplingParams(greedy=True),
        max_frames=30 - 16,
        ref_audio=ref_wav(),
        ref_sample_rate=44100,
        ref_text=REF_TEXT,
    )
    prompt = program.prepare(req)
    assert np.array_equal(prompt.data.codes, ref["ref_codes"].numpy())
    assert prompt.data.ids == ref["input_ids"].tolist() and prompt.length == 1 + prompt.data.codes.shape[0]
    codes = run_alone(program, prompt, page_size=8)
    assert np.array_equal(codes, ref["codes"].numpy())
    wav = program.codec_model.decode_offline(codes)
    assert np.abs(wav - ref["wav"].numpy()).max() <= 1e-4


def test_vox_say_reproduces_reference_waveform(oracle, tmp_path, monkeypatch):
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
            "--cfg-scale",
            "3",
            "--max-frames",
            str(FRAMES),
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
    want = oracle[1]["g3"]["wav"].numpy()
    assert sr == 44100 and got.shape == want.shape
    assert np.abs(got - want).max() <= 1e-4  # 16-bit WAV: quantisation is 1.5e-5


def test_our_tiny_builder_loads_in_transformers(oracle):
    info = oracle[1]["_keys_ours"]
    assert info["missing_keys"] == [] and info["unexpected_keys"] == [] and info["mismatched_keys"] == []


def test_missing_tensor_names_key_and_path(tmp_path):
    from safetensors.torch import load_file, save_file
    from voxcli.models import load_model
    from voxcli.models.base import CheckpointError
    from voxcli.models.dia.tiny import build_tiny

    ckpt = build_tiny(tmp_path / "broken", codec=False)
    sd = load_file(str(ckpt / "model.safetensors"))
    sd.pop("model.decoder.layers.1.cross_attention.k_proj.weight")
    sd["model.encoder.norm.weight"] = sd["model.encoder.norm.weight"][:-1].clone()
    save_file(sd, str(ckpt / "model.safetensors"))
    with pytest.raises(CheckpointError) as e:
        load_model(str(ckpt))
    msg = str(e.value)
    assert str(ckpt) in msg and (
        "model.decoder.layers.1.cross_attention.k_proj.weight" in msg or "model.encoder.norm.weight" in msg
    )

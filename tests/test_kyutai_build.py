"""The pure-torch Kyutai TTS builder (models/kyutai_tts/build.py: no moshi, tensors streamed one at a time)
and the offline `demo-kyutai` it builds.

Checked: at every size (tiny, bench, the published 1.6B in bfloat16 with moshi's fixed Mimi) the two files'
tensor tables (names, shapes, dtypes; attention stacked as released) are exactly the ones moshi 0.2.13's own
`get_moshi_lm` / `get_mimi` build from the same config.json (on the meta device, so the 1.6B table costs
seconds); moshi loads the builder's tiny checkpoint (through `Family.tiny`, what `make_tiny.py` runs) and
its tts_pytorch.py path generates what `vox say --greedy --voice V` does, same length, waveform within 1e-4;
`vox say -m demo-kyutai` works from an empty VOX_CACHE without the oracle venv, and `vox voices` lists the
demo's voices."""

from __future__ import annotations

import json

import numpy as np
import pytest
import soundfile as sf
from oracle.interpreters import oracle_python, run_oracle
from typer.testing import CliRunner

from voxcli import cli

TEXT = "Hello there, a test."
VOICE = "tiny-default.wav"


def _py() -> str:
    return oracle_python("VOX_KYUTAI_ORACLE_PYTHON", ".oracle-kyutai-venv", "scripts/setup_oracle_kyutai.sh")


@pytest.fixture
def vox(tmp_path, monkeypatch):
    monkeypatch.setenv("VOX_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(cli.console, "STATE", cli.console._State())

    def run(*args: str):
        return CliRunner().invoke(cli.app, list(args))

    return run


@pytest.mark.oracle
def test_every_size_has_moshis_own_tensor_tables(tmp_path):
    from voxcli.models.kyutai_tts.build import SIZES, write_layout

    ours, args = {}, []
    for size, spec in SIZES.items():
        folder = tmp_path / size
        folder.mkdir()
        lm, mimi = write_layout(folder, size)
        ours[str(folder / "config.json")] = {
            "lm": {k: [list(s), str(d)] for k, (s, d) in lm.items()},
            "mimi": {k: [list(s), str(d)] for k, (s, d) in mimi.items()},
        }
        args.append(f"{folder / 'config.json'}:{spec['dtype']}")
    out = tmp_path / "moshi.json"
    run_oracle("kyutai_layout.py", str(out), *args, python=_py())
    theirs = json.loads(out.read_text())
    for config, tables in ours.items():
        for part in ("lm", "mimi"):
            assert tables[part] == theirs[config][part], (config, part)
    real = ours[str(tmp_path / "real" / "config.json")]
    lm_params = sum(int(np.prod(s)) for s, _ in real["lm"].values())
    assert 1.8e9 < lm_params < 1.9e9  # tts-1.6b-en_fr at its config.json (embeddings and heads counted)
    lm, mimi = real["lm"], real["mimi"]
    assert lm["transformer.layers.0.self_attn.in_proj_weight"] == [[6144, 2048], "torch.bfloat16"]
    assert lm["depformer.layers.0.self_attn.in_proj_weight"] == [[11 * 3 * 1024, 1024], "torch.bfloat16"]
    assert mimi["decoder_transformer.transformer.layers.7.linear1.weight"] == [[2048, 512], "torch.float32"]


@pytest.mark.oracle
def test_moshi_loads_the_pure_torch_tiny_and_vox_say_greedy_equals_it(vox, tmp_path):
    from voxcli.models.registry import get_tiny

    ckpt = get_tiny("kyutai_tts").build(tmp_path / "ckpt", size="tiny")
    ref_file = tmp_path / "ref.npz"
    voice = ckpt / "voices" / f"{VOICE}.1e68beda@240.safetensors"
    run_oracle("kyutai_generate.py", str(ckpt), str(voice), TEXT, str(ref_file), "2.0", python=_py())
    ref = dict(np.load(ref_file))
    out = tmp_path / "say.wav"
    r = vox("say", "-m", str(ckpt), TEXT, "--greedy", "--voice", VOICE, "--quiet", "-o", str(out))
    assert r.exit_code == 0, r.output
    wav, sr = sf.read(out, dtype="float32")
    assert ref["end_step"] > 0 and len(ref["codes"]) > 10
    assert sr == 24000 and wav.shape == ref["wav"].shape == (len(ref["codes"]) * 1920,)
    assert 0.05 < np.abs(ref["wav"]).max() < 1.0  # a live decoder the 16-bit WAV holds unclipped
    assert np.abs(wav - ref["wav"]).max() <= 1e-4


def test_demo_kyutai_says_from_an_empty_cache_without_moshi(vox, tmp_path, monkeypatch):
    # the demo never needs the oracle interpreter
    monkeypatch.setenv("VOX_KYUTAI_ORACLE_PYTHON", str(tmp_path / "no-such-python"))
    out = tmp_path / "x.wav"
    r = vox("say", "-m", "demo-kyutai", "Hello there.", "--quiet", "-o", str(out))
    assert r.exit_code == 0, r.output
    info = sf.info(str(out))
    assert info.samplerate == 24000 and info.frames > 0 and info.frames % 1920 == 0
    assert (tmp_path / "cache" / "demo-kyutai" / "VOX_DEMO_VERSION").read_text() == "1"
    r = vox("voices", "-m", "demo-kyutai")
    assert r.exit_code == 0 and "tiny-default.wav" in r.output and "tiny-other.wav" in r.output, r.output
    r = vox("models")
    assert r.exit_code == 0 and "demo-kyutai" in r.output


def test_streamed_writer_reads_back_as_safetensors_wrote_it(tmp_path):
    """write_streamed's file (header from the plan, tensors drawn one at a time) is what safetensors reads:
    the same tensors, bfloat16 and float32 alike; a draw that breaks the plan is an error."""
    import torch
    from safetensors.torch import load_file
    from voxcli.models.kyutai_tts.stream_write import write_streamed

    g = torch.Generator().manual_seed(0)
    bf16 = torch.bfloat16
    want = {"b.weight": torch.randn(5, 3, generator=g).to(bf16), "a.alpha": torch.randn(1, 1, 7, generator=g),
            "c.bias": torch.randn(4, generator=g).to(bf16)}
    plan = {k: (tuple(v.shape), v.dtype) for k, v in want.items()}
    size = write_streamed(tmp_path / "x.safetensors", plan, lambda name, shape, dtype: want[name])
    got = load_file(str(tmp_path / "x.safetensors"))
    assert size == sum(v.numel() * v.element_size() for v in want.values()) and set(got) == set(want)
    assert all(got[k].dtype == v.dtype and torch.equal(got[k], v) for k, v in want.items())
    with pytest.raises(ValueError, match="b.weight: drew"):
        write_streamed(tmp_path / "y.safetensors", plan, lambda name, shape, dtype: want[name].float())
    assert list(tmp_path.iterdir()) == [tmp_path / "x.safetensors"]  # no half-written file left

"""VibeVoice checkpoints drawn with plain torch (models/vibevoice/torch_build.py; the project interpreter has
no transformers): the tiny has the names, shapes, dtypes, config.json, generation_config.json and token ids
of the tiny transformers' own classes write (hf_build.py), loads in transformers, and transformers' seeded
generate on it equals our program and ends by itself where our calibration put the end; the bench and real
sizes make the diffusion token win every step (a request plays to its cap); shards load like one file;
`vox say -m demo-vibevoice` works from an empty cache."""

from __future__ import annotations

import json

import numpy as np
import pytest
import soundfile as sf
import torch
from typer.testing import CliRunner

SEED = 7


@pytest.fixture(scope="module")
def torch_tiny(tmp_path_factory):
    from voxcli.models.vibevoice.tiny import build_tiny

    return build_tiny(tmp_path_factory.mktemp("vv-torch") / "ckpt")


@pytest.fixture(autouse=True)
def _one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _tensors(root) -> dict[str, tuple[tuple[int, ...], str]]:
    from voxcli.models.checkpoint import checkpoint_entries

    return {k: (tuple(e.shape), str(e.dtype)) for k, e in checkpoint_entries(root).items()}


@pytest.mark.oracle
def test_torch_tiny_has_the_layout_transformers_writes(torch_tiny):
    from support.vibevoice_ckpt import tiny_checkpoint
    from tokenizers import Tokenizer
    from voxcli.models.vibevoice.prompt import script

    hf = tiny_checkpoint()
    assert _tensors(torch_tiny) == _tensors(hf) and len(_tensors(hf)) == 265
    for name in ("config.json", "generation_config.json", "tokenizer_config.json"):
        assert json.loads((torch_tiny / name).read_text()) == json.loads((hf / name).read_text()), name
    text = script("Héllo, <|vision_pad|> 12 ünïcode!", "2")
    ours, theirs = (Tokenizer.from_file(str(p / "tokenizer.json")) for p in (torch_tiny, hf))
    ids = [t.encode(text, add_special_tokens=False).ids for t in (ours, theirs)]
    assert ids[0] == ids[1]


@pytest.mark.oracle
def test_transformers_loads_it_and_its_generate_equals_ours_ending_where_calibrated(torch_tiny, tmp_path):
    from oracle.interpreters import run_oracle
    from support.vibevoice_ckpt import oracle
    from voxcli.models.vibevoice.hf_build import CALIBRATION_FRAMES, CALIBRATION_SEED, CALIBRATION_TEXT
    from voxcli.models.vibevoice.reference import generate

    assert SEED == CALIBRATION_SEED
    case = {"text": CALIBRATION_TEXT, "speaker": "0", "seed": SEED}
    (tmp_path / "cases.json").write_text(json.dumps([case]))
    run_oracle("drive_vibevoice.py", str(torch_tiny), str(tmp_path / "ref"), str(tmp_path / "cases.json"),
               python=oracle())
    ref = dict(np.load(tmp_path / "ref0.npz"))
    tokens, audio = generate(str(torch_tiny), CALIBRATION_TEXT, SEED)
    assert tokens == ref["tokens"].tolist()
    assert tokens.count(259) == CALIBRATION_FRAMES and tokens[-1] == 256  # eos: it ended by itself
    assert audio.shape == ref["audio"].shape == (CALIBRATION_FRAMES * 20,)
    assert 0.3 < np.abs(audio).max() < 0.7  # the calibrated loudness (peak 0.5 when forced)
    assert np.abs(audio - ref["audio"]).max() <= 1e-4


def test_bench_size_speaks_until_its_cap(tmp_path):
    from voxcli.models.vibevoice.reference import generate
    from voxcli.models.vibevoice.tiny import build_tiny

    ckpt = build_tiny(tmp_path / "bench", size="bench", seed=3)
    text = "A bench sentence, a little longer than the rest."
    tokens, audio = generate(str(ckpt), text, seed=5, max_frames=3)
    assert tokens == [259, 259, 259] and audio.shape == (3 * 3200,) and np.isfinite(audio).all()


def test_shards_load_like_one_file(torch_tiny, tmp_path):
    import shutil

    from voxcli.models.checkpoint import checkpoint_entries, read_tensor_into
    from voxcli.models.vibevoice.shards import write_weights

    one = checkpoint_entries(torch_tiny)
    out = tmp_path / "sharded"
    shutil.copytree(torch_tiny, out)
    (out / "model.safetensors").unlink()

    def tensors():
        for name, e in sorted(one.items()):
            t = torch.empty(e.shape, dtype=e.dtype)
            with open(e.file, "rb") as f:
                read_tensor_into(f, e, t)
            yield name, t

    write_weights(out, tensors(), torch.float32, shard_bytes=300_000)
    index = json.loads((out / "model.safetensors.index.json").read_text())
    assert len(set(index["weight_map"].values())) >= 3 and set(index["weight_map"]) == set(one)
    assert _tensors(out) == _tensors(torch_tiny)


def test_real_size_is_the_published_one():
    from voxcli.models.vibevoice.layout import config_dict
    from voxcli.models.vibevoice.torch_build import parameter_count

    cfg = config_dict("real", "bfloat16")
    assert parameter_count("real") == 2_704_021_987  # the lm_head is tied to the embedding (not stored)
    assert cfg["text_config"]["num_hidden_layers"] == 28 and cfg["audio_token_id"] == 151654
    assert cfg["dtype"] == "bfloat16" and cfg["tie_word_embeddings"] is True


def test_demo_says_from_an_empty_cache_without_transformers(tmp_path, monkeypatch):
    import sys

    from voxcli import cli

    monkeypatch.setenv("VOX_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(cli.console, "STATE", cli.console._State())
    out = tmp_path / "x.wav"
    r = CliRunner().invoke(cli.app, ["say", "-m", "demo-vibevoice", "Hello there.", "--seed", "1", "-o",
                                     str(out), "--quiet"])
    assert r.exit_code == 0, r.output
    info = sf.info(str(out))
    # it ended by itself (eos) before the recipe's 200-frame cap: the calibrated LM does for seeds 0..11
    assert info.samplerate == 24000 and 0 < info.frames < 200 * 20 and info.frames % 20 == 0
    assert "transformers" not in sys.modules  # built and run by this interpreter's torch alone
    r = CliRunner().invoke(cli.app, ["voices", "-m", "demo-vibevoice"])
    assert r.exit_code == 0 and all(v in r.output for v in ("0", "1", "2", "3"))

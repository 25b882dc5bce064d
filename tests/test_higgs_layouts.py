"""Higgs Audio's other checkpoint layouts (layouts.py): the original boson release (`higgs_audio`) and v3
(`higgs_multimodal_qwen3`, Qwen3 backbone, tied head, codec bundled), built by our tiny builders in their real
key layouts. Checked: both load; boson = the transformers layout's codes on the same weights; v3's backbone =
transformers' Qwen3Model on the same weights and its delay/stop logic = the v2 processor's on the same logits
(Higgs oracle venv); v3's bundled codec decodes and streams."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from support.dia_driver import run_alone
from voxcli.models.base import CheckpointError, CodecItem, SamplingParams, SynthesisRequest

GREEDY = SynthesisRequest(text="Hello there.", sampling=SamplingParams(greedy=True), max_frames=16)


@pytest.fixture(scope="module")
def ckpts(tmp_path_factory):
    from voxcli.models.higgs_audio.tiny import build_tiny, build_tiny_boson, build_tiny_v3

    d = tmp_path_factory.mktemp("higgs_layouts")
    hf = build_tiny(d / "hf")
    return {"hf": hf, "boson": build_tiny_boson(d / "boson", hf), "v3": build_tiny_v3(d / "v3")}


def _load(path):
    from voxcli.models import load_model

    return load_model(str(path))


def test_boson_layout_gives_the_transformers_layout_codes(ckpts):
    hf, boson = _load(ckpts["hf"]), _load(ckpts["boson"])
    assert boson.cfg.variant == "boson"
    a, b = run_alone(hf, hf.prepare(GREEDY)), run_alone(boson, boson.prepare(GREEDY))
    assert a.shape == (16, 8)
    np.testing.assert_array_equal(a, b)


def test_boson_layout_refuses_what_it_cannot_run(ckpts, tmp_path):
    import shutil

    bad = tmp_path / "bad"
    shutil.copytree(ckpts["boson"], bad)
    d = json.loads((bad / "config.json").read_text())
    d["audio_dual_ffn_layers"] = [0]
    (bad / "config.json").write_text(json.dumps(d))
    with pytest.raises(CheckpointError, match="audio_dual_ffn_layers"):
        _load(bad)


def test_v3_loads_generates_and_its_bundled_codec_streams(ckpts):
    p = _load(ckpts["v3"])
    assert p.cfg.variant == "v3" and not p.cfg.dual_ffn and p.weights.tied_head
    assert (p.spec.sample_rate, p.spec.samples_per_frame, p.spec.codebooks) == (24000, 960, 8)
    prompt = p.prepare(GREEDY)
    assert prompt.data.ids[0] == p.tok.text and prompt.data.ids[-1] == p.tok.audio
    codes = run_alone(p, prompt)
    assert codes.shape == (16, 8) and codes.max() < 1024
    c64 = p.codec_model.to_dtype(torch.float64)
    full = c64.decode_offline(codes)
    c64.init_slots(1)
    parts = [
        c64.decode([CodecItem(0, codes[:11], True, False)])[0],
        c64.decode([CodecItem(0, codes[11:], False, True)])[0],
    ]
    assert full.shape == (16 * 960,) and np.abs(np.concatenate(parts) - full).max() <= 1e-5
    with pytest.raises(Exception, match="no instructions"):
        p.prepare(SynthesisRequest(text="Hi.", instructions="whisper"))


LOGIT_STEPS, EOS_STEP, EOS_BOOK = 60, 30, 3


@pytest.fixture(scope="module")
def v3_oracle(ckpts, tmp_path_factory):
    """One oracle process: transformers' Qwen3Model on v3's backbone weights (hidden states of the greedy
    prompt) and the v2 delay processor stepped over random logits with a planted stream EOS on codebook 3
    at step 30 (any codebook starts the drain)."""
    from oracle.drive_higgs import run_higgs_oracle
    from safetensors.torch import load_file, save_file

    d = tmp_path_factory.mktemp("higgs_v3_oracle")
    p = _load(ckpts["v3"])
    ids = p.prepare(GREEDY).data.ids
    root = d / "qwen3"
    root.mkdir()
    t = json.loads((ckpts["v3"] / "config.json").read_text())["text_config"]
    (root / "config.json").write_text(json.dumps({k: v for k, v in t.items() if k != "model_type"}))
    sd = load_file(str(ckpts["v3"] / "model.safetensors"))
    qwen = {"embed_tokens.weight": sd["tied.embedding.text_embedding.weight"]}
    qwen.update({k[len("body.") :]: v for k, v in sd.items() if k.startswith("body.")})
    save_file(qwen, str(root / "model.safetensors"))
    (root / "ids.json").write_text(json.dumps(ids))
    g = torch.Generator().manual_seed(5)
    logits = torch.randn(LOGIT_STEPS, 8, 1026, generator=g)
    logits[:, :, 1024:] -= 10.0  # no stray BOS / EOS before the planted one
    logits[EOS_STEP, EOS_BOOK, 1025] = 50.0
    torch.save(
        {
            "logits": logits,
            "prompt_ids": torch.tensor(ids),
            "audio_bos": p.tok.audio,
            "audio_delay": 9002,
            "audio_token": 9003,
            "eos": 9001,
        },
        d / "in.pt",
    )
    run_higgs_oracle("v3", str(d), str(d / "qwen3.pt"), str(d / "proc.pt"), str(d / "in.pt"))
    load = torch.load
    return p, ids, logits, load(d / "qwen3.pt", weights_only=False), load(d / "proc.pt", weights_only=False)


@pytest.mark.oracle
def test_v3_backbone_equals_transformers_qwen3(v3_oracle):
    from voxcli.models.base import Row

    p, ids, _, ref, _ = v3_oracle
    assert ref["missing"] == [] and ref["unexpected"] == []
    p.init_kv(num_pages=8, page_size=16)
    row = Row(request_id=0, prompt=p.prepare(GREEDY), pages=list(range(8)))
    with torch.inference_mode():
        x = p.weights.embed_text(torch.tensor([ids]))
        pb = p._paged([row], [0], [len(ids)])
        ours = p.weights.hidden_states(x, pb, p.k_pool, p.v_pool, audio=None)[0]
    assert float((ours - ref["hidden"]).abs().max()) <= 1e-5


@pytest.mark.oracle
def test_v3_delay_and_stop_logic_equals_the_v2_processor(v3_oracle):
    from voxcli.models.higgs_audio.delay import DelayTracker

    p, ids, logits, _, ref = v3_oracle
    c = p.cfg
    tr = DelayTracker(
        ids,
        8,
        c.audio_stream_bos_id,
        c.audio_stream_eos_id,
        c.audio_token_id,
        c.audio_bos_token_id,
        c.audio_delay_token_id,
        c.eos_token_id,
        max_frames=10_000,
    )
    ours = []
    for step in range(LOGIT_STEPS):
        fb, fe = tr.forced()
        s = logits[step].clone()
        s[torch.from_numpy(fb)] = s[torch.from_numpy(fb)].masked_fill(
            torch.arange(1026) != 1024, float("-inf")
        )
        s[torch.from_numpy(fe)] = s[torch.from_numpy(fe)].masked_fill(
            torch.arange(1026) != 1025, float("-inf")
        )
        tok = s.argmax(-1).numpy()
        ours.append(tok)
        tr.record(tok)
        if tr.done:
            break
    assert tr.done and len(ours) == len(ref["text"]) == EOS_STEP + 8 + 1  # all closed at 30 + 8
    np.testing.assert_array_equal(np.stack(ours), ref["frames"].numpy())


def test_bfloat16_load_keeps_every_tensor_in_bfloat16(ckpts):
    from voxcli.models import load_model

    p = load_model(str(ckpts["v3"]), "cpu", "bfloat16")
    assert {t.dtype for t in p.weights.state_dict().values()} == {torch.bfloat16}
    assert run_alone(p, p.prepare(GREEDY)).shape == (16, 8)


def test_sharded_checkpoint_loads_the_same(ckpts, tmp_path):
    """Real sizes are written in shards + model.safetensors.index.json (tiny.save_weights), as on the hub."""
    import shutil

    from safetensors.torch import load_file
    from voxcli.models.weights import save_weights

    sharded = tmp_path / "sharded"
    shutil.copytree(ckpts["hf"], sharded)
    (sharded / "model.safetensors").unlink()
    save_weights(load_file(str(ckpts["hf"] / "model.safetensors")), sharded, shard_bytes=1 << 20)
    assert (
        len(list(sharded.glob("model-*-of-*.safetensors"))) > 2
        and (sharded / "model.safetensors.index.json").exists()
    )
    a, b = _load(ckpts["hf"]), _load(sharded)
    np.testing.assert_array_equal(run_alone(a, a.prepare(GREEDY)), run_alone(b, b.prepare(GREEDY)))

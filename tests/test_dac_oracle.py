"""Dia's DAC codec against transformers' own DacModel (tests/oracle/run_dac.py in the oracle venv): tiny
random checkpoints built and saved by transformers load through our loader and decode / encode like it;
ours (build_tiny_dac) loads into DacModel.from_pretrained with no missing or unexpected key."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from oracle.interpreters import run_oracle
from voxcli.models.base import CodecItem
from voxcli.models.codecs.dac.codec import DacCodec
from voxcli.models.codecs.dac.tiny import build_tiny_dac

pytestmark = pytest.mark.oracle

SIZES = {"encoder_hidden_size": 4, "downsampling_ratios": [2, 4, 8, 8], "decoder_hidden_size": 32,
         "n_codebooks": 9, "codebook_size": 1024, "codebook_dim": 8, "sampling_rate": 44100}
FRAMES = 30


def _clips() -> list[torch.Tensor]:
    """Voice-clone-like inputs: a gliding tone with noise (not a whole number of hops), exactly 4 hops of
    noise, and a clip shorter than one hop."""
    rng = np.random.RandomState(4)
    t = np.arange(9001) / 44100
    glide = 0.4 * np.sin(2 * np.pi * (150 + 400 * t) * t) + 0.05 * rng.randn(t.size)
    clips = (glide, 0.3 * rng.randn(2048), 0.3 * rng.randn(300))
    return [torch.from_numpy(x.astype(np.float32)) for x in clips]


@pytest.fixture(scope="module")
def oracle(tmp_path_factory):
    root = tmp_path_factory.mktemp("dac_oracle")
    ours = build_tiny_dac(root / "ours", seed=2)
    codes = torch.from_numpy(np.random.RandomState(0).randint(0, 1024, size=(2, 9, FRAMES)))
    clips = _clips()
    torch.save({"out_dir": str(root), "sizes": SIZES, "seed": 3, "codes": codes, "clips": clips,
                "ours_dir": str(ours)}, root / "in.pt")
    run_oracle("run_dac.py", str(root / "in.pt"), str(root / "out.pt"), timeout=300)
    res = torch.load(root / "out.pt", weights_only=False)
    return {"root": root, "codes": codes.numpy(), "clips": clips, **res}


def test_offline_decode_matches_transformers(oracle):
    """Plain weights and weight-norm parametrization keys (folded at load) both decode like DacModel."""
    torch.set_num_threads(1)  # as the oracle's forward; conftest restores it
    for folder, key in (("plain", "plain_wav"), ("weight_norm", "wn_wav")):
        codec = DacCodec.load(oracle["root"] / folder)
        for b in range(2):
            ref = oracle[key][b].numpy()
            mine = codec.decode_offline(oracle["codes"][b].T)
            assert mine.shape == ref.shape == (FRAMES * 512,)
            assert float(ref.std()) > 0.1  # a live decoder
            assert float(np.abs(mine - ref).max()) <= 1e-4, (folder, b)


def test_streamed_decode_matches_transformers(oracle):
    """The streamed path (fp32, two requests interleaved) against the reference waveform."""
    codec = DacCodec.load(oracle["root"] / "plain")
    codec.init_slots(2)
    scheds = ([1, 2, 4, 8, 15], [11, 1, 1, 17])
    pos, outs = [0, 0], [[], []]
    for step in range(max(len(s) for s in scheds)):
        batch, owners = [], []
        for r, sched in enumerate(scheds):
            if step < len(sched):
                n, p = sched[step], pos[r]
                batch.append(CodecItem(r, oracle["codes"][r].T[p : p + n], p == 0, p + n == FRAMES))
                owners.append(r)
                pos[r] += n
        for r, o in zip(owners, codec.decode(batch), strict=True):
            outs[r].append(o)
    for r in range(2):
        err = float(np.abs(np.concatenate(outs[r]) - oracle["plain_wav"][r].numpy()).max())
        assert err <= 1e-4, (r, err)


def test_encode_matches_transformers(oracle):
    """Codes identical to DiaProcessor's voice-clone encoding (pad to a whole hop, DacModel.encode)."""
    codec = DacCodec.load(oracle["root"] / "plain")
    for clip, ref in zip(oracle["clips"], oracle["clip_codes"], strict=True):
        mine = codec.encode(clip.numpy(), 44100)
        assert mine.dtype == np.int64 and mine.shape == tuple(ref.shape) == (-(-clip.numel() // 512), 9)
        np.testing.assert_array_equal(mine, ref.numpy())


def test_transformers_loads_our_tiny_builder(oracle):
    info = oracle["ours_info"]
    assert info["missing_keys"] == [] and info["unexpected_keys"] == [], info
    assert info["mismatched_keys"] == [] and info["error_msgs"] == [], info
    torch.set_num_threads(1)
    codec = DacCodec.load(oracle["root"] / "ours")
    for b in range(2):
        ref = oracle["ours_wav"][b].numpy()
        assert float(ref.std()) > 0.1
        assert float(np.abs(codec.decode_offline(oracle["codes"][b].T) - ref).max()) <= 1e-4

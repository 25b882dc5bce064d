"""The depth decoders' per-frame cache (models/layers/dense_cache.py): each layer grows along its time axis
on its own, the length is the next position, and a depth pass over it step by step equals one causal pass
over the whole frame."""

from __future__ import annotations

import torch
from voxcli.models.layers import DecoderLayer, DenseCache, Rope, Rotary, run_layers_dense
from voxcli.models.layers.config import BlockConfig


def test_each_layer_grows_along_its_time_axis():
    cache = DenseCache(2, time_dim=2)  # moshi's [B, heads, T, hd]
    assert cache.length == 0
    steps = [torch.randn(1, 2, 1, 4) for _ in range(3)]
    for t, s in enumerate(steps):
        k, v = cache.extend(0, s, -s)
        assert k.shape == (1, 2, t + 1, 4) and cache.length == t + 1
        assert torch.equal(k, torch.cat(steps[: t + 1], dim=2)) and torch.equal(v, -k)
    k1, _ = cache.extend(1, steps[0], steps[0])  # layer 1 starts empty whatever layer 0 holds
    assert k1.shape == (1, 2, 1, 4) and cache.length == 3


def test_stepwise_depth_pass_equals_the_whole_frame_pass():
    torch.manual_seed(0)
    cfg = BlockConfig(hidden_size=16, intermediate_size=32, num_hidden_layers=2, num_attention_heads=4,
                      num_key_value_heads=2, head_dim=4, rms_norm_eps=1e-6, qk_norm=False)
    layers = [DecoderLayer(cfg) for _ in range(2)]
    rotary = Rotary(4, Rope(theta=10000.0))
    x = torch.randn(3, 5, 16)
    with torch.no_grad():
        whole = run_layers_dense(layers, x, rotary, DenseCache(2))
        cache = DenseCache(2)
        parts = [run_layers_dense(layers, x[:, :2], rotary, cache)]
        for t in range(2, 5):
            parts.append(run_layers_dense(layers, x[:, t : t + 1], rotary, cache))
    assert cache.length == 5
    torch.testing.assert_close(torch.cat(parts, dim=1), whole)

"""The Higgs Audio tokenizer's decoder streamed through codec slots equals its offline decode (fp64, any chunk
schedule, interleaved requests, reused slots) at the released ratios [8, 5, 4, 2, 3] (hop 960, odd strides
included), and its look-ahead covers the true receptive field. Our own tiny builder's codec, no oracle."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from support.chunk_schedules import chunk_schedule, random_lead
from voxcli.models.base import CodecItem
from voxcli.models.higgs_audio.codec import HiggsCodec, HiggsCodecConfig, HiggsDecoderNet
from voxcli.models.higgs_audio.tiny import write_codec

HOP = 960


@pytest.fixture(scope="module")
def codec64(tmp_path_factory) -> HiggsCodec:
    root = tmp_path_factory.mktemp("higgs_codec") / "audio_tokenizer"
    write_codec(root, "tiny", torch.Generator().manual_seed(3), output_std=0.1)
    return HiggsCodec.load(root, dtype="float64")


def _codes(n: int, seed: int) -> np.ndarray:
    return np.random.RandomState(seed).randint(0, 1024, size=(n, 8)).astype(np.int64)


def _schedule(kind: str, total: int, seed: int = 0) -> list[int]:
    if kind == "ones":
        return [1] * total
    leads = {
        "ramp": [1, 2, 4, 8],
        "lookahead-edges": [9, 1, 10, 11],
        "recipe": [15, 10, 25],
        "big-first": [50, 3],
    }
    lead = random_lead(total, 20, seed) if kind == "random" else leads[kind]
    return chunk_schedule(lead, total, steady=50 if kind == "recipe" else 16)


def _run_interleaved(codec, requests):
    """Each batch holds the next chunk of every unfinished request (slot, codes, schedule)."""
    pos, idx = [0] * len(requests), [0] * len(requests)
    pcm: list[list[np.ndarray]] = [[] for _ in requests]
    while any(idx[r] < len(s) for r, (_, _, s) in enumerate(requests)):
        batch, owners = [], []
        for r, (slot, codes, sched) in enumerate(requests):
            if idx[r] < len(sched):
                n = sched[idx[r]]
                batch.append(
                    CodecItem(
                        slot, codes[pos[r] : pos[r] + n], first=pos[r] == 0, last=pos[r] + n == len(codes)
                    )
                )
                owners.append(r)
                pos[r] += n
                idx[r] += 1
        for r, out in zip(owners, codec.decode(batch), strict=True):
            pcm[r].append(out)
    return [np.concatenate(p) for p in pcm], [[len(x) for x in p] for p in pcm]


def test_streaming_equals_offline_for_many_schedules(codec64):
    codec64.init_slots(4)
    pairs = [("ones", "random", 10), ("ramp", "lookahead-edges", 26), ("recipe", "random", 45)]
    worst = 0.0
    for k, (sa, sb, total) in enumerate(pairs):
        a, b = _codes(total, 10 + k), _codes(total + 7, 20 + k)
        sched_a, sched_b = _schedule(sa, total, seed=k), _schedule(sb, total + 7, seed=100 + k)
        slot_a, slot_b = (0, 3) if k % 2 == 0 else (2, 1)
        outs, counts = _run_interleaved(codec64, [(slot_a, a, sched_a), (slot_b, b, sched_b)])
        for codes, out, cnt, sched in zip((a, b), outs, counts, (sched_a, sched_b), strict=True):
            full = codec64.decode_offline(codes)
            assert full.shape == out.shape == (len(codes) * HOP,)
            assert float(np.std(full)) > 0.01  # a live decoder
            seen, done = 0, 0
            for i, (n, got) in enumerate(zip(sched, cnt, strict=True)):
                seen += n
                ready = seen * HOP if i == len(sched) - 1 else max(0, seen * HOP - codec64.lookahead_samples)
                assert got == ready - done
                done = ready
            worst = max(worst, float(np.abs(out - full).max()))
    assert worst <= 1e-5, worst


def test_slot_reuse_and_short_requests(codec64):
    codec64.init_slots(2)
    old, new = _codes(20, 1), _codes(27, 2)
    codec64.decode([CodecItem(0, old[:7], first=True, last=False)])  # abandoned mid-stream, then released
    codec64.release_slot(0)
    with pytest.raises(ValueError, match="no request in progress"):
        codec64.decode([CodecItem(0, old[7:9], first=False, last=False)])
    outs, _ = _run_interleaved(codec64, [(0, new, _schedule("random", 27, seed=3)), (1, old, [20])])
    assert np.abs(outs[0] - codec64.decode_offline(new)).max() <= 1e-5
    assert np.abs(outs[1] - codec64.decode_offline(old)).max() <= 1e-5
    for total, sched in ((1, [1]), (9, [4, 5])):  # ends inside the look-ahead
        codes = _codes(total, total)
        (out,), (cnt,) = _run_interleaved(codec64, [(1, codes, sched)])
        assert cnt[-1] == total * HOP and sum(cnt[:-1]) == 0
        assert np.abs(out - codec64.decode_offline(codes)).max() <= 1e-5


def test_lookahead_of_the_released_tokenizer():
    """Ratios [8, 5, 4, 2, 3]: 9458 samples = 9.85 frames = 394 ms held back; the first audible sample needs
    10 frames, a 15-frame first chunk releases 4942 samples (206 ms)."""
    with torch.device("meta"):
        net = HiggsDecoderNet(HiggsCodecConfig())
    codec = HiggsCodec(net)
    assert (codec.sample_rate, codec.hop_length, codec.codebooks) == (24000, 960, 8)
    assert codec.lookahead_samples == 9458 and codec.lookahead_frames == 10
    assert codec.chunk_span(0, 15, last=False) == (0, 4942)


def test_lookahead_covers_the_true_receptive_field(codec64):
    """Changing frame k moves offline samples only from k*hop - lookahead on (the hold-back wastes at most a
    few blocks of samples), and none after (k + 1) * hop + lookahead: the decoder is non-causal both ways."""
    codes = _codes(26, 7)
    full = codec64.decode_offline(codes)
    for k in (25, 13):
        alt = codes.copy()
        alt[k] = (alt[k] + 1) % 1024
        changed = np.nonzero(codec64.decode_offline(alt) != full)[0]
        first = k * HOP - codec64.lookahead_samples
        assert first <= changed.min() <= first + 200, (changed.min(), first)
        assert changed.max() < (k + 1) * HOP + codec64.lookahead_samples


def test_decode_rejects_bad_batches(codec64):
    codec64.init_slots(2)
    ok = _codes(3, 0)
    with pytest.raises(ValueError, match="same slot"):
        codec64.decode([CodecItem(0, ok, True, False), CodecItem(0, ok, False, False)])
    with pytest.raises(ValueError, match=r"\[0, 1024\)"):
        codec64.decode([CodecItem(0, ok + 1024, True, False)])
    with pytest.raises(ValueError, match="8"):
        codec64.decode([CodecItem(0, ok[:, :7], True, False)])

"""Zonos on the real engine (cpu executor), our own tiny checkpoint: a greedy request alone vs the same
request among 7 others (different texts, languages, voices, conditioning, guidance, sampling and frame
counts, staggered arrivals) with a KV pool and a codec slot table small enough that pages and slots are
reused: the audio must agree to 1e-4; every request is one width-2 row whose pages all come back."""

from __future__ import annotations

import numpy as np
import pytest
from support.alone_vs_among import alone_vs_among
from voxcli.models.base import SamplingParams, SynthesisRequest

TARGET = SynthesisRequest(
    text="The target request says hi.", sampling=SamplingParams(greedy=True), max_frames=30
)


def _others() -> list[SynthesisRequest]:
    texts = [
        "One.",
        "Two, a longer line of text here.",
        "Bonjour tout le monde.",
        "Four is 4.",
        "Five.",
        "Six six six six.",
        "Seven, the last.",
    ]
    langs = [None, "en-gb", "fr-fr", None, "en-us", None, "de"]
    out = []
    for i, t in enumerate(texts):
        out.append(
            SynthesisRequest(
                text=t,
                language=langs[i],
                seed=i,
                cfg_scale=(2.0, 3.0, 1.5)[i % 3],
                voice=("aurora", None, "basalt")[i % 3],
                sampling=SamplingParams(greedy=i % 2 == 0),
                options={"pitch_std": 30.0 + 10 * i, "speaking_rate": 10.0 + i},
                max_frames=8 + 5 * i,
            )
        )
    return out


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory):
    from voxcli.models.zonos.tiny import build_tiny

    return build_tiny(tmp_path_factory.mktemp("zonos_engine") / "ckpt")


def test_alone_equals_among_seven_others(ckpt):
    r = alone_vs_among(ckpt, TARGET, _others(), roomy_pages=200, kv_pages=90)  # a few requests' pages: reuse
    assert not r.failures, r.failures
    assert r.got.shape == r.alone.shape and r.got.shape[0] == 30 * 512
    assert np.abs(r.got - r.alone).max() <= 1e-4
    assert r.kv_free == 90 and r.slots_free == 3
    assert any(r.target_id in b and len(b) > 1 for b in r.batches)  # it really shared decode steps

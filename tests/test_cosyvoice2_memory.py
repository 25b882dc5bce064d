"""CosyVoice 2's per-request memory (our tiny checkpoint, models/cosyvoice2/tiny.py).

The flow's state is its streamed chunks' caches: the encoder's keys/values and, for each of the 10 Euler
steps, every estimator block's keys/values for both CFG rows (9.2 MB per speech token at real size in
float32, memory.py). It grows with the utterance, so it is bounded by the request's length cap, which
follows upstream's rule (20x the text tokens) inside the flow's 300 s of fixed noise, and is reserved
against the memory plan's budget. Checked here:
- the length rule and the noise cap (upstream fails past it; we cut there, fixed_frames past it refused);
- the streamed caches never exceed what the request declares per token (`codec_state_bytes_per_frame`);
- the last chunk's full pass (and the offline pass) holds ONE Euler step's caches, with the streamed
  chunks' caches already given back: it held all ten steps' plus the streamed ones (about 20 steps' worth)
  before, doubling a long utterance's peak at its very end.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from voxcli.models.base import CodecItem, InputError, SamplingParams, SynthesisRequest


@pytest.fixture(scope="module")
def program(tmp_path_factory):
    from voxcli.models import load_model
    from voxcli.models.cosyvoice2.tiny import build_tiny

    return load_model(str(build_tiny(tmp_path_factory.mktemp("cosy2_memory") / "ckpt")))


def _bytes(cache: dict) -> int:
    return sum(t.nbytes for t in cache.values())


def _run_bytes(run) -> int:  # noqa: ANN001 - a FlowRun
    return sum(_bytes(c) for c in run.steps) + sum(t.nbytes for kv in run.enc.kv for t in kv)


def test_length_follows_upstream_rule_inside_the_noise(program):
    from voxcli.models.cosyvoice2.flow import NOISE_FRAMES

    short = program.prepare(SynthesisRequest(text="Hello world."))
    n = len(program.text_ids("Hello world."))
    assert short.max_frames == short.data.max_len == 20 * n and short.data.min_len == 2 * n
    text = " ".join(["hello"] * 2000)
    long = program.prepare(SynthesisRequest(text=text))
    room = NOISE_FRAMES // 2 - int(long.data.voice.prompt_tokens.numel())
    assert 20 * len(program.text_ids(text)) > room  # the rule alone would run past the noise
    assert long.max_frames == long.data.max_len == room and long.data.min_len <= room
    with pytest.raises(InputError, match=r"exceeds the \d+ speech tokens CosyVoice 2's flow can render"):
        program.prepare(SynthesisRequest(text="Hello.", fixed_frames=room + 1))


def test_streamed_state_stays_within_the_declared_bytes_and_the_last_chunk_holds_one_step(
    program, monkeypatch
):
    from voxcli.models.cosyvoice2.estimator import Estimator
    from voxcli.models.cosyvoice2.flow import Flow

    torch.set_num_threads(1)
    prompt = program.prepare(
        SynthesisRequest(text="Hello world.", sampling=SamplingParams(greedy=True), seed=3)
    )
    program.init_codec_slots(2)
    program.bind_slot(1, prompt)
    codec = program.codec_stage
    per_token = prompt.codec_state_bytes_per_frame
    P = int(prompt.data.voice.prompt_tokens.numel())
    rng = np.random.default_rng(0)
    tokens = rng.integers(0, 6561, size=260)
    done = 0
    for i, n in enumerate((40, 60, 80)):
        codec.decode([CodecItem(slot=1, codes=tokens[done : done + n], first=i == 0, last=False)])
        done += n
        held = _run_bytes(codec.slots[1].run)
        assert 0 < held <= prompt.codec_state_base_bytes + per_token * done
        assert held > 0.5 * per_token * (P + codec.slots[1].offset)  # the formula is not loose either
    seen: list[dict] = []
    peak = {"held": 0, "step": 0}
    forward, full = Estimator.forward, Flow.full
    in_full = []

    def full_spy(self, *args, **kw):  # noqa: ANN001, ANN002, ANN003, ANN202
        in_full.append(True)
        try:
            return full(self, *args, **kw)
        finally:
            in_full.pop()

    def spy(self, *args, **kw):  # noqa: ANN001, ANN002, ANN003, ANN202
        out = forward(self, *args, **kw)
        if not in_full:
            return out
        cache = args[5]
        if all(c is not cache for c in seen):
            seen.append(cache)
        step = _bytes(cache)
        held = sum(_bytes(c) for c in seen) + _run_bytes(codec.slots[1].run)
        peak["held"], peak["step"] = max(peak["held"], held), max(peak["step"], step)
        return out

    monkeypatch.setattr(Estimator, "forward", spy)
    monkeypatch.setattr(Flow, "full", full_spy)
    codec.decode([CodecItem(slot=1, codes=tokens[done:], first=False, last=True)])
    assert len(seen) == 10 and peak["step"] > 0
    assert peak["held"] <= peak["step"] * 1.01, (peak, "the full pass held more than one Euler step")
    codec.release_slot(1)

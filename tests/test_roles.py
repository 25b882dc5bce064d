"""Role engines in one process (no Ray): an LM-only engine feeding a codec-only engine gives the audio the
single "both" engine gives (greedy, exact), and cancels and failures free pages and slots on both sides."""

from __future__ import annotations

import dataclasses
import threading
import time

import numpy as np
import pytest
from support.roles_harness import sim_role_engine, split_submit, wait_until
from voxcli.models.base import SamplingParams, SynthesisRequest

from voxcli.config import ChunkSchedule, ConfigError, EngineConfig
from voxcli.engine.engine import Engine
from voxcli.engine.lanes import lane_layout
from voxcli.engine.roles import CodecEngine, CodeChunk, EpochClock, LMEngine, lm_items, relay
from voxcli.engine.stream import RequestFailed, RequestRejected


def test_role_lane_plans():
    cfg = EngineConfig(executor="sim", policy="full")
    assert lane_layout(cfg.replace(role="lm")).lanes == ("lm",)
    codec = lane_layout(cfg.replace(role="codec"))
    assert codec.lanes == ("urgent", "background") and codec.sms == {"urgent": None, "background": None}
    assert codec.priority_lane == "urgent"
    assert lane_layout(cfg.replace(policy="lanes", role="codec")).lanes == ("background",)
    with pytest.raises(ConfigError, match="role=lm needs policy full or lanes"):
        cfg.replace(policy="sync", role="lm")
    with pytest.raises(ConfigError, match="role must be one of both, lm, codec"):
        cfg.replace(role="decoder")


def test_epoch_clock_round_trip():
    t0 = time.monotonic()
    clock = EpochClock(lambda: time.monotonic() - t0)
    local = clock._now()
    assert abs(clock.from_epoch(clock.to_epoch(local)) - local) < 1e-3


@pytest.mark.parametrize("policy", ["full", "lanes"])
def test_split_sim_audio_equals_both_engine(policy):
    lengths = [1, 7, 23, 40, 61]
    requests = [SynthesisRequest(text=f"request {i}", fixed_frames=n) for i, n in enumerate(lengths)]
    both = sim_role_engine(policy=policy)
    try:
        ref = [s.wait(30) for s in [both.submit(r) for r in requests]]
    finally:
        both.close()
    lm, codec = sim_role_engine("lm", policy=policy), sim_role_engine("codec", policy=policy)
    try:
        runs = [split_submit(lm, codec, r, f"req-{i}") for i, r in enumerate(requests)]
        got = [out.wait(30) for out, _, _ in runs]
        for a, b, n in zip(got, ref, lengths, strict=True):
            assert a.shape == b.shape and np.array_equal(a, b), f"{n} frames: split audio differs"
        chunks = [list(lm_stream._chunks) for _, lm_stream, _ in runs]
        assert all(isinstance(c, CodeChunk) for cs in chunks for c in cs)
        assert [sum(c.frames for c in cs) for cs in chunks] == lengths
        # deadlines: chunk 0's is arrival + target; later ones follow the codec's first audio (fed back)
        assert all(c.deadline_epoch >= c.arrival_epoch for cs in chunks for c in cs)
        wait_until(lambda: lm.scheduler.kv.used == 0 and codec.scheduler.slots.used == 0
                    and lm.scheduler.slots.used == 0)
        assert codec.timelines[-1].ttfa is not None and codec.timelines[-1].status == "done"
    finally:
        lm.close()
        codec.close()


def test_split_cancel_and_failures_free_both_sides():
    lm, codec = sim_role_engine("lm"), sim_role_engine("codec")
    try:
        long = SynthesisRequest(text="a long one", fixed_frames=2000)
        out, lm_stream, t = split_submit(lm, codec, long, "cancel-me")
        next(iter(out))  # audio is flowing: pages held on the LM side, a slot on the codec side
        assert lm.scheduler.kv.used > 0 and codec.scheduler.slots.used == 1
        out.cancel()
        lm_stream.cancel()
        t.join(10)
        assert not t.is_alive()
        wait_until(lambda: lm.scheduler.kv.used == 0 and codec.scheduler.slots.used == 0)
        assert out.status == "cancelled" and lm_stream.status == "cancelled"

        # the LM fails mid-request: the codec side ends with the LM's reason and frees its slot
        bad = SynthesisRequest(text="breaks [fail:decode@30]", fixed_frames=60)
        out, lm_stream, t = split_submit(lm, codec, bad, "lm-fails")
        with pytest.raises(RequestFailed, match="LM engine ended the request: failed.*injected decode"):
            out.wait(10)
        t.join(10)
        wait_until(lambda: lm.scheduler.kv.used == 0 and codec.scheduler.slots.used == 0)

        # the LM's request dies before its first chunk: the attached codec stream still ends
        early = SynthesisRequest(text="breaks [fail:prefill]", fixed_frames=60)
        out, lm_stream, t = split_submit(lm, codec, early, "lm-fails-early")
        with pytest.raises(RequestFailed, match="injected prefill failure"):
            out.wait(10)
        assert codec.scheduler.slots.used == 0
    finally:
        lm.close()
        codec.close()


def test_codec_requests_wait_for_a_slot():
    lm, codec = sim_role_engine("lm"), sim_role_engine("codec", codec_slots=1)
    try:
        reqs = [SynthesisRequest(text=f"r{i}", fixed_frames=30) for i in range(3)]
        ref = np.concatenate([np.repeat(np.arange(30, dtype=np.float32), 1920)])
        runs = [split_submit(lm, codec, r, f"slot-{i}") for i, r in enumerate(reqs)]
        for out, _, _ in runs:
            audio = out.wait(30)
            assert audio.shape == ref.shape and np.array_equal(audio, ref)
        assert codec.scheduler.slots.used == 0
    finally:
        lm.close()
        codec.close()


@pytest.fixture(scope="module")
def qwen_programs(tiny_custom_voice):
    from voxcli.models import load_model

    return [load_model(str(tiny_custom_voice)) for _ in range(3)]  # both, lm, codec: one each


def test_split_tiny_qwen_audio_equals_both_engine(qwen_programs):
    """The real model across the hop: codes identical (greedy), audio as the both engine's."""
    from voxcli.models.qwen3_tts.reference import generate

    both_p, lm_p, codec_p = qwen_programs
    spec = both_p.spec
    cfg = EngineConfig(executor="cpu", policy="full", chunk=ChunkSchedule(first=3, ramp=(5,), steady=8),
                       kv_pages=64, kv_page_size=16, codec_slots=4, max_running=4, background_min_batch=2,
                       threads=1)
    reqs = [SynthesisRequest(text=f"request number {i} says hello", voice=spec.voices[i % len(spec.voices)],
                             language="english", seed=100 + i, sampling=SamplingParams(greedy=True),
                             fixed_frames=n, max_frames=40) for i, n in enumerate((4, 11, 19))]
    with Engine(both_p, cfg) as both:
        ref = [s.wait(120) for s in [both.submit(r) for r in reqs]]
    lm, codec = LMEngine(lm_p, cfg), CodecEngine(codec_p, cfg)
    try:
        runs = [split_submit(lm, codec, r, f"q{i}") for i, r in enumerate(reqs)]
        for (out, lm_stream, _), want, req in zip(runs, ref, reqs, strict=True):
            audio = out.wait(120)
            codes = np.concatenate([c.codes for c in lm_stream._chunks])
            ref_codes, _ = generate(both_p, req)  # batch-1 greedy reference (its engine is closed)
            assert np.array_equal(codes, ref_codes), "the LM engine's codes differ from the reference"
            # the codec batched these chunks with other requests' than the both engine did: float
            # rounding of a different batch composition, as in test_engine_cpu_qwen
            assert audio.shape == want.shape and np.abs(audio - want).max() < 1e-4
        wait_until(lambda: lm.scheduler.kv.used == 0 and codec.scheduler.slots.used == 0)
    finally:
        lm.close()
        codec.close()


def test_a_later_chunk_for_an_unknown_request_is_refused():
    codec = sim_role_engine("codec")
    try:
        chunk = CodeChunk(key="gone", index=3, start=30, codes=np.zeros((10, 16), np.int64), last=False,
                          deadline_epoch=0.0, arrival_epoch=time.time(), ttfa_target_s=0.2,
                          schedule=ChunkSchedule(), sent_epoch=time.time())
        with pytest.raises(LookupError, match="holds no such request"):
            codec.feed(chunk)
        assert not codec._by_key and not codec._streams  # nothing was opened for it
    finally:
        codec.close()


def _chunk(key: str, index: int, start: int, frames: int, books: int) -> CodeChunk:
    """Chunk `index` of `key` as the sim's LM makes it (frame k's codes are all k)."""
    codes = np.repeat(np.arange(start, start + frames, dtype=np.int64)[:, None], books, axis=1)
    return CodeChunk(key=key, index=index, start=start, codes=codes, last=False, deadline_epoch=0.0,
                     arrival_epoch=time.time(), ttfa_target_s=0.2, schedule=ChunkSchedule(),
                     sent_epoch=time.time())


class _NoLink:
    """A codes link that never delivers: the test hands chunks to the replica's `_take` itself."""

    def __init__(self, peer, me, take, lost) -> None:  # type: ignore[no-untyped-def]
        self.alive = True

    def cancel(self) -> None:
        self.alive = False


def test_codec_replica_reaps_requests_nobody_feeds():
    """The codec replica (without Ray: the class Serve wraps) ends a request whose audio call is open but
    that nobody has fed or read for its idle timeout (its LM replica stopped sending without an end),
    failing the call with the reason, freeing its slot and counting it; a fed one is left alone, and a
    cancelled one is not counted. The reaper is driven with explicit times (`reap(now)`), not waited
    for: the replica's own reaper thread has a timeout no test reaches."""
    import asyncio

    from voxcli.cluster.ray_roles import CodecReplica

    timeout = 3600.0
    rep = CodecReplica({"model": "qwen3-tts-1.7b", "executor": "sim", "gpu": "h100"}, pcm_scale=1.0,
                       idle_timeout_s=timeout)
    rep.link_class = _NoLink
    try:
        books = rep.engine.spec.codebooks

        async def scenario() -> None:
            orphan = rep.audio("orphan", "lm-0", SynthesisRequest(text="never fed", fixed_frames=30))
            busy = rep.audio("busy", "lm-0", SynthesisRequest(text="fed", fixed_frames=300))
            orphan_first = asyncio.ensure_future(orphan.__anext__())
            busy_first = asyncio.ensure_future(busy.__anext__())
            while "orphan" not in rep._active or "busy" not in rep._active:
                await asyncio.sleep(0)  # both calls opened (their requests sent to the LM replica)
            chunk = _chunk("busy", 0, 0, 3, books)
            rep._take(dataclasses.replace(chunk, schedule=ChunkSchedule(first=3, steady=3)), time.time())
            await asyncio.wait_for(busy_first, 60)  # fed and read: active (a bound, not a pace)
            now = time.monotonic()
            rep._active["orphan"] = now - 2 * timeout  # its last activity, long ago
            assert rep.reap(now) == ["orphan"]
            with pytest.raises(RequestFailed, match="nobody fed or read it for 3600 s"):
                await asyncio.wait_for(orphan_first, 60)
            assert rep.engine.holds("busy") and not rep.engine.holds("orphan")
            rep.cancel("busy")
            with pytest.raises((StopAsyncIteration, RequestFailed)):
                while True:
                    await busy.__anext__()

        asyncio.run(scenario())
        wait_until(lambda: rep.engine.scheduler.slots.used == 0)
        m = rep.metrics()
        assert rep.reaped == 1 and m["counters"]["reaped"] == 1  # the cancelled one is not reaped
        assert m["outcomes"]["failed"] == 1

        async def again() -> None:  # a request that ended here cannot be asked for again
            async for _ in rep.audio("orphan", "lm-0", SynthesisRequest(text="x", fixed_frames=3)):
                pass

        with pytest.raises(RequestFailed, match="orphan ended here"):
            asyncio.run(again())
    finally:
        rep.engine.close()


def test_a_later_sentence_is_admitted_against_the_earlier_audio_across_the_hop():
    """`playback_epoch` (what the front door sends for `continues=`): the LM admits the sentence as a
    continuation (queued ahead, never refused for load) and its chunk 0's deadline, on both sides of the
    hop, is the end of the earlier sentence's audio, as the single engine's `continues=` gives."""
    lm, codec = sim_role_engine("lm", max_queue=1, max_running=1), sim_role_engine("codec")
    try:
        first = SynthesisRequest(text="the first sentence", fixed_frames=400)
        out1, lm1, _ = split_submit(lm, codec, first, "s1")
        next(iter(out1))
        blocker = lm.submit(SynthesisRequest(text="someone else", fixed_frames=10), key="other")
        # the queue is full (max_queue=1, the LM row busy): a new request is refused, a continuation is not
        with pytest.raises(RequestRejected):
            lm.submit(SynthesisRequest(text="new", fixed_frames=10), key="new").wait(10)
        due = time.time() + 3.0  # the earlier sentence's audio plays until then
        out = codec.attach("s2")
        lm2 = lm.submit(SynthesisRequest(text="the second sentence", fixed_frames=30), key="s2",
                        playback_epoch=due)
        t = threading.Thread(target=relay, args=(lm_items(lm2), codec, lm2.cancel), daemon=True)
        t.start()
        # submit hands the request to the engine's thread: wait until its scheduler holds it
        wait_until(lambda: any(r.user is lm2 for r in list(lm.scheduler.requests.values())))
        r2 = next(r for r in list(lm.scheduler.requests.values()) if r.user is lm2)
        assert r2.continuation and list(lm.scheduler.waiting)[0] is r2  # ahead of the blocker
        assert abs(lm.clock.to_epoch(r2.deadline_of(0)) - due) < 0.01
        out1.cancel()
        lm1.cancel()
        audio = out.wait(30)
        assert audio.shape[0] == 30 * 1920
        chunks = list(lm2._chunks)
        assert chunks[0].continuation and abs(chunks[0].arrival_epoch + chunks[0].ttfa_target_s - due) < 0.01
        tl = next(x for x in codec.timelines if x.name == "s2")
        # the codec plays later chunks after the earlier audio's end (not after its own first audio)
        rec = tl.chunks[1]
        want = due + rec.start_frame * codec.spec.frame_seconds
        assert abs(codec.clock.to_epoch(rec.deadline) - want) < 0.01
        blocker.cancel()
    finally:
        lm.close()
        codec.close()

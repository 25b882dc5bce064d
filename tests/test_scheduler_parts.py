"""Each scheduler part (engine/scheduler.py's docstring) built and driven alone, through its public
methods: the request book, the LM batcher, the codec batcher, the hand-off sink and the remote frame
source. Their wiring together is what the scheduler, decision-digest and role tests cover."""

from __future__ import annotations

import numpy as np
import pytest
from voxcli.models.base import ChunkSchedule, Prompt, StepOutput

from voxcli.config import EngineConfig
from voxcli.engine.codec_batcher import CodecBatcher
from voxcli.engine.codec_slots import CodecSlotTable
from voxcli.engine.estimates import LatencyEstimator, default_profile
from voxcli.engine.events import Delivered, Ended, HandedOff, Released
from voxcli.engine.executors.base import Completion
from voxcli.engine.handoff import HandOffSink
from voxcli.engine.kv_cache import KVPagePool
from voxcli.engine.lane_policies import lane_policy
from voxcli.engine.lanes import lane_layout
from voxcli.engine.lm_batcher import LmBatcher
from voxcli.engine.remote_source import RemoteFrameSource
from voxcli.engine.request import Request, RequestState
from voxcli.engine.request_book import RequestBook

S = RequestState
SCHEDULE = ChunkSchedule(first=2, ramp=(), steady=3)
CODEBOOKS = 2


class Admission:
    """The admission hooks a part calls, recorded."""

    def __init__(self) -> None:
        self.forgotten: list[int] = []
        self.first_audio: list[tuple[int, float]] = []

    def forget(self, r: Request) -> None:
        self.forgotten.append(r.id)

    def on_first_audio(self, r: Request, now: float) -> None:
        self.first_audio.append((r.id, now))


class Holder:
    """A part that holds requests (RequestHolder), recorded: what the book asked of it."""

    def __init__(self, holds: bool) -> None:
        self.holds = holds
        self.dropped: list[int] = []
        self.released: list[int] = []

    def drop(self, r: Request) -> None:
        self.dropped.append(r.id)

    def release(self, r: Request) -> bool:
        self.released.append(r.id)
        return self.holds


def request(rid: int, frames: int = 20, width: int = 1) -> Request:
    r = Request(rid, Prompt(length=4, data=None, max_frames=frames, width=width), 0.0, SCHEDULE, 0.08, 1.0)
    r.need_pages = 2
    return r


def frame(value: int) -> np.ndarray:
    return np.full(CODEBOOKS, value, dtype=np.int64)


def settings(**kw: object) -> tuple[EngineConfig, LatencyEstimator]:
    cfg = EngineConfig(executor="sim", admission="prefill-first", **kw)  # type: ignore[arg-type]
    return cfg, LatencyEstimator(default_profile(), cfg)


# ---------------------------------------------------------------------------------------- request book
def test_the_book_ends_a_request_once_and_releases_what_it_holds_when_no_batch_uses_it() -> None:
    admission, first, second = Admission(), Holder(holds=True), Holder(holds=False)
    book = RequestBook(admission)
    book.hold_with(first, second)
    r = request(1)
    book.open(r)
    r.lm_inflight = True  # a batch in flight still uses its pages
    events = book.end(r, S.FAILED, 2.0, "broken")
    assert [type(e) for e in events] == [Ended]
    assert first.dropped == second.dropped == [1] and first.released == []
    assert r.state is S.FAILED and r.reason == "broken" and r.timeline.finished == 2.0
    assert 1 not in book.requests and admission.forgotten == [1]
    r.lm_inflight = False  # the batch came back
    assert [type(e) for e in book.maybe_release(r)] == [Released]
    assert first.released == second.released == [1]
    assert book.cancel(1, 3.0) == []  # idempotent: it is no longer open


def test_the_book_keeps_fed_requests_and_closes_everything() -> None:
    book = RequestBook(Admission())
    holder = Holder(holds=False)
    book.hold_with(holder)
    fed, plain = request(1), request(2)
    fed.text_feed = object()
    book.open(fed)
    book.open(plain)
    assert list(book.fed) == [1] and sorted(book.requests) == [1, 2]
    plain.chunk_inflight = True
    events = book.close(5.0, "closing", idle=True)  # idle: every batch came back, the flags are stale
    assert [type(e) for e in events] == [Ended, Ended]  # nothing held: no Released
    assert not book.requests and not book.fed and not plain.chunk_inflight
    assert fed.state is plain.state is S.CANCELLED
    assert book.fail(1, 6.0, "gone") == []


# ---------------------------------------------------------------------------------------- LM batcher
def lm_alone(**kw: object) -> tuple[LmBatcher, RequestBook, KVPagePool]:
    cfg, est = settings(role="lm", policy="full", **kw)
    book = RequestBook(Admission())
    kv = KVPagePool(8, 16)
    lm = LmBatcher(cfg, lane_layout(cfg), est, kv, book, HandOffSink(book, CODEBOOKS), None, "urgent",
                   False, lambda head, prefill_s, now: True)
    book.hold_with(lm)
    return lm, book, kv


def step(lm: LmBatcher, now: float, frames: dict[int, np.ndarray | None], done: tuple[int, ...] = ()) -> list:
    work = lm.lm_work(now)
    assert work is not None
    reqs: list[Request] = work.tag
    out = [StepOutput(frames.get(r.id), r.id in done) for r in reqs]
    return lm.complete(Completion(work, now, now + 0.01, out))


def test_the_lm_batcher_prefills_the_queue_head_then_decodes_on_the_hot_path() -> None:
    lm, book, kv = lm_alone()
    a, b = request(1, frames=5), request(2, frames=5)
    for r in (a, b):
        book.open(r)
        lm.waiting.append(r)
    work = lm.lm_work(0.0)
    assert work is not None and work.stage == "prefill" and work.tag == [a, b]
    assert kv.free == 4 and a.pages and a.slot == -1  # a hand-off engine holds no codec slot
    assert lm.lm_work(0.0) is None  # the prefill is in flight and nothing else runs: nothing to do
    lm.complete(Completion(work, 0.0, 0.01, [StepOutput(frame(0), False), StepOutput(frame(10), False)]))
    assert lm.decoding == {1: a, 2: b} and lm.decoding_rows == 2 and not lm.idle
    handed: list[HandedOff] = []
    ended: list[int] = []
    for i in range(1, 5):  # decode steps of every running row: frames go into the frame log
        for ev in step(lm, 0.1 * i, {1: frame(i), 2: frame(10 + i)}):
            if isinstance(ev, HandedOff):
                handed.append(ev)
            elif isinstance(ev, Ended):
                ended.append(ev.request.id)
    # chunk 0 (2 frames) and chunk 1 (3 frames: the frame cap of 5 ends it) of each, codes in order
    assert [(ev.request.id, ev.chunk.index, ev.chunk.last) for ev in handed] == [
        (1, 0, False), (2, 0, False), (1, 1, True), (2, 1, True)]
    assert [ev.codes[:, 0].tolist() for ev in handed] == [[0, 1], [10, 11], [2, 3, 4], [12, 13, 14]]
    assert ended == [1, 2] and lm.idle and kv.free == 8 and not book.requests


def test_the_lm_batcher_fails_a_batch_and_frees_its_rows() -> None:
    lm, book, kv = lm_alone()
    r = request(1)
    book.open(r)
    lm.waiting.append(r)
    work = lm.lm_work(0.0)
    assert work is not None
    events = lm.complete(Completion(work, 0.0, 0.01, None, error=RuntimeError("device lost")))
    assert [type(e) for e in events] == [Ended, Released]
    assert r.state is S.FAILED and "prefill stage failed" in (r.reason or "") and kv.free == 8


def test_the_lm_batcher_caps_a_step_at_the_largest_decode_bucket() -> None:
    lm, book, _ = lm_alone(decode_buckets=(1, 2), max_running=3)
    rs = [request(i, frames=50) for i in (1, 2, 3)]
    for r in rs:
        book.open(r)
        lm.waiting.append(r)
    # (max_prefill_batch takes them one prefill at a time or together; run prefills until all decode)
    while lm.waiting or lm.prefilling:
        work = lm.lm_work(0.0)
        assert work is not None and work.stage == "prefill"
        lm.complete(Completion(work, 0.0, 0.01, [StepOutput(frame(0), False)] * len(work.tag)))
    work = lm.lm_work(0.1)
    assert work is not None and work.stage == "decode" and work.tag == rs[:2] and work.bucket == 2


# ---------------------------------------------------------------------------------------- codec batcher
class Source:
    """A frame source (chunk_sink.FrameSource), recorded: what the codec batcher tells it."""

    def __init__(self) -> None:
        self.idle = True
        self.delivered: list[tuple[int, int]] = []

    def chunk_delivered(self, r: Request, next_end: int, now: float) -> list:
        self.delivered.append((r.id, next_end))
        return []


def codec_alone(**kw: object) -> tuple[CodecBatcher, RequestBook, Admission, Source]:
    cfg, est = settings(policy="full", **kw)
    book, admission = RequestBook(Admission()), Admission()
    codec = CodecBatcher(cfg, lane_layout(cfg), est, lane_policy("full"), CodecSlotTable(4), book, CODEBOOKS,
                         0.08, admission.on_first_audio)
    book.hold_with(codec)
    source = Source()
    codec.feed_from(source)
    return codec, book, admission, source


def running(book: RequestBook, codec: CodecBatcher, rid: int, frames: int) -> Request:
    r = request(rid, frames=100)
    book.open(r)
    r.slot = codec.slots.acquire(rid)  # type: ignore[assignment]
    r.state = S.DECODE
    r.frames.extend(frame(rid * 100 + i) for i in range(frames))
    return r


def test_the_codec_batcher_sends_first_chunks_to_the_urgent_lane_and_delivers_them() -> None:
    codec, book, admission, source = codec_alone()
    a, b = running(book, codec, 1, 3), running(book, codec, 2, 2)
    assert codec.advance(a, 0.0) == [] and codec.advance(b, 0.0) == []
    assert sorted(codec.pending) == [1, 2] and codec.chunks.first_count == 2
    assert codec.background_batch(0.0, urgent_lane=True) is None  # first chunks are the urgent lane's
    work = codec.urgent_batch(0.0)
    assert work is not None and work.lane == "urgent" and [ch.request for ch in work.tag] == [a, b]
    assert [item.codes[:, 0].tolist() for item in work.rows] == [[100, 101], [200, 201]]
    assert not codec.pending and a.chunk_inflight
    pcm = [np.zeros(16, dtype=np.float32)] * 2
    events = codec.complete(Completion(work, 0.0, 0.05, pcm))
    assert [type(e) for e in events] == [Delivered, Delivered]
    assert admission.first_audio == [(1, 0.05), (2, 0.05)] and a.t_first_audio == 0.05
    # running requests: their frame source files the next chunk (ends at 2 + 3 frames)
    assert source.delivered == [(1, 5), (2, 5)] and not a.chunk_inflight


def test_the_codec_batcher_holds_a_background_batch_until_b_or_the_lm_is_idle() -> None:
    codec, book, _, source = codec_alone(background_min_batch=3, deadline_launch=False, slack_cap=False)
    rs = [running(book, codec, i, 5) for i in (1, 2)]
    for r in rs:
        r.next_chunk, r.next_start, r.next_end = 1, 2, 5  # chunk 0 delivered: continuations
        r.t_first_audio = 0.0
        codec.advance(r, 0.0)
    assert codec.chunks.first_count == 0 and len(codec.chunks.order) == 2
    source.idle = False  # the LM still generates: two chunks wait for a third
    assert codec.background_batch(0.0, urgent_lane=True) is None
    source.idle = True  # nothing more will come: they go now
    work = codec.background_batch(0.0, urgent_lane=True)
    assert work is not None and [ch.request for ch in work.tag] == rs and work.lane == "background"


def test_the_codec_batcher_ends_a_request_on_a_failed_batch_and_gives_its_slot_back() -> None:
    codec, book, _, _ = codec_alone()
    r = running(book, codec, 1, 2)
    codec.advance(r, 0.0)
    work = codec.urgent_batch(0.0)
    assert work is not None
    events = codec.complete(Completion(work, 0.0, 0.05, None, error=RuntimeError("codec down")))
    assert [type(e) for e in events] == [Ended, Released]
    assert r.state is S.FAILED and codec.slots.free == 4 and not book.requests


# ---------------------------------------------------------------------------------------- remote source
def test_the_remote_source_waits_for_a_slot_then_feeds_the_codec_batcher() -> None:
    cfg, est = settings(policy="full", role="codec", codec_slots=1)
    book = RequestBook(Admission())
    codec = CodecBatcher(cfg, lane_layout(cfg), est, lane_policy("full"), CodecSlotTable(1), book, CODEBOOKS,
                         0.08, lambda r, now: None)
    remote = RemoteFrameSource(book, codec)
    codec.feed_from(remote)
    book.hold_with(remote, codec)
    bound: list[int] = []
    remote.bind = lambda r: bound.append(r.id)
    a, b = request(1, frames=1 << 30), request(2, frames=1 << 30)
    assert remote.open(a, 0.0) == [] and remote.open(b, 0.0) == []
    assert bound == [1] and list(remote.waiting) == [b] and remote.decoding == {1: a}
    remote.feed(a, np.stack([frame(1), frame(2)]), False, 0.1)  # chunk 0 (2 frames) is complete
    remote.feed(b, np.stack([frame(3)]), True, 0.1)  # buffered: no slot yet
    assert list(codec.pending) == [1] and b.n_frames == 1
    remote.feed(a, np.stack([frame(4)]), True, 0.2)  # the LM stopped at 3 frames
    assert a.state is S.DRAINING and remote.idle and list(remote.waiting) == [b]  # b still waits for a slot
    work = codec.urgent_batch(0.2)
    assert work is not None
    events = codec.complete(Completion(work, 0.2, 0.25, [np.zeros(16, dtype=np.float32)]))
    assert [type(e) for e in events] == [Delivered]  # the tail (1 frame) is pended behind it
    assert codec.pending[1].last and codec.pending[1].end == 3


def test_the_hand_off_sink_takes_no_queued_chunk() -> None:
    sink = HandOffSink(RequestBook(Admission()), CODEBOOKS)
    assert sink.passes_on and not sink.pending
    r = request(1)
    with pytest.raises(RuntimeError, match="holds no chunk"):
        sink.add(r.chunk_to(2, False, 0.0))


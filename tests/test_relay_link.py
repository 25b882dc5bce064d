"""The links between role replicas without Ray (voxcli/cluster/relay.py, ray_roles.py): an outbox streams
everything ready at once, in order, to the one live link; a later chunk waits there within its slack so
that several share an item, chunk 0 and a bad end never wait; a codec replica's `audio` call sends its
request, then its first audio's time, to the LM replica over the work link, plays the chunks that come
back, ends a request the LM refused or rejected as that error, sends the cancel of a request cancelled
here, and fails the requests of an LM replica whose link broke with one sentence; an LM replica generates
what its work link brings, for the codec replica that sent it, holds its later chunks, and stops on a
cancel or when that codec replica is lost."""

from __future__ import annotations

import asyncio
import time
from dataclasses import asdict

import numpy as np
import pytest

from voxcli.cluster.relay import Outbox, Refused, RelayStats, Work, serve_items
from voxcli.config import ChunkSchedule
from voxcli.engine.hold import HOLD_LEAD_S, chunk_hold_s
from voxcli.engine.roles import CodeChunk

BOOKS = 16


def _chunk(key: str, index: int, last: bool, frames: int = 3, deadline: float = 0.0) -> CodeChunk:
    codes = np.zeros((frames, BOOKS), np.int64)
    codes[:, 0] = np.arange(frames * index, frames * (index + 1))  # the sim's PCM: the frame's index
    return CodeChunk(key=key, index=index, start=frames * index, codes=codes,
                     last=last, deadline_epoch=deadline, arrival_epoch=time.time(), ttfa_target_s=0.2,
                     schedule=ChunkSchedule(first=frames, steady=frames), sent_epoch=time.time())


def test_outbox_streams_what_is_ready_in_order_and_a_newer_link_supersedes():
    async def scenario() -> None:
        box, stats = Outbox(), RelayStats()
        box.put(_chunk("a", 0, False))  # before any link: it waits in the outbox
        box.put(_chunk("b", 0, False))
        link = serve_items(box, stats)
        first = await link.__anext__()
        assert [(c.key, c.index) for c in first] == [("a", 0), ("b", 0)]  # one item, every chunk ready
        box.put(_chunk("a", 1, True))
        box.put(_chunk("b", 1, False))
        box.drop("b")  # b ended on the LM side: its chunk not taken yet goes nowhere
        assert [(c.key, c.index) for c in await link.__anext__()] == [("a", 1)]
        waiting = asyncio.ensure_future(link.__anext__())
        await asyncio.sleep(0)
        newer = serve_items(box, stats)  # the codec replica restarted and linked again
        box.put(_chunk("c", 0, True))
        assert [c.key for c in await newer.__anext__()] == ["c"]
        with pytest.raises(StopAsyncIteration):
            await waiting  # the older link ended
        assert (stats.items, stats.chunks, stats.code_bytes) == (3, 4, 4 * 3 * BOOKS * 8)
        await newer.aclose()
        assert box.consumer == 0

    asyncio.run(scenario())


def test_a_later_chunk_holds_within_its_slack_and_chunk_0_and_ends_never_do():
    from voxcli.engine.roles import RoleEnd

    now = 1000.0
    far, near = now + 10.0, now + HOLD_LEAD_S + 0.05
    assert chunk_hold_s(_chunk("a", 1, False, deadline=far), 0.25, now_epoch=now) == 0.25
    assert chunk_hold_s(_chunk("a", 1, False, deadline=near), 0.25, now_epoch=now) == pytest.approx(0.05)
    assert chunk_hold_s(_chunk("a", 1, False, deadline=now), 0.25, now_epoch=now) == 0.0  # late: at once
    assert chunk_hold_s(_chunk("a", 0, False, deadline=far), 0.25, now_epoch=now) == 0.0  # first audio
    assert chunk_hold_s(_chunk("a", 2, True, deadline=far), 0.25, now_epoch=now) == 0.25  # a last one too
    assert chunk_hold_s(RoleEnd("a", "failed", "x"), 0.25, now_epoch=now) == 0.0
    assert chunk_hold_s(_chunk("a", 1, False, deadline=far), 0.0, now_epoch=now) == 0.0  # holding off


def test_outbox_sends_held_chunks_together_when_the_first_hold_runs_out_or_an_unheld_item_comes():
    t = [0.0]
    box = Outbox(clock=lambda: t[0])
    box.put(_chunk("a", 1, False), 0.25)
    t[0] = 0.1
    box.put(_chunk("b", 1, False), 0.25)
    assert not box.ready()
    t[0] = 0.25  # a's hold ran out: b goes with it
    assert box.ready() and [(c.key, c.index) for c in box.take()] == [("a", 1), ("b", 1)]
    assert not box.ready()
    box.put(_chunk("a", 2, False), 0.25)
    box.put(_chunk("c", 0, False))  # a first chunk does not wait, and takes what waits before it along
    assert box.ready() and [(c.key, c.index) for c in box.take()] == [("a", 2), ("c", 0)]
    box.put(_chunk("a", 3, False), 0.25)
    box.drop("a")  # a ended here: nothing waits any more
    assert not box.ready() and box.due == float("inf")

    async def sent_after_its_hold() -> list:
        real = Outbox()
        link = serve_items(real)
        real.put(_chunk("d", 1, False), 0.01)
        real.put(_chunk("e", 1, False), 0.01)
        return await asyncio.wait_for(link.__anext__(), 30)  # the link's own timer sends them

    assert [c.key for c in asyncio.run(sent_after_its_hold())] == ["d", "e"]


def test_outbox_drops_chunks_nobody_pulls(monkeypatch):
    from voxcli.cluster import relay

    box = Outbox()
    box.put(_chunk("a", 0, False))
    monkeypatch.setattr(relay, "STALE_S", 0.0)
    box.put(_chunk("b", 0, False))  # no link for longer than STALE_S: the codec replica is gone
    assert [c.key for c in box.items] == ["b"]


class _NoLink:
    """A link that never delivers (the test hands items to `_take` / `_work` itself)."""

    def __init__(self, peer, me, take, lost) -> None:
        self.peer, self.alive, self.lost = peer, True, lost

    def cancel(self) -> None:
        self.alive = False


SPEC = dict(model="qwen3-tts-1.7b", executor="sim", gpu="h100")


def _replica(cls_name: str, name: str):
    """A role replica (its engine on the real-time sim) whose links are `_NoLink`s; closed after the test."""
    from voxcli.cluster import ray_roles
    from voxcli.cluster.ray_app import ReplicaSpec

    rep = getattr(ray_roles, cls_name)(asdict(ReplicaSpec(**SPEC)), 1.0, name)
    rep.link_class = _NoLink
    yield rep
    rep.engine.close()


@pytest.fixture
def codec_replica():
    yield from _replica("CodecReplica", "c-0")


def _request(text: str = "hi", frames: int = 9):
    from voxcli.models.base import SynthesisRequest

    return SynthesisRequest(text=text, fixed_frames=frames)


def _work(rep, lm: str) -> list[Work]:
    box = rep._work.get(lm)
    return list(box.items) if box is not None else []


async def _started(rep, key: str, lm: str, request) -> tuple[object, asyncio.Future]:
    """The codec replica's `audio` generator and its first item's future, once its request left."""
    gen = rep.audio(key, lm, request)
    first = asyncio.ensure_future(gen.__anext__())
    for _ in range(100):
        if any(w.key == key and w.kind == "generate" for w in _work(rep, lm)):
            return gen, first
        await asyncio.sleep(0)
    raise AssertionError("the audio call sent no request to the LM replica")


def _until(check, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline
        time.sleep(0.005)


def test_codec_replica_sends_the_request_and_its_first_audio_and_plays_the_chunks(codec_replica):
    rep = codec_replica
    request = _request()

    async def scenario() -> list[np.ndarray]:
        gen, first = await _started(rep, "k", "lm-0", request)
        assert _work(rep, "lm-0") == [Work("generate", "k", request, None)]  # the request itself, once
        for i in range(3):
            rep._take(_chunk("k", i, i == 2), time.time())
        got = [await first]
        got += [pcm async for pcm in gen]
        return got

    pcm = asyncio.run(scenario())
    assert sum(len(p) for p in pcm) == 9 * 1920
    assert np.array_equal(np.concatenate(pcm)[::1920], np.arange(9, dtype=np.float32))  # PCM = frame index
    kinds = [w.kind for w in _work(rep, "lm-0")]
    assert kinds == ["generate", "first_audio"]  # done well here: no cancel goes back
    assert _work(rep, "lm-0")[1].epoch == pytest.approx(time.time(), abs=30)
    assert "lm-0" in rep._links and rep.hops.chunks == 0 and len(rep.hops.lm_to_codec_s) == 3
    _until(lambda: "k" in rep._gone)  # the engine's host thread tells the replica the request ended
    rep._take(_chunk("k", 3, True), time.time())  # a late chunk of an ended request is dropped
    assert not rep.engine.holds("k")


def test_codec_replica_ends_a_refused_or_rejected_request_as_that_error(codec_replica):
    from voxcli.models.base import InputError

    from voxcli.engine.roles import RoleEnd
    from voxcli.engine.stream import RequestRejected

    rep = codec_replica

    async def ends(key: str, item) -> BaseException:
        gen, first = await _started(rep, key, "lm-0", _request())
        rep._take(item, time.time())
        with pytest.raises(Exception) as e:
            await first
        return e.value

    refused = asyncio.run(ends("bad", Refused("bad", InputError("asked to be refused"))))
    assert isinstance(refused, InputError) and "asked to be refused" in str(refused)  # a server's 400
    rejected = asyncio.run(ends("full", RoleEnd("full", "rejected", "the KV pool is full")))
    assert isinstance(rejected, RequestRejected)
    assert str(rejected) == "the LM replica lm-0 ended the request: rejected (the KV pool is full)"
    _until(lambda: not rep.engine.holds("bad") and not rep.engine.holds("full"))
    assert [w.kind for w in _work(rep, "lm-0")] == ["generate", "generate"]  # they ended there: no cancel


def test_a_request_cancelled_on_the_codec_replica_is_cancelled_on_its_lm_replica(codec_replica):
    rep = codec_replica

    async def scenario() -> None:
        gen, first = await _started(rep, "c", "lm-2", _request(frames=300))
        rep._take(_chunk("c", 0, False), time.time())
        await first
        rep.cancel("c")  # the front door's cancel
        for _ in range(1000):
            if any(w.kind == "cancel" for w in _work(rep, "lm-2")):
                break
            await asyncio.sleep(0.005)
        await gen.aclose()

    asyncio.run(scenario())
    assert [w.kind for w in _work(rep, "lm-2")] == ["generate", "first_audio", "cancel"]
    _until(lambda: rep.engine.scheduler.slots.used == 0)


def test_a_broken_link_fails_its_lms_requests_with_one_sentence(codec_replica):
    from voxcli.engine.stream import RequestFailed

    rep = codec_replica

    async def scenario() -> list[np.ndarray]:
        gen, first = await _started(rep, "k", "lm-1", _request())
        rep._take(_chunk("k", 0, False), time.time())
        got = [await first]
        rep._send("lm-1", Work("generate", "not-taken-yet", _request()))
        rep._lost("lm-1", "the LM replica lm-1 failed mid-stream (ActorDiedError: it died)")
        with pytest.raises(RequestFailed, match="the LM replica lm-1 failed mid-stream"):
            async for pcm in gen:
                got.append(pcm)
        return got

    assert len(asyncio.run(scenario())[0]) == 3 * 1920
    assert _work(rep, "lm-1") == []  # a restarted LM replica gets none of the dead one's work
    _until(lambda: rep.engine.scheduler.slots.used == 0)


async def until(check) -> None:
    """Wait (on the test's event loop) until `check()` holds: the replica's engine runs on its own thread."""
    for _ in range(4000):
        if check():
            return
        await asyncio.sleep(0.005)
    raise AssertionError("timed out")


@pytest.fixture
def lm_replica():
    yield from _replica("LMReplica", "lm-0")


def test_lm_replica_generates_its_work_for_the_codec_that_sent_it_and_stops_when_that_codec_goes(lm_replica):
    from voxcli.models.base import InputError

    from voxcli.engine.roles import CodeChunk

    rep = lm_replica

    async def scenario() -> None:
        link = serve_items(rep._outbox("c-0"), rep.relay)  # as `codes_for` serves it (no work link here)
        rep._work("c-0", Work("generate", "a", _request(frames=9)))
        got: list = []
        while not (got and isinstance(got[-1], CodeChunk) and got[-1].last):
            got += await link.__anext__()
        assert [c.key for c in got] == ["a"] * len(got) and sum(c.frames for c in got) == 9
        rep._work("c-0", Work("first_audio", "a", epoch=time.time()))  # after its end: ignored
        rep._work("c-0", Work("generate", "long", _request(frames=3000)))
        await until(lambda: rep.engine.scheduler.kv.used > 0)
        rep._work("c-0", Work("cancel", "long"))  # the codec side ended it first
        await until(lambda: "long" not in rep._running and rep.engine.scheduler.kv.used == 0)
        rep._work("c-0", Work("generate", "bad", _request(text="[fail:input] no")))
        await until(lambda: any(isinstance(x, Refused) for x in rep._outbox("c-0").items))
        refused = [x for x in rep._outbox("c-0").items if isinstance(x, Refused)]
        assert refused[0].key == "bad" and isinstance(refused[0].error, InputError)
        rep._work("c-1", Work("generate", "orphan", _request(frames=3000)))
        await until(lambda: rep.engine.scheduler.kv.used > 0)
        rep._codec_lost("c-1")  # its work link broke: it died
        await until(lambda: not rep._running and rep.engine.scheduler.kv.used == 0)
        assert rep._outbox("c-1").items == []
        await link.aclose()
        # a codec replica that restarted links anew: what ran here for its old self stops, the work link
        # is opened again, and the old work link breaking later ends nothing of the new one's
        first = rep.codes_for("c-2")
        opened = asyncio.ensure_future(first.__anext__())
        await until(lambda: "c-2" in rep._links)
        old_work = rep._links["c-2"]
        rep._work("c-2", Work("generate", "before-restart", _request(frames=3000)))
        await until(lambda: rep.engine.scheduler.kv.used > 0)
        again = rep.codes_for("c-2")
        reopened = asyncio.ensure_future(again.__anext__())
        await until(lambda: rep._links["c-2"] is not old_work and not rep._running)
        assert not old_work.alive
        await until(lambda: rep.engine.scheduler.kv.used == 0)
        rep._work("c-2", Work("generate", "after-restart", _request(frames=3000)))
        await until(lambda: "after-restart" in rep._running and rep.engine.scheduler.kv.used > 0)
        old_work.lost("the codec replica c-2 failed mid-stream (ActorDiedError: it died)")
        assert "after-restart" in rep._running  # the old link's end is not the new one's
        rep._links["c-2"].lost("the codec replica c-2 failed mid-stream (ActorDiedError: it died)")
        await until(lambda: not rep._running and rep.engine.scheduler.kv.used == 0)
        for pending in (opened, reopened):
            pending.cancel()

    asyncio.run(scenario())


def test_lm_replica_holds_later_chunks_so_that_they_share_a_link_item(lm_replica):
    rep = lm_replica
    rep.chunk_hold = 60.0  # far beyond the run: the holds end only when an item that does not hold comes

    async def scenario() -> None:
        box = rep._outbox("c-0")
        link = serve_items(box, rep.relay)
        # a later sentence whose audio plays 100 s from now: every later chunk has slack for the whole hold
        rep._work("c-0", Work("generate", "a", _request(frames=30), time.time() + 100))
        assert [c.index for c in await link.__anext__()] == [0]  # chunk 0 at once (the first audio)
        await until(lambda: "a" not in rep._running)
        held = [(c.key, c.index) for c in box.items]
        assert held == [("a", i) for i in range(1, len(held) + 1)] and len(held) >= 2  # generated, held
        assert box.items[-1].last and not box.ready()
        rep._work("c-0", Work("generate", "b", _request(frames=9)))
        together = await link.__anext__()  # b's chunk 0 does not wait, and takes a's along, in order
        assert [(c.key, c.index) for c in together] == [*held, ("b", 0)]
        assert (rep.relay.items, rep.relay.chunks) == (2, len(held) + 2)
        await link.aclose()

    asyncio.run(scenario())

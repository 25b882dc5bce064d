"""The LM -> codec relay's pieces without Ray (voxcli/cluster/relay.py, ray_roles.py): the LM replica's
outbox streams every chunk ready at once, in order, to the one live link; a codec replica takes chunks
from its link whichever comes first, the chunks or the front door's `audio` call, and fails the requests
of an LM replica whose link broke with one sentence."""

from __future__ import annotations

import asyncio
import time
from dataclasses import asdict

import numpy as np
import pytest

from voxcli.cluster.relay import CodeOutbox, RelayStats, serve_codes
from voxcli.config import ChunkSchedule
from voxcli.engine.roles import CodeChunk

BOOKS = 16


def _chunk(key: str, index: int, last: bool, frames: int = 3) -> CodeChunk:
    codes = np.zeros((frames, BOOKS), np.int64)
    codes[:, 0] = np.arange(frames * index, frames * (index + 1))  # the sim's PCM: the frame's index
    return CodeChunk(key=key, index=index, start=frames * index, codes=codes,
                     last=last, deadline_epoch=0.0, arrival_epoch=time.time(), ttfa_target_s=0.2,
                     schedule=ChunkSchedule(first=frames, steady=frames), sent_epoch=time.time())


def test_outbox_streams_what_is_ready_in_order_and_a_newer_link_supersedes():
    async def scenario() -> None:
        box, stats = CodeOutbox(), RelayStats()
        box.put(_chunk("a", 0, False))  # before any link: it waits in the outbox
        box.put(_chunk("b", 0, False))
        link = serve_codes(box, stats)
        first = await link.__anext__()
        assert [(c.key, c.index) for c in first] == [("a", 0), ("b", 0)]  # one item, every chunk ready
        box.put(_chunk("a", 1, True))
        box.put(_chunk("b", 1, False))
        box.drop("b")  # b ended on the LM side: its chunk not taken yet goes nowhere
        assert [(c.key, c.index) for c in await link.__anext__()] == [("a", 1)]
        waiting = asyncio.ensure_future(link.__anext__())
        await asyncio.sleep(0)
        newer = serve_codes(box, stats)  # the codec replica restarted and linked again
        box.put(_chunk("c", 0, True))
        assert [c.key for c in await newer.__anext__()] == ["c"]
        with pytest.raises(StopAsyncIteration):
            await waiting  # the older link ended
        assert (stats.items, stats.chunks, stats.code_bytes) == (3, 4, 4 * 3 * BOOKS * 8)
        await newer.aclose()
        assert box.consumer == 0

    asyncio.run(scenario())


def test_outbox_drops_chunks_nobody_pulls(monkeypatch):
    from voxcli.cluster import relay

    box = CodeOutbox()
    box.put(_chunk("a", 0, False))
    monkeypatch.setattr(relay, "STALE_S", 0.0)
    box.put(_chunk("b", 0, False))  # no link for longer than STALE_S: the codec replica is gone
    assert [c.key for c in box.items] == ["b"]


class _NoLink:
    """A link that never delivers (the test hands chunks to `_take` itself)."""

    def __init__(self, lm_name, codec_name, take, lost) -> None:
        self.lm_name, self.alive = lm_name, True


@pytest.fixture
def codec_replica():
    from voxcli.cluster.ray_app import ReplicaSpec
    from voxcli.cluster.ray_roles import CodecReplica

    rep = CodecReplica(asdict(ReplicaSpec(model="qwen3-tts-1.7b", executor="sim", gpu="h100")), 1.0, "c-0")
    rep.link_class = _NoLink
    yield rep
    rep.engine.close()


def _audio(rep, key: str, lm: str = "lm-0") -> list[np.ndarray]:
    async def read() -> list[np.ndarray]:
        return [pcm async for pcm in rep.audio(key, lm)]

    return asyncio.run(read())


def test_codec_replica_takes_chunks_that_come_before_the_audio_call(codec_replica):
    rep = codec_replica
    now = time.time()
    for i in range(3):  # the whole request reached the link before its audio call reached the replica
        rep._take(_chunk("early", i, i == 2), now)
    pcm = _audio(rep, "early")
    assert sum(len(p) for p in pcm) == 9 * 1920
    assert np.array_equal(np.concatenate(pcm)[::1920], np.arange(9, dtype=np.float32))  # PCM = frame index
    assert "early" not in rep._opened and "lm-0" in rep._links
    deadline = time.monotonic() + 10
    while "early" not in rep._gone:  # the engine's host thread tells the replica the request ended
        assert time.monotonic() < deadline
        time.sleep(0.005)
    rep._take(_chunk("early", 3, True), now)  # a late chunk of an ended request is dropped
    assert not rep.engine.holds("early")


def test_a_broken_link_fails_its_lms_requests_with_one_sentence(codec_replica):
    from voxcli.engine.stream import RequestFailed

    rep = codec_replica

    async def scenario() -> list[np.ndarray]:
        got = []
        gen = rep.audio("k", "lm-1")
        rep._take(_chunk("k", 0, False), time.time())
        got.append(await gen.__anext__())
        rep._lost("lm-1", "the LM replica lm-1 failed mid-stream (ActorDiedError: it died)")
        with pytest.raises(RequestFailed, match="the LM replica lm-1 failed mid-stream"):
            async for pcm in gen:
                got.append(pcm)
        return got

    assert len(asyncio.run(scenario())[0]) == 3 * 1920
    deadline = time.monotonic() + 10
    while rep.engine.scheduler.slots.used and time.monotonic() < deadline:
        time.sleep(0.01)
    assert rep.engine.scheduler.slots.used == 0

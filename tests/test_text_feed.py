"""Text that arrives while its request runs (models/text_feed.py), through the engine on the sim's virtual
clock: the request arrives with its first word (TTFA from there), a row waiting for its next word pads
and never stalls its neighbours, a text that stops arriving or a cancel frees the row, a model that reads
whole texts refuses a feed. Words are added between `engine.run(until=t)` calls: the test is the clock."""

from __future__ import annotations

import numpy as np
import pytest
from voxcli.models.base import InputError, SynthesisRequest
from voxcli.models.text_feed import FeedClosed, TextFeed

from voxcli.config import ChunkSchedule, EngineConfig
from voxcli.engine.engine import Engine
from voxcli.engine.stream import RequestFailed
from voxcli.engine.text_pacing import LEAD_S
from voxcli.sim.synthetic import SyntheticProgram

CHUNK = ChunkSchedule(first=1, ramp=(2, 4), steady=8)


def engine(streams_text: bool = True, kv_pages: int = 400) -> Engine:
    prog = SyntheticProgram.for_model("kyutai-tts-1.6b", streams_text=streams_text, pcm_scale=1.0)
    cfg = EngineConfig(executor="sim", gpu="h100", chunk=CHUNK, kv_pages=kv_pages, kv_page_size=16,
                       codec_slots=8, max_running=8)
    return Engine(prog, cfg)


def fed(max_frames: int = 300) -> SynthesisRequest:
    return SynthesisRequest(text="", max_frames=max_frames)


def test_a_feed_joins_fragments_into_words_and_closes_with_its_last_word():
    feed = TextFeed()
    started: list[int] = []
    assert feed.bind(lambda: 0.0, lambda: started.append(1)) is False
    feed.add("Hel")
    assert feed.snapshot() == ([], False) and not started  # "Hel" may still grow
    feed.add("lo wor")
    assert feed.snapshot() == (["Hello"], False) and started == [1]
    feed.add("ld  and")
    feed.close()
    assert feed.snapshot(1) == (["world", "and"], True) and started == [1]
    with pytest.raises(FeedClosed):
        feed.add("more")


def test_the_request_arrives_with_its_first_word_and_speaks_every_word():
    eng = engine()
    feed = TextFeed()
    stream = eng.submit(fed(), text_feed=feed)
    eng.run(until=2.0)  # no word yet: nothing admitted, nothing held
    assert eng.scheduler.idle and eng.scheduler.kv.used == 0 and stream.timeline.first_audio is None
    feed.add("Hello ")
    eng.run(until=2.5)
    tl = stream.timeline
    assert tl.arrival == pytest.approx(2.0) and tl.first_audio is not None
    assert 0 < tl.ttfa < 0.2  # from the first word, not from submit (2 s earlier)
    for t, word in ((3.0, "there "), (4.0, "my friend.")):
        feed.add(word)
        eng.run(until=t + 0.5)
    assert stream.status == "streaming"  # still open: waiting for more text, padding
    # paced to its playback while it waits (engine/text_pacing.py), not padding at the device's speed
    r = eng.scheduler.requests[stream.request_id]
    ahead = r.n_frames * r.frame_s - (eng.now - tl.first_audio)
    assert 0 < ahead <= LEAD_S + 8 * r.frame_s, ahead
    feed.close()
    eng.run()
    pcm = stream.wait(timeout=0)
    assert stream.status == "done" and pcm.size > 0
    assert eng.scheduler.kv.used == 0 and eng.scheduler.slots.free == eng.scheduler.slots.num_slots
    eng.close()


def test_a_waiting_row_does_not_stall_or_change_its_neighbours():
    def neighbours(with_fed: bool) -> tuple[list[np.ndarray], list]:
        eng = engine()
        feed = TextFeed()
        others = [eng.submit(SynthesisRequest(text=f"neighbour {i}", fixed_frames=60 + 7 * i), at=0.05 * i)
                  for i in range(7)]
        if with_fed:
            fed_stream = eng.submit(fed(), text_feed=feed, at=0.0)
            feed.add("one ")
            eng.run(until=0.5)  # the fed row has spoken its word and waits for the next, padding
            feed.add("two")
            feed.close()
        eng.run()
        if with_fed:
            assert fed_stream.wait(timeout=0).size > 0
        out = [s.wait(timeout=0) for s in others]
        timelines = [s.timeline for s in others]
        eng.close()
        return out, timelines

    alone, t_alone = neighbours(False)
    among, t_among = neighbours(True)
    for a, b in zip(alone, among, strict=True):
        np.testing.assert_array_equal(a, b)
    # the row that waited for its word did not hold the batch back: the neighbours start and finish as
    # they do without it (within 5%: its rows make each step a little dearer on the simulated device)
    for a, b in zip(t_alone, t_among, strict=True):
        assert b.status == "done" and b.ttfa <= 0.2 and b.finished <= 1.05 * a.finished


def test_a_text_that_stops_arriving_fails_alone_and_frees_its_row():
    eng = engine()
    feed = TextFeed(idle_limit_s=1.0)
    stream = eng.submit(fed(max_frames=2000), text_feed=feed)
    other = eng.submit(SynthesisRequest(text="still speaking", fixed_frames=40))
    feed.add("Hello ")
    eng.run(until=3.0)
    assert stream.status == "failed" and "no text arrived for" in stream.reason
    assert "end the text" in stream.reason
    with pytest.raises(RequestFailed):
        stream.wait(timeout=0)
    eng.run()
    assert other.wait(timeout=0).size == 40 * 1920
    assert eng.scheduler.kv.used == 0 and eng.scheduler.slots.free == eng.scheduler.slots.num_slots
    eng.close()


def test_cancel_before_and_after_the_first_word_frees_everything():
    eng = engine()
    feed = TextFeed()
    waiting = eng.submit(fed(), text_feed=feed)
    eng.cancel(waiting.request_id)
    assert waiting.status == "cancelled"
    feed.add("late ")  # the cancelled request never arrives
    eng.run()
    assert eng.scheduler.idle

    feed = TextFeed()
    running = eng.submit(fed(), text_feed=feed)
    feed.add("Hello ")
    eng.run(until=0.3)
    assert eng.scheduler.kv.used > 0
    eng.cancel(running.request_id)
    eng.run()
    assert running.status == "cancelled" and eng.scheduler.kv.used == 0
    eng.close()


def test_a_text_ended_with_no_words_fails_in_one_sentence():
    eng = engine()
    feed = TextFeed()
    stream = eng.submit(fed(), text_feed=feed)
    feed.close()
    assert stream.status == "failed" and stream.reason.startswith("the text ended before any words")
    eng.close()


def test_a_model_that_reads_whole_texts_refuses_a_feed():
    eng = engine(streams_text=False)
    with pytest.raises(InputError, match="reads each text whole"):
        eng.submit(fed(), text_feed=TextFeed())
    eng.close()


def _realtime_sim_tts(streams_text: bool):
    """voxcli's Python API over the wall-clock sim (what `vox serve --executor sim` runs)."""
    from voxcli.api import TTS
    from voxcli.engine.admission_check import program_check
    from voxcli.engine.estimates import load_profile
    from voxcli.engine.lanes import lane_layout
    from voxcli.session import EngineOptions, Session, engine_config
    from voxcli.sim.realtime_executor import RealtimeSimExecutor

    config = engine_config(EngineOptions(model="kyutai-tts-1.6b", executor="sim", gpu="h100"))
    prog = SyntheticProgram.for_model("kyutai-tts-1.6b", streams_text=streams_text)
    profile = load_profile(config)
    executor = RealtimeSimExecutor(prog, profile, lane_layout(config))
    eng = Engine(prog, config, executor=executor, profile=profile)
    return TTS(Session(eng, prog.spec, "kyutai-sim", check=program_check(prog))), eng


@pytest.mark.parametrize("streams_text", [True, False])
def test_the_python_api_takes_a_text_still_arriving(streams_text):
    """An iterable of fragments: one fed request for a model that streams text, one request per
    sentence (as `vox say -` cuts a pipe) for any other."""
    tts, eng = _realtime_sim_tts(streams_text)
    fragments = ["The first sen", "tence is here and long enough. ", "Then the second ", "one ends."]
    with tts:
        audio = tts.say(iter(fragments))
        assert audio.samples.size > 0
        assert [t.status for t in eng.timelines] == ["done"] * (1 if streams_text else 2)
        with pytest.raises(ValueError, match="iterable of strings"):
            tts.say(42)


def test_the_sim_of_a_family_that_reads_text_as_it_arrives_takes_feeds():
    """The family's SimSpec says so (Kyutai), so `vox serve --executor sim` feeds its WebSocket words."""
    assert SyntheticProgram.for_model("kyutai-tts-1.6b").spec.streams_text
    assert not SyntheticProgram.for_model("qwen3-tts-1.7b").spec.streams_text

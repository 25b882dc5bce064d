"""The open-loop client: who sends what, when, and what it saw come back.

Arrivals follow a Poisson process on an ABSOLUTE schedule: every send time is drawn up front from a
seeded RNG, so a slow server cannot lower the offered load (a closed-loop client would wait). The order
of utterances is drawn from its own seeded shuffle. A warm-up burst precedes each sweep and is not
counted.

A `Target` is anything that can play a schedule and report per-request timestamps:
- `SimTarget`: the in-process engine on the `sim` executor, in virtual time (submit(at=t), run()).
- `EngineTarget`: the in-process engine on a real-clock executor (cpu, cuda); driven by
  `RealtimeTarget.play`, which sends each request at its absolute time on its own thread and
  timestamps every audio piece as the client receives it.
An HTTP endpoint later needs only another `RealtimeTarget.stream` (POST, iterate the response body).
"""

from __future__ import annotations

import random
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from voxcli.bench.metrics import DONE, RequestRecord
from voxcli.bench.workloads import Utterance, estimate_frames, seeded_order

CLIP_RATE = 16000  # an audio-in arrival's clip: silence at LibriSpeech's rate (bench/audio_in.py)


@dataclass(frozen=True)
class Arrival:
    index: int
    at: float  # seconds after the start of this schedule
    utterance: Utterance
    frames: int  # fixed output length (random weights / sim cannot decide when to stop)
    clip_s: float | None = None  # an audio-in request's clip seconds (bench/audio_in.py); None: TTS


def poisson_times(rate: float, duration_s: float, seed: int) -> list[float]:
    """Send times in [0, duration_s) of a Poisson process with `rate` per second, fixed by `seed`."""
    if rate <= 0:
        raise ValueError(f"rate must be > 0 requests/s, got {rate}")
    if duration_s <= 0:
        raise ValueError(f"duration must be > 0 s, got {duration_s}")
    rng = random.Random(seed)
    times: list[float] = []
    t = rng.expovariate(rate)
    while t < duration_s:
        times.append(t)
        t += rng.expovariate(rate)
    return times


def schedule(rate: float, duration_s: float, seed: int, utterances: Sequence[Utterance],
             frame_rate: float | None = None, frames_scale: float = 1.0,
             max_frames: int | None = None) -> list[Arrival]:
    """The whole arrival schedule of one rate: Poisson times and a seeded utterance order (cycled)."""
    if not utterances:
        raise ValueError("the workload has no utterances")
    order = seeded_order(list(utterances), seed)
    out = []
    for i, t in enumerate(poisson_times(rate, duration_s, seed)):
        u = order[i % len(order)]
        out.append(Arrival(i, t, u, utterance_frames(u, frame_rate, frames_scale, max_frames)))
    return out


def burst(n: int, utterances: Sequence[Utterance], seed: int, frame_rate: float | None = None,
          frames_scale: float = 1.0, max_frames: int | None = None) -> list[Arrival]:
    """`n` requests all sent at t=0 (the uncounted warm-up)."""
    order = seeded_order(list(utterances), seed + 7919)
    picked = [order[i % len(order)] for i in range(n)]
    return [Arrival(i, 0.0, u, utterance_frames(u, frame_rate, frames_scale, max_frames))
            for i, u in enumerate(picked)]


def utterance_frames(u: Utterance, frame_rate: float | None, scale: float, cap: int | None) -> int:
    """The frames an arrival of `u` is given: its text's estimate scaled by `scale`, at least 1, at most
    `cap` (when set). The sweep's arrivals and the capacity bounds (sim/config_bound.py) share it."""
    n = max(1, round(estimate_frames(u.text, frame_rate) * scale))
    return min(n, cap) if cap else n


class Target(Protocol):
    """What the sweep drives. `play` sends every arrival at its time and returns one record each."""

    name: str

    def play(self, arrivals: Sequence[Arrival], timeout_s: float) -> list[RequestRecord]: ...

    def close(self) -> None: ...


def classify_error(error: BaseException) -> str:
    """Map an engine/transport error to a record status (rejected requests are counted apart)."""
    name = type(error).__name__.lower()
    if "reject" in name:
        return "rejected"
    if "cancel" in name:
        return "cancelled"
    if isinstance(error, TimeoutError):
        return "timeout"
    return "failed"


class RealtimeTarget(ABC):
    """A target on a real clock: `stream(arrival)` sends one request and yields the audio seconds of
    each piece as it arrives; `play` runs the absolute schedule with one thread per request."""

    name = "realtime"

    @abstractmethod
    def stream(self, arrival: Arrival) -> Iterator[float]:
        """Send the request; yield audio seconds per received piece; raise on rejection/failure."""

    def close(self) -> None:  # noqa: B027 - optional
        pass

    def play(self, arrivals: Sequence[Arrival], timeout_s: float) -> list[RequestRecord]:
        clock = time.perf_counter
        records = [RequestRecord(sent=a.at, utterance_id=a.utterance.id) for a in arrivals]
        threads: dict[int, threading.Thread] = {}
        t0 = clock() + 0.05  # a little head room so the first send is on time

        def run_one(i: int) -> None:
            rec = records[i]
            rec.sent = clock() - t0
            try:
                for audio_s in self.stream(arrivals[i]):
                    rec.deliveries.append((clock() - t0, audio_s))
                rec.status = DONE
            except BaseException as e:  # noqa: BLE001 - every failure is a miss with its reason
                rec.status, rec.reason = classify_error(e), f"{type(e).__name__}: {e}"
            rec.finished = clock() - t0

        for i, a in enumerate(sorted(range(len(arrivals)), key=lambda k: arrivals[k].at)):
            delay = t0 + arrivals[a].at - clock()
            if delay > 0:
                time.sleep(delay)  # absolute schedule: late sends do not push later ones back
            th = threading.Thread(target=run_one, args=(a,), name=f"bench-req-{i}", daemon=True)
            th.start()
            threads[a] = th
        deadline = clock() + timeout_s
        for th in threads.values():
            th.join(max(0.0, deadline - clock()))
        for i, th in threads.items():
            if th.is_alive():
                records[i].status, records[i].reason = "timeout", f"no end within {timeout_s:.0f} s"
        return records


def synthesis_request(arrival: Arrival, seed: int, voice: str | None = None) -> Any:
    """The engine request of `arrival` (its text, fixed frames, `seed` + its index, id bench-<index>); an
    audio-in arrival: a silent clip of its seconds (the sim charges the length, bench/audio_in.py)."""
    from voxcli.models.base import SynthesisRequest

    if arrival.clip_s is not None:
        import numpy as np

        return SynthesisRequest(text="", input_audio=np.zeros(round(arrival.clip_s * CLIP_RATE), np.float32),
                                input_sample_rate=CLIP_RATE, seed=seed + arrival.index,
                                request_id=f"bench-{arrival.index}")
    return SynthesisRequest(text=arrival.utterance.text, voice=voice, fixed_frames=arrival.frames,
                            seed=seed + arrival.index, request_id=f"bench-{arrival.index}")


class EngineTarget(RealtimeTarget):
    """The in-process engine on a real-clock executor (cpu, cuda)."""

    def __init__(self, engine: Any, name: str, seed: int = 0, voice: str | None = None) -> None:
        self.engine, self.name, self.seed, self.voice = engine, name, seed, voice

    def stream(self, arrival: Arrival) -> Iterator[float]:
        stream = self.engine.submit(synthesis_request(arrival, self.seed, self.voice))
        stream.keep_audio(False)  # measured as it arrives; a long run must not hold every waveform
        for chunk in stream:
            yield len(chunk.pcm) / chunk.sample_rate

    def close(self) -> None:
        self.engine.close()


class SimTarget:
    """The in-process engine on the `sim` executor: the whole schedule is submitted in virtual time and
    the engine runs until every request ended; timestamps come from each request's timeline. One engine
    serves all rates of a sweep back to back (as against one server); `make_engine` builds it."""

    def __init__(self, make_engine: Callable[[], Any], name: str, seed: int = 0) -> None:
        self.make_engine, self.name, self.seed = make_engine, name, seed
        self.engine: Any = None
        self.counts: dict[str, int] = {}

    def play(self, arrivals: Sequence[Arrival], timeout_s: float) -> list[RequestRecord]:
        if self.engine is None:
            self.engine = self.make_engine()
        start = self.engine.now + 0.001
        streams = []
        for a in arrivals:
            stream = self.engine.submit(synthesis_request(a, self.seed), at=start + a.at)
            stream.drop_audio()  # the records come from the timelines: keep metrics, not PCM
            streams.append(stream)
        before = self.engine.load().late_chunks
        self.engine.run(until=None)
        # the late-chunk path's decisions during this play (`Engine.load().late_chunks`)
        self.counts = {k: v - before.get(k, 0) for k, v in self.engine.load().late_chunks.items()}
        records = [record_from_timeline(s.timeline, start, audio_in=a.clip_s is not None)
                   for s, a in zip(streams, arrivals, strict=True)]
        self.engine.timelines.clear()  # the engine's own list of every timeline: this rate is measured
        return records

    def close(self) -> None:
        if self.engine is not None:
            self.engine.close()
            self.engine = None


def record_from_timeline(tl: Any, origin: float, audio_in: bool = False) -> RequestRecord:
    """A client record from an engine Timeline (arrival, chunk deliveries, finish, status, reason; an
    audio-in request: its time to first token and tokens per second, Timeline.ttft / tokens_per_s).
    In-process targets have no network, so the client sees exactly the engine's delivery times."""
    status = str(getattr(tl.status, "value", tl.status))
    status = DONE if status in ("done", "finished") else status
    deliveries = [(c.t_delivered - origin, c.audio_s) for c in sorted(tl.chunks, key=lambda c: c.index)]
    finished = (tl.finished - origin) if tl.finished is not None else None
    return RequestRecord(sent=tl.arrival - origin, status=status, deliveries=deliveries, finished=finished,
                         reason=tl.reason or "", audio_in=audio_in, ttft=tl.ttft if audio_in else None,
                         tokens_per_s=tl.tokens_per_s if audio_in else None)

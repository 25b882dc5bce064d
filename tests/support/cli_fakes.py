"""Test doubles for the CLI tests: an engine that streams sine-tone chunks from a thread (so the CLI's
streaming, ordering, cancellation and error paths can be checked without a model), and a fake speaker."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

import numpy as np
from voxcli.models.base import InputError, ModelSpec, SynthesisRequest

from voxcli.config import ChunkSchedule

SR = 24000
SPEC = ModelSpec(name="fake", sample_rate=SR, frame_rate=12.5, samples_per_frame=1920, codebooks=16,
                 chunk=ChunkSchedule(), max_context=4096, voices=("alice", "bob"), languages=("english",),
                 modes=("custom_voice",))


@dataclass
class FakeChunk:
    pcm: np.ndarray
    sample_rate: int
    index: int
    last: bool
    produced_at: float


class FakeStream:
    def __init__(self, chunks: int, chunk_samples: int, delay_s: float, fail_at: int | None) -> None:
        self.cancelled = False
        self.last_time = float("inf")  # when the last chunk was produced
        self._chunks, self._n, self._delay, self._fail_at = chunks, chunk_samples, delay_s, fail_at

    def __iter__(self):
        for i in range(self._chunks):
            if self.cancelled:
                return
            time.sleep(self._delay)
            if self._fail_at == i:
                raise RuntimeError("codec exploded (injected)")
            t = np.arange(i * self._n, (i + 1) * self._n) / SR
            if i == self._chunks - 1:
                self.last_time = time.monotonic()
            yield FakeChunk((0.3 * np.sin(2 * np.pi * 220 * t)).astype(np.float32), SR, i,
                            i == self._chunks - 1, time.monotonic())

    def cancel(self) -> None:
        self.cancelled = True


@dataclass
class FakeEngine:
    """Text `fail-input` -> InputError at submit; `fail-stream` -> error on the 2nd chunk; otherwise
    one chunk per 10 characters (at least 2) of 0.1 s audio each."""

    delay_s: float = 0.002
    submitted: list[SynthesisRequest] = field(default_factory=list)
    streams: list[FakeStream] = field(default_factory=list)
    closed: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)
    # voxcli.speech_engine.SpeechEngine: no model program here, one request per sentence
    program: None = None
    takes_text_feed: bool = False

    def submit(self, request: SynthesisRequest, continues: FakeStream | None = None) -> FakeStream:
        if "fail-input" in request.text:
            raise InputError("this text asked to be refused")
        with self.lock:
            self.submitted.append(request)
            stream = FakeStream(max(2, len(request.text) // 10), SR // 10, self.delay_s,
                                1 if "fail-stream" in request.text else None)
            self.streams.append(stream)
        return stream

    def close(self) -> None:
        self.closed = True


class FakeDevice:
    """Records every write with its time; never blocks."""

    instances: list[FakeDevice] = []

    def __init__(self, sample_rate: int) -> None:
        self.sample_rate = sample_rate
        self.writes: list[tuple[float, int]] = []
        self.started = self.closed = False
        FakeDevice.instances.append(self)

    def start(self) -> None:
        self.started = True

    def write(self, pcm: np.ndarray) -> None:
        self.writes.append((time.monotonic(), int(pcm.size)))

    def close(self) -> None:
        self.closed = True

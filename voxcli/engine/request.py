"""A request's life inside the engine: its state, its frames, its chunks and its timeline.

    queued -> prefill -> decode -> draining -> done
                 \\________\\_________\\____-> failed | cancelled      (queued -> rejected)

`queued`: waiting for admission (KV pages, a codec slot, a running row). `prefill`: its prompt is on
the LM lane. `decode`: the LM adds one frame per step. `draining`: the LM is finished, chunks are still
going through the codec. The chunk schedule cuts frames into chunks; a chunk is *ready* once all of its
frames exist (or the LM has finished and it is the short tail).

Deadlines: the playback deadline of chunk c >= 1 is `t_first_audio + (start_frame(c) - h) * frame_seconds`
(the audio delivered before c runs out then), h = the codec's hold-back in frames
(`ModelSpec.codec_lookahead_frames`: a non-causal decoder keeps a chunk's last h frames of audio until the
next chunk's frames arrive; 0 for a causal codec); for a continuation (a later sentence of a user request)
playback starts no earlier than the end of the earlier sentences' audio, `arrival + ttfa_target`. The
first chunk has no playback deadline; for ordering we give it `arrival + ttfa_target` (a continuation's
is real: the end of the audio already delivered).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from voxcli.models.base import ChunkSchedule, Prompt, Row, SynthesisRequest

if TYPE_CHECKING:
    from voxcli.engine.frame_log import Epoch


class RequestState(enum.Enum):
    QUEUED = "queued"
    PREFILL = "prefill"
    DECODE = "decode"
    DRAINING = "draining"
    DONE = "done"
    FAILED = "failed"
    CANCELLED = "cancelled"
    REJECTED = "rejected"

    @property
    def terminal(self) -> bool:
        return self in _TERMINAL


_TERMINAL = frozenset({RequestState.DONE, RequestState.FAILED, RequestState.CANCELLED, RequestState.REJECTED})


@dataclass(slots=True)
class ChunkRecord:
    """One delivered chunk, for metrics: when it was delivered and how much audio it carried."""

    index: int
    start_frame: int
    frames: int
    t_ready: float
    t_dispatched: float
    t_delivered: float
    audio_s: float
    lane: str
    deadline: float | None  # playback deadline (None for the first chunk)


@dataclass
class Timeline:
    """Everything the metrics need about one request, as plain data (times on the engine clock)."""

    request_id: int
    name: str | None = None
    arrival: float = 0.0
    admitted: float | None = None  # prefill launched
    first_frame: float | None = None
    first_audio: float | None = None  # first chunk delivered
    finished: float | None = None
    status: str = "queued"
    reason: str | None = None
    frames: int = 0
    chunks: list[ChunkRecord] = field(default_factory=list)
    # a text answer (a unified LM's text segment): when its first and last tokens were sampled, how many
    first_token: float | None = None
    last_token: float | None = None
    text_tokens: int = 0

    @property
    def ttfa(self) -> float | None:
        return None if self.first_audio is None else self.first_audio - self.arrival

    @property
    def ttft(self) -> float | None:
        """Time to first token: arrival to the step that sampled the first text token."""
        return None if self.first_token is None else self.first_token - self.arrival

    @property
    def tokens_per_s(self) -> float | None:
        """Text tokens per second after the first: (tokens - 1) / (last token - first token)."""
        if self.first_token is None or self.last_token is None or self.last_token <= self.first_token:
            return None
        return (self.text_tokens - 1) / (self.last_token - self.first_token)

    @property
    def audio_s(self) -> float:
        return sum(c.audio_s for c in self.chunks)


@dataclass(slots=True)
class Chunk:
    """A dispatchable chunk: frames [start, end) of its request."""

    request: Request
    index: int
    start: int
    end: int
    last: bool
    t_ready: float
    deadline: float  # playback deadline; for the first chunk arrival + ttfa target (ordering only)
    t_dispatched: float = -1.0
    lane: str = ""

    @property
    def first(self) -> bool:
        return self.index == 0

    @property
    def frames(self) -> int:
        return self.end - self.start


class Request:
    """Engine-side record of one synthesis request. Owned by the scheduler; mutated only on the host
    thread. The LM slack key is computed on demand by the LM batcher (`LmBatcher._key`, lm_batcher.py)."""

    __slots__ = ("id", "name", "synthesis", "prompt", "row", "state", "arrival", "timeline", "frames",
                 "schedule", "frame_s", "ttfa_target", "next_chunk", "next_start",
                 "gen_chunk", "gen_start", "gen_end", "chunk_inflight", "lm_inflight", "t_first_audio",
                 "pages", "slot", "reason", "user", "need_pages", "frame_cap", "next_end", "retry_after",
                 "next_event", "continuation", "log_epoch", "log_from", "due_step", "join_seq",
                 "state_bytes", "next_ready", "hold_s", "text_feed")

    def __init__(self, request_id: int, prompt: Prompt, arrival: float, schedule: ChunkSchedule,
                 frame_s: float, ttfa_target: float, synthesis: SynthesisRequest | None = None,
                 user: Any = None, hold_frames: float = 0.0) -> None:
        self.id = request_id
        self.synthesis = synthesis
        self.name = synthesis.request_id if synthesis is not None else None
        self.prompt = prompt
        self.row: Row | None = None
        self.state = RequestState.QUEUED
        self.arrival = arrival
        self.timeline = Timeline(request_id=request_id, name=self.name, arrival=arrival)
        self.frames: list[Any] = []  # frames settled so far; n_frames also counts those still logged
        self.schedule = schedule
        self.frame_s = frame_s
        self.hold_s = hold_frames * frame_s  # the codec's hold-back in seconds of audio (see above)
        self.ttfa_target = ttfa_target
        # next chunk to hand to the codec (strict order): its index and first frame
        self.next_chunk = 0
        self.next_start = 0
        self.next_end = schedule.size(0)  # the next chunk is complete once n_frames reaches this
        # chunk the LM is currently generating frames for (slack is measured on it; see gen_span)
        self.gen_chunk = 0
        self.gen_start = 0
        self.gen_end = schedule.size(0)
        self.chunk_inflight = False
        self.lm_inflight = False
        self.t_first_audio: float | None = None
        self.pages: list[int] = []
        self.slot = -1
        self.reason: str | None = None
        self.user = user  # engine-side handle (the AudioStream); opaque here
        self.need_pages = 0  # KV pages reserved at admission
        self.state_bytes = 0  # codec state (bytes) reserved with its slot (Prompt.codec_state_*)
        self.frame_cap = prompt.max_frames  # the LM is stopped here if the model has not stopped itself
        self.retry_after: float | None = None  # a refusal's estimate of when a retry could be served
        self.next_event = 0  # frame count at which a decode step has more to do than store the frame
        # A later sentence of a user request already admitted (Engine.submit(continues=...)): never
        # refused for load, queued ahead of new requests, its TTFA target the end of the audio delivered.
        self.continuation = False
        # the LM batcher's decode hot path (frame_log.py, LmBatcher._schedule_due): the log epoch holding
        # this row's frames after step log_from (None: every frame is in `frames`), the decode step at
        # which it next has more to do than store a frame, and its place in admission order
        self.log_epoch: Epoch | None = None
        self.log_from = 0
        self.due_step = -1
        self.join_seq = -1
        # the next chunk, made when its bounds became known (its previous chunk was delivered) and
        # pended by the decode step whose frame completes it (LmBatcher._due_frames sets t_ready)
        self.next_ready: Chunk | None = None
        # a text still arriving (models/text_feed.py; Engine.submit(text_feed=...)): while it is open the
        # row is paced to its playback (engine/text_pacing.py); opaque otherwise
        self.text_feed: Any = None
        self.refresh_event()

    @property
    def n_frames(self) -> int:
        e = self.log_epoch
        if e is None:
            return len(self.frames)
        return len(self.frames) + e.log.steps - self.log_from

    # --- deadlines ---------------------------------------------------------------------------
    def deadline_of(self, start_frame: int) -> float:
        """Playback deadline of the chunk starting at `start_frame` (see module docstring)."""
        if start_frame == 0:
            return self.arrival + self.ttfa_target
        base = self.t_first_audio if self.t_first_audio is not None else self.arrival + self.ttfa_target
        if self.continuation:  # its audio plays once the earlier sentences' audio has ended, not before
            base = max(base, self.arrival + self.ttfa_target)
        return base + self.audio_start_s(start_frame)

    def audio_start_s(self, start_frame: int) -> float:
        """Where the audio of the chunk starting at `start_frame` begins in the request's audio: the
        chunks before it released all their frames but the last `hold_s` of audio."""
        return max(0.0, start_frame * self.frame_s - self.hold_s)

    def released_audio_s(self, ch: Chunk) -> float:
        """Seconds of audio the codec releases for chunk `ch`: its frames, less the hold-back it keeps
        back (`hold_s`) unless it is the last chunk, plus the hold-back the chunk before it kept."""
        end = ch.end * self.frame_s if ch.last else self.audio_start_s(ch.end)
        return max(0.0, end - self.audio_start_s(ch.start))

    # --- chunks: the one place a Chunk is built and the one place the next chunk moves on -------
    def chunk_to(self, end: int, last: bool, now: float) -> Chunk:
        """The next chunk to hand to the codec, frames [next_start, end), ready at `now`."""
        start = self.next_start
        return Chunk(self, self.next_chunk, start, end, last, now, self.deadline_of(start))

    def drain(self) -> None:
        """The LM finished (done, or at its frame cap): the rest of its chunks drain through the codec."""
        self.state = RequestState.DRAINING
        self.timeline.status = RequestState.DRAINING.value
        self.timeline.frames = self.n_frames

    def chunk_left(self, ch: Chunk) -> int:
        """Chunk `ch` (the next one) left the engine, delivered or handed off: the one after it is next.
        Returns its end frame (`next_end`)."""
        self.next_chunk += 1
        self.next_start = ch.end
        self.next_end = next_end = ch.end + self.schedule.size(self.next_chunk)
        return next_end

    def set_schedule(self, schedule: ChunkSchedule) -> None:
        """Replace the chunk schedule (admission only: before the first frame)."""
        if self.n_frames:
            raise RuntimeError(f"request {self.id}: the chunk schedule is fixed once frames exist")
        self.schedule = schedule
        self.gen_end = self.next_end = schedule.size(0)
        self.refresh_event()

    # --- frames ------------------------------------------------------------------------------
    def add_frame(self, frame: Any) -> None:
        self.frames.append(frame)
        self.refresh_event()

    def gen_span(self) -> tuple[int, int]:
        """[start, end) of the chunk the LM is generating frames for: the one holding frame n_frames.
        Kept up to date lazily, here (no decode step has to touch a row to move it on)."""
        n = self.n_frames
        while n >= self.gen_end:
            self.gen_chunk += 1
            self.gen_start = self.gen_end
            self.gen_end += self.schedule.size(self.gen_chunk)
        return self.gen_start, self.gen_end

    def slack_key(self, step_s: float, codec_s: float) -> float:
        """LM slack key (slack = key - now): the deadline of the chunk under generation, less `step_s`
        per frame it still needs and `codec_s` (a one-chunk codec call). Read for every running row when
        admission weighs a prefill, so n_frames, gen_span and deadline_of are inlined here."""
        e = self.log_epoch
        n = len(self.frames) if e is None else len(self.frames) + e.log.steps - self.log_from
        if n >= self.gen_end:
            self.gen_span()
        start = self.gen_start
        if start == 0:
            deadline = self.arrival + self.ttfa_target
        else:
            first = self.t_first_audio
            base = first if first is not None else self.arrival + self.ttfa_target
            if self.continuation:
                base = max(base, self.arrival + self.ttfa_target)
            deadline = base + max(0.0, start * self.frame_s - self.hold_s)
        return deadline - (self.gen_end - n) * step_s - codec_s

    def refresh_event(self) -> None:
        """Recompute `next_event` after next_end, frame_cap or n_frames changed: the LM finishes, or
        first completes the next chunk to hand to the codec (past that frame the chunk is waiting or in
        flight, and the codec's completion advances it)."""
        next_end = self.next_end if self.next_end > self.n_frames else self.frame_cap
        self.next_event = min(next_end, self.frame_cap)

    def ready_chunk_bounds(self) -> tuple[int, int, bool] | None:
        """(start, end, last) of the next chunk if it is ready to decode, else None."""
        start = self.next_start
        end = start + self.schedule.size(self.next_chunk)
        lm_done = self.state is RequestState.DRAINING
        if self.n_frames >= end:
            return start, end, lm_done and self.n_frames == end
        if lm_done:
            # the tail: shorter than its schedule size; may be empty when the previous chunk ended
            # exactly at the last frame but was sent before the LM said it was done (flush only)
            if self.n_frames > start or self.next_chunk > 0:
                return start, self.n_frames, True
        return None


def rows_of(reqs: Iterable[Request]) -> int:
    """Rows (sequences per forward pass) of a set of requests: a CFG pair counts 2."""
    return sum(r.prompt.width for r in reqs)

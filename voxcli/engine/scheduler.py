"""The scheduler: a pure policy object. No threads, no sleeping, no clock of its own.

The engine drives it with times from its executor's clock:

    add(request, now)            a prepared request arrives (queued, or rejected with a reason)
    cancel(request_id, now)      the user gives up on a request
    decide(now, free_lanes)      -> list[Work]: what each free lane runs next
    complete(completion)         a batch finished (or failed): frames, chunks, deliveries
    next_timer(now)              the earliest time a waiting decision could change without a completion

Errors: a completion with an error fails every request of its batch (the executors have already re-run
the batch in parts to find the rows responsible, engine/isolation.py, so an error here is not a row's).
A result may hold an exception object in place of one row's result (StepOutput or PCM), put there by
isolation or by the program: then only that request fails and the rest of the batch goes on.

Every method returns what happened as events (engine/events.py: `Delivered`, `Ended`, `Released`,
`HandedOff`) so the engine can feed its audio streams; the scheduler never calls the model or the user.
Same inputs at the same times give the same decisions: all orderings use stable keys (deadline, request
id), never dict order of floats or object identity.

This file is the façade: intake (`add`), the decision entry point, timers and completion dispatch. The
mechanism lives in parts, one job each, joined into this class over one shared state
(scheduler_state.py):

    lm_lane.py          the next LM batch: a prefill from the queue's head, or a decode step
    lm_completion.py    an LM batch's results, with the decode hot path (frame log, rows due by step)
    codec_lanes.py      the codec batches: urgent lane, background lane with slack batching, timers
    chunk_flow.py       frames into chunks, one chunk in flight per request, deliveries
    endings.py          terminal states and giving back pages and slots
    remote_role.py      role codec: chunks whose LM runs in another engine
    pending.py          the dispatchable chunks, ordered (and the view admission reads)
    sentences.py        a later sentence of a user request (continuations)

The decisions are the policies' (objects picked by name from registries, never by comparing names
here): lane_policies.py says which lane runs what (full, lanes, sync2, sync), admission_policies.py
when a request may start and whether it is taken (prefill-first, deadline, ttfa-gate). A request's
next chunk becomes dispatchable only after its previous chunk has been delivered.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from voxcli.engine import sentences, text_pacing
from voxcli.engine.codec_lanes import CodecLanes
from voxcli.engine.events import Delivered, Ended, Event, HandedOff, Released
from voxcli.engine.executors.base import Completion, Work
from voxcli.engine.lm_completion import LmCompletion
from voxcli.engine.lm_lane import LmLane
from voxcli.engine.remote_role import RemoteRole
from voxcli.engine.request import Request
from voxcli.engine.scheduler_state import S
from voxcli.models.base import Prompt, SynthesisRequest

__all__ = ["Delivered", "Ended", "Event", "HandedOff", "Released", "Scheduler"]


class Scheduler(LmLane, LmCompletion, CodecLanes, RemoteRole):
    # ------------------------------------------------------------------ requests in
    def new_request(self, request_id: int, prompt: Prompt, arrival: float,
                    synthesis: SynthesisRequest | None = None, user: Any = None) -> Request:
        schedule = self.config.chunk_or(self.spec.chunk)
        r = Request(request_id, prompt, arrival, schedule, self.frame_s, self.config.ttfa_target_s,
                    synthesis, user, self.spec.codec_lookahead_frames)
        r.frame_cap = min(prompt.max_frames, self.config.max_frames)
        r.state_bytes = prompt.codec_state_base_bytes + prompt.codec_state_bytes_per_frame * r.frame_cap
        r.refresh_event()
        return r

    def add(self, r: Request, now: float) -> list[Event]:
        if r.id in self.requests:
            raise ValueError(f"request id {r.id} is already in the engine")
        if not r.need_pages:  # Engine.submit planned it off the loop; a direct caller (tests) did not
            r.need_pages = self.kv.pages_for(self.kv_tokens(r.prompt))
        width = r.prompt.width
        cap = min(self.config.max_running, self.max_decode, self.config.max_prefill_batch)
        if width > cap:
            return self._end(r, S.REJECTED, now,
                             f"the request runs {width} sequences per step (classifier-free guidance) but "
                             f"the engine batches at most {cap} rows (max_running, max_prefill_batch and "
                             f"decode_buckets); raise them or lower the guidance scale to 1")
        if r.need_pages > self.kv.num_pages:
            return self._end(r, S.REJECTED, now,
                             f"the request needs {r.need_pages} KV pages of {self.kv.page_size} positions "
                             f"but the pool has only {self.kv.num_pages}; shorten the text, lower max_frames "
                             f"or raise kv_pages")
        if self.slots.never_fits(r.state_bytes):
            return self._end(r, S.REJECTED, now,
                             f"the request's codec state needs {r.state_bytes / 1e9:.2f} GB at its cap of "
                             f"{r.frame_cap} frames but the memory plan holds "
                             f"{self.slots.state_bytes / 1e9:.2f} GB for all requests; shorten the text, "
                             "lower max_frames or free memory")
        if r.continuation:  # admitted with its user request's first sentence: never refused for load
            self.requests[r.id] = r
            sentences.queue_continuation(self.waiting, r)
            return []
        refusal = self.admission.screen(self, r, now)
        if refusal is not None:
            return self._end(r, S.REJECTED, now, refusal)
        if len(self.waiting) >= self.config.max_queue:
            return self._end(r, S.REJECTED, now,
                             f"the queue is full ({self.config.max_queue} requests waiting); retry later or "
                             f"raise max_queue")
        self.requests[r.id] = r
        self.waiting.append(r)
        if r.text_feed is not None:
            self.fed[r.id] = r
        return []

    def continue_after(self, r: Request, playback_end: float) -> None:
        """Mark `r` (not yet added) as the next sentence of a user request already admitted whose audio
        delivered so far plays until `playback_end` (engine/sentences.py)."""
        sentences.continue_after(r, playback_end)

    @property
    def idle(self) -> bool:
        return not self.requests

    # ------------------------------------------------------------------ decisions
    def decide(self, now: float, free_lanes: Iterable[str] | None = None) -> list[Work]:
        busy = self.busy  # (keys: the layout's lanes; a lane not among them is never free)
        if free_lanes is None:
            free = {lane for lane in self.layout.lanes if not busy[lane]}
        else:  # the layout's idle lanes among those given, in one pass
            free = {lane for lane in free_lanes if not busy.get(lane, True)}
        works: list[Work] = []
        if self.remote_lm and self.waiting:
            self._admit_remote(now)
        self.lane_policy.decide(self, free, len(self.layout.lanes), now, works)
        for w in works:
            w.decided_at = now
        return works

    def launch(self, works: list[Work], work: Work | None) -> None:
        """Take a batch the lane policy asked for (None: there was nothing to run): its lane is busy."""
        if work is not None:
            self.busy[work.lane] = True
            works.append(work)

    def next_timer(self, now: float) -> float | None:
        """Earliest future time at which `decide` could act without a completion or arrival."""
        times = self.codec_timers(now)
        if self.defer_since is not None:
            times.append(self.defer_since + self.config.max_defer_s)
        if self.fed:  # rows whose text is open, sitting out steps until their playback catches up
            times += text_pacing.wake_times(self, now)
        future = [t for t in times if t > now]
        return min(future) if future else None

    # ------------------------------------------------------------------ completions
    def complete(self, c: Completion) -> list[Event]:
        work = c.work
        self.busy[work.lane] = False
        self.admission.observe(self, c)
        if work.stage == "codec":
            if work.lane == "background" and self.config.adaptive_batching:
                self._adapt_background(c)
            return self._complete_codec(c)
        return self._complete_lm(c)

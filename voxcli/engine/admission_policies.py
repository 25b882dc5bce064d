"""Admission policies: when a request may start (its prefill), and whether it is taken at all.

Picked by name from `ADMISSION_POLICIES` (config `admission`; config.py validates the name against it).
The scheduler asks the policy object, never its name, so a policy is changed or added here alone:

  prefill-first  a prefill batch from the head of the queue whenever pages, a codec slot and a running
                 row are free for each request; decode steps run the rows in admission order.
  deadline       the prefill is deferred while the smallest running slack is below its estimated
                 duration, never `max_defer_s` or more in a row; a decode step capped at the largest
                 bucket takes the rows least slack first.
  ttfa-gate      the LM lane as `deadline` (a deferral never costs the head request its own TTFA), and
                 a refusal at `add` of what would miss its TTFA target (engine/admission.py's TtfaGate).

Hooks the scheduler calls on every policy (no-ops unless a policy needs them): `screen` at `add`,
`may_defer` before a deferral, `observe` per completed batch, `first_audio` per first chunk delivered,
`forget` per request ended.
"""

from __future__ import annotations

from typing import ClassVar

from voxcli.engine.admission import SchedulerView, TtfaGate, urgent_schedule
from voxcli.engine.executors.base import Completion
from voxcli.engine.request import Request


class AdmissionPolicy:
    name: ClassVar[str]
    deadline_aware: ClassVar[bool] = False  # defer prefills by running slack, decode least slack first
    gate: TtfaGate | None = None  # the TTFA predictor, for a policy that refuses by it

    def screen(self, sched: SchedulerView, r: Request, now: float) -> str | None:
        """At `add` (never for a continuation): the reason to refuse `r` for load, or None to take it
        (the policy may set r.retry_after, or reshape its chunk schedule before any frame exists)."""
        return None

    def may_defer(self, sched: SchedulerView, head: Request, prefill_s: float, now: float) -> bool:
        """May the head prefill (estimated `prefill_s`) wait for running rows short of slack?"""
        return True

    def observe(self, sched: SchedulerView, c: Completion) -> None:
        """A batch completed."""

    def first_audio(self, r: Request, now: float) -> None:
        """An admitted request got its first audio."""

    def forget(self, r: Request) -> None:
        """A request ended."""


class PrefillFirst(AdmissionPolicy):
    name = "prefill-first"


class Deadline(AdmissionPolicy):
    name = "deadline"
    deadline_aware = True


class TtfaGated(AdmissionPolicy):
    name = "ttfa-gate"
    deadline_aware = True

    def __init__(self) -> None:
        self.gate = TtfaGate()

    def screen(self, sched: SchedulerView, r: Request, now: float) -> str | None:
        verdict = self.gate.predict(sched, r, now)
        if not verdict.admit:
            r.retry_after = verdict.retry_after
            return verdict.reason
        if verdict.first_chunk is not None:
            r.set_schedule(urgent_schedule(r.schedule, verdict.first_chunk))
        return None

    def may_defer(self, sched: SchedulerView, head: Request, prefill_s: float, now: float) -> bool:
        return self.gate.may_defer(sched, head, prefill_s, now)

    def observe(self, sched: SchedulerView, c: Completion) -> None:
        if c.error is None and not c.reruns:  # a batch re-run in parts measures nothing of one batch
            work = c.work
            self.gate.observe(sched, work.stage, work.lane, work.bucket, work.tokens, work.frames,
                              c.finished - c.started)

    def first_audio(self, r: Request, now: float) -> None:
        self.gate.first_audio(r, now)

    def forget(self, r: Request) -> None:
        self.gate.forget(r)


ADMISSION_POLICIES: dict[str, type[AdmissionPolicy]] = {
    p.name: p for p in (TtfaGated, Deadline, PrefillFirst)}


def admission_policy(name: str) -> AdmissionPolicy:
    """A fresh policy object (the gate keeps per-engine state)."""
    try:
        return ADMISSION_POLICIES[name]()
    except KeyError:
        raise ValueError(f"unknown admission {name!r}; one of {', '.join(ADMISSION_POLICIES)}") from None

"""A placement's SLO capacity, predicted: its engines co-simulated on one virtual clock behind the front door.

`vox profile --gpus N` ranks placements first by the throughput model (voxcli/sim/splits.py: each role's
req/s at its bound, summed). A bound is not what users get: the SLO capacity (the highest rate at which
90% of requests start within the TTFA target and never stall) also depends on queueing, on how the front
door spreads requests over the replicas and on the hops of a split. So each placement is simulated here as
`vox serve --placement` runs it (voxcli/cluster/ray_front.py, ray_roles.py, relay.py), with the virtual-
clock sim in place of every GPU:

    both replica      an `Engine` (role both), the request whole
    LM-only replica   an `LMEngine`: its chunks leave by the relay's hold rule (engine/hold.py), one hop
                      later they are fed to the request's codec-only replica (a `CodecEngine`), whose
                      first audio goes back to the LM (held as the codec replica holds it, plus a hop)
    front door        routes each request to the both/LM replica with the most slack (engine/slack.py)
                      and a split request's chunks to the codec replica with the most room, on the
                      replicas' latest reports (one every `signal_period_s`), less what it has sent each
                      since, as PlacementEngine does

All engines advance in lockstep, one report period at a time: LM and both engines first, then the codec
engines, fed what the LMs handed off in that period at the times it arrives. A codec's first audio reaches
its LM at the next period (within the hold it waits anyway).

Assumptions, stated (not fitted): every GPU is the cost profile's GPU; the host is free (each replica's
host loop and Ray's messaging cost no GPU time and never delay a step: a CPU-starved host is not modelled,
benchmarks/bench_placements.py's host table says where one binds); every message (front door -> replica,
codec -> LM work, LM -> codec chunks, replica -> front door audio) takes `hop_s`, under no load. Two
settings ship: OPTIMISTIC (1 ms hops: a lightly loaded node) and PESSIMISTIC (20 ms hops: a loaded host
or a cross-node network, every first-audio report held its whole hold).
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from voxcli.bench.client import Arrival, record_from_timeline, synthesis_request
from voxcli.bench.metrics import RequestRecord
from voxcli.engine.hold import CHUNK_HOLD_S, FIRST_AUDIO_HOLD_S, HOLD_LEAD_S, chunk_hold_s
from voxcli.engine.roles import CodeChunk, RoleEnd
from voxcli.engine.slack import decode_slack

SIGNAL_PERIOD_S = 0.2  # voxcli/cluster/signals.py: how often every replica pushes its report


@dataclass(frozen=True)
class Network:
    """What the placement's messages cost in time (module docstring)."""

    name: str
    hop_s: float  # one message's latency
    signal_period_s: float = SIGNAL_PERIOD_S
    chunk_hold_s: float = CHUNK_HOLD_S
    hold_lead_s: float = HOLD_LEAD_S
    first_audio_hold_s: float = FIRST_AUDIO_HOLD_S
    # the first-audio report waits its whole hold (True) or goes at once (another request's work took it)
    full_first_audio_hold: bool = False


OPTIMISTIC = Network("optimistic", hop_s=0.001)
PESSIMISTIC = Network("pessimistic", hop_s=0.020, full_first_audio_hold=True)
NETWORKS = {n.name: n for n in (OPTIMISTIC, PESSIMISTIC)}


@dataclass
class _Replica:
    role: str
    engine: Any
    report: float = 0.0  # slack (both, lm) or room (codec) at the latest report
    routed: int = 0  # sent since that report
    served: int = 0  # requests sent to it in all

    def signal(self) -> float:
        return self.report - self.routed

    def take_report(self) -> None:
        self.report = self.engine.room() if self.role == "codec" else decode_slack(self.engine)["slack"]
        self.routed = 0


@dataclass
class _Outbox:
    """One LM -> codec link's waiting chunks (relay.Outbox's rule, in virtual time)."""

    items: list[Any] = field(default_factory=list)
    due: float = math.inf


@dataclass
class _Job:
    arrival: Arrival
    sent: float  # virtual time the client sent it
    target: _Replica
    stream: Any = None  # both: its stream; split: the LM's
    codec: _Replica | None = None
    codec_stream: Any = None
    key: str = ""
    first_audio_told: bool = False

    def finished(self) -> bool:
        if self.codec_stream is None:
            return self.stream.finished
        return self.stream.finished and self.codec_stream.finished


class PlacementSimTarget:
    """A bench `Target` (voxcli/bench/client.py): plays arrival schedules on the co-simulated placement.
    `make_engine(role)` builds one engine of that role on the virtual-clock sim."""

    def __init__(self, make_engine: Callable[[str], Any], placement: Any, network: Network = OPTIMISTIC,
                 name: str = "", seed: int = 0) -> None:
        self.make_engine, self.placement, self.network = make_engine, placement, network
        self.name, self.seed = name or placement.describe(), seed
        self.counts: dict[str, int] = {}
        self.replicas: dict[str, list[_Replica]] | None = None
        self._keys = itertools.count(1)
        self._outboxes: dict[tuple[int, int], _Outbox] = {}  # (LM, codec) replica indices -> its link
        self._handed: list[tuple[float, int, int, Any]] = []  # (time, lm, codec, item) this period
        self._by_key: dict[str, _Job] = {}  # the split requests of the play under way

    def _open(self) -> dict[str, list[_Replica]]:
        if self.replicas is None:
            p = self.placement
            self.replicas = {role: [_Replica(role, self.make_engine(role)) for _ in range(n)]
                             for role, n in (("both", p.both), ("lm", p.lm), ("codec", p.codec))}
        return self.replicas

    def _engines(self, *roles: str) -> list[Any]:
        reps = self._open()
        return [r.engine for role in roles for r in reps[role]]

    def _now(self) -> float:
        return max(e.now for e in self._engines("both", "lm", "codec"))

    def _advance(self, until: float) -> None:
        for e in self._engines("both", "lm"):
            e.run(until=until)
        self._relay(until)
        for e in self._engines("codec"):
            e.run(until=until)

    # --- the LM -> codec hop
    def _sink(self, lm_i: int, codec_i: int, engine: Any) -> Callable[[Any], None]:
        def sink(item: Any) -> None:  # on the LM engine's loop, at its virtual now
            self._handed.append((engine.now, lm_i, codec_i, item))
        return sink

    def _relay(self, until: float) -> None:
        """What the LM engines handed off up to `until`, onto the codec engines at the times it arrives."""
        net = self.network
        handed, self._handed = sorted(self._handed, key=lambda h: h[0]), []
        for t, lm_i, codec_i, item in handed:
            box = self._outboxes.setdefault((lm_i, codec_i), _Outbox())
            if box.due <= t:
                self._send(box, codec_i, lm_i, box.due)
            box.items.append(item)
            hold = chunk_hold_s(item, net.chunk_hold_s, net.hold_lead_s, now_epoch=t)
            box.due = min(box.due, t + hold)
            if box.due <= t:
                self._send(box, codec_i, lm_i, t)
        for (lm_i, codec_i), box in self._outboxes.items():
            if box.due <= until:
                self._send(box, codec_i, lm_i, box.due)

    def _send(self, box: _Outbox, codec_i: int, lm_i: int, t: float) -> None:
        items, box.items, box.due = box.items, [], math.inf
        reps = self.replicas or {}
        codec, lm = reps["codec"][codec_i].engine, reps["lm"][lm_i].engine
        at = t + self.network.hop_s
        for item in items:
            if isinstance(item, RoleEnd):
                if item.status != "done":
                    codec.abort(item.key, f"the LM engine ended the request: {item.status} ({item.reason})",
                                at=at)
                continue
            assert isinstance(item, CodeChunk)
            try:
                codec.feed(item, at=at)
            except LookupError:  # the codec side ended it (failed, cancelled): stop the LM too
                job = self._by_key.get(item.key)
                if job is not None:
                    lm.cancel(job.stream.request_id)

    # --- the front door
    def _route(self, a: Arrival, origin: float) -> _Job:
        reps = self._open()
        hop = self.network.hop_s
        target = max(reps["both"] + reps["lm"], key=lambda r: r.signal())
        target.routed += 1
        target.served += 1
        sent = origin + a.at
        request = synthesis_request(a, self.seed)
        job = _Job(a, sent, target)
        if target.role == "both":
            job.stream = target.engine.submit(request, at=sent + hop)
            job.stream.drop_audio()
            return job
        codec = max(reps["codec"], key=lambda r: r.signal())
        codec.routed += 1
        codec.served += 1
        job.codec, job.key = codec, f"sim-{next(self._keys)}"
        job.codec_stream = codec.engine.attach(job.key)
        job.codec_stream.drop_audio()
        lm_i, codec_i = reps["lm"].index(target), reps["codec"].index(codec)
        # front door -> codec replica -> (work link) -> LM replica: two hops before the LM sees it
        job.stream = target.engine.submit(request, at=sent + 2 * hop, key=job.key,
                                          sink=self._sink(lm_i, codec_i, target.engine))
        job.stream.drop_audio()
        self._by_key[job.key] = job
        return job

    def _first_audio(self, jobs: Sequence[_Job]) -> None:
        """A split request's first audio, reported back to its LM (relay.py's work link)."""
        net = self.network
        for job in jobs:
            if job.codec is None or job.first_audio_told:
                continue
            tl = job.codec_stream.timeline
            if tl.first_audio is not None:
                job.first_audio_told = True
                hold = net.first_audio_hold_s if net.full_first_audio_hold else 0.0
                job.target.engine.first_audio(job.key, tl.first_audio, at=tl.first_audio + hold + net.hop_s)

    def _record(self, job: _Job, origin: float) -> RequestRecord:
        hop = self.network.hop_s
        lm_tl = job.stream.timeline
        tl = lm_tl if job.codec_stream is None else job.codec_stream.timeline
        rec = record_from_timeline(tl, origin)
        status = rec.status
        if job.codec_stream is not None and str(getattr(lm_tl.status, "value", lm_tl.status)) not in (
                "done", "finished"):
            lm_rec = record_from_timeline(lm_tl, origin)  # ended at the LM: the client hears its reason
            status, rec = lm_rec.status, dataclasses.replace(rec, reason=lm_rec.reason)
        return dataclasses.replace(
            rec, sent=job.sent - origin, status=status,
            deliveries=[(t + hop, s) for t, s in rec.deliveries],  # the audio's own hop to the front door
            finished=None if rec.finished is None else rec.finished + hop)

    def play(self, arrivals: Sequence[Arrival], timeout_s: float) -> list[RequestRecord]:
        reps = self._open()
        self._by_key = {}
        net = self.network
        start = self._now()
        self._advance(start)  # every engine at one time
        origin = start + 0.001
        pending = sorted(arrivals, key=lambda a: a.at)
        jobs: list[_Job] = []
        t, k = start, 0
        last = origin + (pending[-1].at if pending else 0.0)
        for r in (*reps["both"], *reps["lm"], *reps["codec"]):
            r.take_report()
        while True:
            nxt = t + net.signal_period_s
            while k < len(pending) and origin + pending[k].at < nxt:  # routed on the reports taken at t
                jobs.append(self._route(pending[k], origin))
                k += 1
            self._advance(nxt)
            t = nxt
            self._first_audio(jobs)
            for r in (*reps["both"], *reps["lm"], *reps["codec"]):
                r.take_report()
            if k == len(pending) and all(j.finished() for j in jobs):
                break
            if t > last + timeout_s:
                open_ = sum(not j.finished() for j in jobs)
                raise RuntimeError(f"placement {self.name}: {open_} requests still open {timeout_s:g} s of "
                                   "virtual time after the last arrival (a scheduler or relay bug)")
        records = [self._record(j, origin) for j in jobs]
        for e in self._engines("both", "lm", "codec"):
            e.timelines.clear()  # this rate is measured
        self._by_key = {}
        return records

    def close(self) -> None:
        for e in self._engines("both", "lm", "codec") if self.replicas is not None else []:
            e.close()
        self.replicas = None
        self._outboxes, self._handed = {}, []


def sim_engines(config: Any, profile: Any = None) -> Callable[[str], Any]:
    """`make_engine` for `PlacementSimTarget`: an engine of a role with `config` on the virtual-clock sim."""
    from voxcli.session import open_session

    def make(role: str) -> Any:
        return open_session(config, role=role, profile=profile, wall_clock=False).engine

    return make


@dataclass(frozen=True)
class PlacementPrediction:
    placement: str
    network: str
    bound_rps: float  # the throughput model's (profile.rank_placements)
    capacity90: float  # simulated: the highest rate tried with >= 90% of requests in SLO
    seeds: list[float]  # per arrival seed
    cell: str  # mean +- spread over the seeds, ">=" where a seed passed every rate (report.capacity_cell)
    rates: list[float]
    attainment: list[float]

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


COARSE_STEP = 0.1  # x the throughput bound: the first pass's rate step, from COARSE_FROM up
COARSE_FROM = 0.4
FINE_STEPS = 4  # the second pass splits the coarse step where 90% was crossed into this many
TOP = 3.0  # x the bound: the highest rate tried (pooled engines may serve more than their bounds' sum)


def predict_capacity(config: Any, placement: Any, bound_rps: float, utterances: Sequence[Any],
                     network: Network = OPTIMISTIC, duration_s: float = 20.0, seeds: int = 2,
                     profile: Any = None, frame_rate: float | None = None,
                     rate_done: Callable[[Any, Any], None] | None = None) -> PlacementPrediction:
    """The placement's SLO capacity on the co-simulation, every rate played with `seeds` arrival seeds for
    `duration_s`: a coarse pass up from COARSE_FROM x its throughput bound in steps of COARSE_STEP x the
    bound until the pooled attainment falls below 90% (or TOP x the bound), then a fine pass inside the
    step where it fell, so the capacity is read to COARSE_STEP / FINE_STEPS of the bound."""
    from voxcli.bench.report import capacity_cell
    from voxcli.bench.sweep import SweepSpec, Variant, VariantSweep, sweep_variant

    if bound_rps <= 0:
        raise ValueError(f"placement {placement.describe()}: no throughput bound to search around")
    unit = bound_rps * COARSE_STEP
    first, last = round(COARSE_FROM / COARSE_STEP), round(TOP / COARSE_STEP)
    coarse = [round(unit * i, 3) for i in range(first, last + 1)]
    target = PlacementSimTarget(sim_engines(config, profile), placement, network)
    label = Variant(placement.describe())

    def sweep(rates: list[float], warmup: int) -> VariantSweep:
        spec = SweepSpec(rates=rates, duration_s=duration_s, warmup=warmup, seeds=seeds, timeout_s=120,
                         stop_below=0.9, **({} if frame_rate is None else {"frame_rate": frame_rate}))
        return sweep_variant(target, label, spec, utterances, rate_done)

    try:
        res = sweep(coarse, warmup=4)
        cap = res.capacity90
        failed = [r.rate for r in res.results if r.rate > cap]
        # the 90% crossing lies between the last rate that passed (or 0) and the first that failed
        step = (failed[0] - cap) / FINE_STEPS if failed else 0.0
        fine = [round(cap + step * i, 3) for i in range(1, FINE_STEPS)] if step > 0 else []
        if fine:
            more = sweep(fine, warmup=0)
            merged = VariantSweep(label, results=sorted(res.results + more.results, key=lambda r: r.rate))
            merged.per_seed = [sorted(a + b, key=lambda r: r.rate)
                               for a, b in zip(res.per_seed, more.per_seed, strict=True)]
            res = merged
    finally:
        target.close()
    return PlacementPrediction(placement.describe(), network.name, round(bound_rps, 2), res.capacity90,
                               res.seed_capacities(0.90), capacity_cell(res, 0.90),
                               [r.rate for r in res.results], [round(r.attainment, 4) for r in res.results])

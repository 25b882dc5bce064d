"""A sweep: for each policy variant, offered rates in steps, one open-loop schedule per rate, metrics per
rate, capacities at 90/99%. Rates run back to back against the same target (as against one server),
after an uncounted warm-up burst; the sweep of a variant stops after a rate where fewer than half of
the requests got audio within 1 s."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from voxcli.bench.audio_in import mix_audio_in
from voxcli.bench.client import Target, burst, schedule
from voxcli.bench.metrics import RateResult, capacity, capacity_at_top, rate_result, should_stop
from voxcli.bench.workloads import Utterance, default_frame_rate

MAX_RATES = 1000  # a sweep longer than this is a typo (a step of 0.001), not a plan


@dataclass(frozen=True)
class Variant:
    """One line of the plots: a policy plus config overrides (e.g. a split or an admission policy)."""

    label: str
    overrides: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def policy(cls, name: str) -> Variant:
        return cls(name, {"policy": name})


@dataclass
class SweepSpec:
    rates: list[float]
    duration_s: float = 60.0
    seed: int = 0
    seeds: int = 3  # arrival seeds per rate: pooled for the per-rate table, one capacity each (mean/spread)
    warmup: int = 64  # concurrent requests before the first rate, not counted (0 = none)
    timeout_s: float = 900.0  # wait for the last requests of a rate at most this long
    frames_scale: float = 1.0  # scale the estimated output lengths (small CPU models)
    max_frames: int | None = None
    stop_rule: bool = True
    stop_below: float | None = None  # also stop at the first rate under this attainment (fits)
    frame_rate: float = field(default_factory=default_frame_rate)  # the benched model's (cli_bench.py)
    ttfa_target_s: float = 0.200  # SLO thresholds (scaled only by a time-dilated CPU run, see targets.py)
    stall_s: float = 0.010
    # "by-index": seed k's draw at the i-th rate is (seed + k) * 1000 + i (vox bench's). "by-rate": it is a
    # function of the rate's value (`rate_seed`), so candidates sweeping different ranges meet the very same
    # arrivals at a rate (common random numbers: a difference between them is theirs, not the draw's)
    arrivals: str = "by-index"
    audio_in_share: float = 0.0  # share of arrivals that are audio-in requests (bench/audio_in.py; sim)


@dataclass
class VariantSweep:
    variant: Variant
    results: list[RateResult] = field(default_factory=list)  # seeds pooled
    per_seed: list[list[RateResult]] = field(default_factory=list)  # [seed][rate]
    stopped_after: float | None = None  # rate after which the stop rule fired
    wall_s: float = 0.0

    @property
    def capacity90(self) -> float:
        return capacity(self.results, 0.90)

    @property
    def capacity99(self) -> float:
        return capacity(self.results, 0.99)

    def seed_capacities(self, threshold: float) -> list[float]:
        """One capacity per arrival seed (each seed's own attainment curve)."""
        return [capacity(rs, threshold) for rs in self.per_seed] or [capacity(self.results, threshold)]

    def seed_at_top(self, threshold: float) -> list[bool]:
        """Per arrival seed: its capacity is the top of the tested range (a lower bound)."""
        return [capacity_at_top(rs, threshold) for rs in self.per_seed if rs] or \
            [bool(self.results) and capacity_at_top(self.results, threshold)]

    def capacity_stats(self, threshold: float) -> dict[str, float]:
        """Mean, standard deviation, min and max of the per-seed capacities; `at_top`: how many seeds'
        capacity is the highest rate tested (then the mean and max are lower bounds)."""
        caps = self.seed_capacities(threshold)
        mean = sum(caps) / len(caps)
        std = (sum((c - mean) ** 2 for c in caps) / len(caps)) ** 0.5
        return {"mean": mean, "std": std, "min": min(caps), "max": max(caps), "n": len(caps),
                "at_top": sum(self.seed_at_top(threshold))}

    def to_dict(self) -> dict:
        return {"label": self.variant.label, "overrides": self.variant.overrides,
                "capacity90": self.capacity90, "capacity99": self.capacity99,
                "capacity90_seeds": self.seed_capacities(0.90),
                "capacity99_seeds": self.seed_capacities(0.99),
                "capacity90_stats": self.capacity_stats(0.90), "capacity99_stats": self.capacity_stats(0.99),
                "stopped_after": self.stopped_after, "wall_s": round(self.wall_s, 3),
                "rates": [r.to_dict() for r in self.results]}


@dataclass
class SweepResult:
    spec: SweepSpec
    sweeps: list[VariantSweep]
    meta: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict:
        s = self.spec
        return {"meta": self.meta,
                "spec": {"rates": s.rates, "duration_s": s.duration_s, "seed": s.seed, "seeds": s.seeds,
                         "warmup": s.warmup, "timeout_s": s.timeout_s, "frames_scale": s.frames_scale,
                         "max_frames": s.max_frames, "ttfa_target_s": s.ttfa_target_s,
                         "arrivals": s.arrivals, "audio_in_share": s.audio_in_share},
                "variants": [v.to_dict() for v in self.sweeps]}


def parse_rates(text: str) -> list[float]:
    """`2:60:2` (start:stop:step, stop included) or `2,4,8`."""
    try:
        if ":" in text:
            parts = [float(x) for x in text.split(":")]
            if len(parts) != 3 or not all(math.isfinite(p) for p in parts) or parts[2] <= 0 or parts[0] <= 0 \
                    or parts[1] < parts[0]:
                raise ValueError
            start, stop, step = parts
            n = int(round((stop - start) / step))
            if n + 1 > MAX_RATES:
                raise ValueError(f"rates {text!r} make {n + 1} steps; at most {MAX_RATES} rates per sweep "
                                 "(use a larger step)")
            rates = [round(start + i * step, 6) for i in range(n + 1) if start + i * step <= stop + 1e-9]
        else:
            rates = sorted(float(x) for x in text.split(",") if x.strip())
    except ValueError as e:
        if str(e).startswith("rates "):
            raise
        raise ValueError(f"rates {text!r}: use start:stop:step (e.g. 2:60:2) or a list (e.g. 2,4,8) of "
                         "positive requests per second") from None
    if not rates or any(not math.isfinite(r) or r <= 0 for r in rates):
        raise ValueError(f"rates {text!r}: every rate must be a finite number of requests per second > 0")
    if len(rates) > MAX_RATES:
        raise ValueError(f"rates {text!r}: {len(rates)} rates; at most {MAX_RATES} per sweep")
    return rates


ARRIVALS = ("by-index", "by-rate")


def rate_seed(k: int, rate: float) -> int:
    """The arrival draw of seed `k` at `rate` under `arrivals = "by-rate"`: the rate's value, not its place
    in the list, picks it."""
    return k * 1_000_003 + round(rate * 100)


def arrival_seed(spec: SweepSpec, k: int, i: int, rate: float) -> int:
    """The seed of the `k`-th arrival draw at the `i`-th rate of `spec` (see `SweepSpec.arrivals`)."""
    if spec.arrivals == "by-rate":
        return rate_seed(spec.seed + k, rate)
    return (spec.seed + k) * 1000 + i


def sweep_variant(target: Target, variant: Variant, spec: SweepSpec, utterances: Sequence[Utterance],
                  progress: Callable[[VariantSweep, RateResult], None] | None = None) -> VariantSweep:
    out = VariantSweep(variant)
    t0 = time.perf_counter()
    kw = dict(frame_rate=spec.frame_rate, frames_scale=spec.frames_scale, max_frames=spec.max_frames)
    if spec.warmup > 0:
        target.play(burst(spec.warmup, utterances, spec.seed, **kw), spec.timeout_s)
    for i, rate in enumerate(spec.rates):
        # each (seed, rate) draws its own arrival times and utterance order; pooled for the table, kept
        # apart for one capacity per seed
        records = []
        counts: dict[str, int] = {}
        for k in range(spec.seeds):
            draw = arrival_seed(spec, k, i, rate)
            arrivals = schedule(rate, spec.duration_s, draw, utterances, **kw)
            if spec.audio_in_share > 0:
                arrivals = mix_audio_in(arrivals, spec.audio_in_share, draw)
            mine = target.play(arrivals, spec.timeout_s)
            records.extend(mine)
            if len(out.per_seed) <= k:
                out.per_seed.append([])
            one = rate_result(rate, mine, spec.duration_s, spec.ttfa_target_s, spec.stall_s)
            _late_chunk_counts(one, getattr(target, "counts", {}))
            for key, v in getattr(target, "counts", {}).items():
                counts[key] = counts.get(key, 0) + v
            out.per_seed[k].append(one)
        res = rate_result(rate, records, spec.duration_s * spec.seeds, spec.ttfa_target_s, spec.stall_s)
        _late_chunk_counts(res, counts)
        out.results.append(res)
        if progress:
            progress(out, res)
        if (spec.stop_rule and should_stop(res)) or (spec.stop_below is not None
                                                      and res.attainment < spec.stop_below):
            out.stopped_after = rate
            break
    out.wall_s = time.perf_counter() - t0
    return out


def _late_chunk_counts(res: RateResult, counts: dict[str, int]) -> None:
    """The scheduler's late-chunk counters of the plays behind `res` (targets that report them)."""
    res.promoted = counts.get("promoted", 0)
    res.deadline_launches = counts.get("deadline_launches", 0)
    res.slack_cuts = counts.get("slack_cuts", 0)


def run_sweep(make_target: Callable[[Variant], Target], variants: Sequence[Variant], spec: SweepSpec,
              utterances: Sequence[Utterance], meta: dict[str, Any] | None = None,
              progress: Callable[[VariantSweep, RateResult], None] | None = None) -> SweepResult:
    sweeps = []
    for v in variants:
        target = make_target(v)
        try:
            sweeps.append(sweep_variant(target, v, spec, utterances, progress))
        finally:
            target.close()
    return SweepResult(spec, sweeps, dict(meta or {}))

"""Per-stage cost model: how long a stage takes for a batch on a given number of SMs.

Used by the scheduler's latency estimates (slack, prefill duration, background launch time) on every
executor, and by the `sim` executor as the device itself. Profiles live in `recipes/gpus/*.toml`
(calibrated from micro facts, or measured by `vox profile` / `scripts/gpu_check.py`); the `cpu`
executor measures its own table at startup.

TOML layout:

    [gpu]
    name = "h100"
    sms = 132
    interference = 1.35        # slowdown of each of two unpartitioned lanes running at once

    [stages.decode]            # latency on the whole device, per batch size (rows)
    batch = [1, 8, 64, 256]
    ms    = [6.0, 6.5, 9.0, 16.0]
    sm    = [24, 64, 108, 132] # SM counts ...
    speed = [0.35, 0.8, 0.96, 1.0]   # ... and the fraction of whole-device speed there
    [stages.prefill]
    batch = [1]
    ms = [8.0]
    per_token_ms = 0.01        # plus this per prompt token
    [stages.codec]             # batch = chunks of `frames_ref` frames
    batch = [1, 16]
    ms = [1.9, 10.0]
    frames_ref = 10

Optional, when SM scaling depends on the batch size (a small batch is latency-bound and barely slows
on fewer SMs; a big one is throughput-bound and slows in proportion): latency tables at given SM counts,
over the same `batch` points. They replace `sm`/`speed` for that stage; between two tabled SM counts
(and the whole device, `ms`) speed (1/latency) is interpolated linearly in SMs, below the smallest it
falls in proportion to the SMs.

    [stages.codec.sm_ms]
    24 = [5.0, 49.0]

Optional for decode, CFG work sharing (see StageCost.cfg_row): `cfg_row`, `cfg_group`.

Optional per stage, for the sim's bandwidth model: `bytes_mb`, megabytes moved from/to device memory per
call at each `batch` point (interpolated like `ms`).

The sim's fidelity settings (`SimModel`), one table per named model, the default chosen by `default`
(a profile without `[sim]` has only "optimistic", which adds none of these effects):

    [sim]
    default = "honest"
    bandwidth_gbs = 2680.0         # achievable memory bandwidth, shared by lanes running at once
    [sim.optimistic]               # every flag off: the lanes' costs are the table's, exactly
    [sim.honest]
    urgent_contention = true       # the urgent lane is slowed like any lane it overlaps
    bandwidth_sharing = true       # lanes running at once share memory bandwidth by bytes moved
    host = "profile"               # "free" | "profile" (host_*_us below) | "measured" (thread CPU time)
    host_call_us = 20.0            # host time per scheduler call ...
    host_row_us = 0.3              # ... plus this per row of the batch it launched or completed
    noise_sigma = 0.1              # device time = table time x lognormal(mean 1, this sigma), seeded
"""

from __future__ import annotations

import bisect
import tomllib
from dataclasses import dataclass, field
from pathlib import Path


def _interp(xs: tuple[float, ...], ys: tuple[float, ...], x: float) -> float:
    """Piecewise-linear, extrapolated linearly past the last point, clamped below the first."""
    if len(xs) == 1:
        return ys[0] * (x / xs[0] if x > xs[0] else 1.0)
    if x <= xs[0]:
        return ys[0]
    i = bisect.bisect_left(xs, x)
    if i >= len(xs):
        i = len(xs) - 1
    x0, x1, y0, y1 = xs[i - 1], xs[i], ys[i - 1], ys[i]
    return y0 + (y1 - y0) * (x - x0) / (x1 - x0)


@dataclass(frozen=True)
class StageCost:
    batch: tuple[float, ...]
    ms: tuple[float, ...]
    sm: tuple[float, ...] = ()
    speed: tuple[float, ...] = ()
    per_token_ms: float = 0.0
    frames_ref: int = 0  # codec: batch is counted in chunks of this many frames (0 = per item)
    sm_ms: tuple[tuple[float, tuple[float, ...]], ...] = ()  # (SM count, ms per batch point), ascending
    bytes_mb: tuple[float, ...] = ()  # MB moved per call at each batch point (sim bandwidth model)
    # CFG work sharing (decode; the sim executor applies it): the unconditional sequence of a pair with a
    # `Prompt.uncond_key` costs `cfg_row` rows instead of 1, plus `cfg_group` rows once per distinct key in
    # the batch (the shared work, e.g. reading one cross K/V per text length). 1 and 0: nothing shared.
    cfg_row: float = 1.0
    cfg_group: float = 0.0

    def cfg_rows(self, pairs: int, keys: int) -> float:
        """Rows to take off a batch's count for `pairs` sharing pairs over `keys` distinct keys."""
        return pairs * (1.0 - self.cfg_row) - keys * self.cfg_group

    def seconds(self, batch: float, sms: int | None, total_sms: int, tokens: int = 0) -> float:
        b = max(batch, self.batch[0] if batch <= 0 else batch)
        base = _interp(self.batch, self.ms, b)
        slowdown = 1.0  # of the whole call (per-token work included) on a partition of `sms` SMs
        if sms is not None and sms < total_sms and self.sm_ms:
            slowdown = self._ms_on_sms(b, sms, total_sms, base) / base
        elif sms is not None and sms < total_sms and self.sm:
            slowdown = 1.0 / max(1e-3, min(1.0, _interp(self.sm, self.speed, sms)))
        return (base + self.per_token_ms * tokens) * slowdown / 1000.0

    def _ms_on_sms(self, batch: float, sms: float, total_sms: int, whole_ms: float) -> float:
        points = [(s, _interp(self.batch, t, batch)) for s, t in self.sm_ms if s < total_sms]
        points.append((float(total_sms), whole_ms))
        if sms <= points[0][0]:
            return points[0][1] * points[0][0] / max(sms, 1e-3)
        for (s0, m0), (s1, m1) in zip(points, points[1:], strict=False):
            if sms <= s1:
                speed = 1 / m0 + (1 / m1 - 1 / m0) * (sms - s0) / (s1 - s0)
                return 1 / speed
        return whole_ms


HOST_MODES = ("free", "profile", "measured")


@dataclass(frozen=True)
class SimModel:
    """Which second-order effects the sim executor adds to the cost table (see the module docstring;
    each profile's header says why each one is on and where its numbers come from)."""

    name: str = "optimistic"
    urgent_contention: bool = False
    bandwidth_sharing: bool = False
    bandwidth_gbs: float = 0.0
    host: str = "free"
    host_call_us: float = 0.0
    host_row_us: float = 0.0
    noise_sigma: float = 0.0

    @classmethod
    def from_dict(cls, name: str, d: dict, bandwidth_gbs: float = 0.0) -> SimModel:
        known = {f for f in cls.__dataclass_fields__ if f != "name"}
        bad = set(d) - known
        if bad:
            raise ValueError(f"[sim.{name}]: unknown key(s) {sorted(bad)}; known: {sorted(known)}")
        m = cls(name=name, urgent_contention=bool(d.get("urgent_contention", False)),
                bandwidth_sharing=bool(d.get("bandwidth_sharing", False)),
                bandwidth_gbs=float(d.get("bandwidth_gbs", bandwidth_gbs)), host=str(d.get("host", "free")),
                host_call_us=float(d.get("host_call_us", 0.0)), host_row_us=float(d.get("host_row_us", 0.0)),
                noise_sigma=float(d.get("noise_sigma", 0.0)))
        if m.host not in HOST_MODES:
            raise ValueError(f"[sim.{name}] host must be one of {', '.join(HOST_MODES)}, got {m.host!r}")
        if m.noise_sigma < 0 or m.host_call_us < 0 or m.host_row_us < 0:
            raise ValueError(f"[sim.{name}]: noise_sigma, host_call_us and host_row_us must be >= 0")
        if m.bandwidth_sharing and m.bandwidth_gbs <= 0:
            raise ValueError(f"[sim.{name}] bandwidth_sharing needs bandwidth_gbs > 0 (in [sim] or "
                             f"[sim.{name}])")
        return m

    def to_dict(self) -> dict:
        return {k: getattr(self, k) for k in self.__dataclass_fields__ if k != "name"}


OPTIMISTIC = SimModel()


@dataclass(frozen=True)
class CostProfile:
    name: str
    sms: int
    stages: dict[str, StageCost] = field(default_factory=dict)
    interference: float = 1.0
    sim_models: dict[str, SimModel] = field(default_factory=lambda: {"optimistic": OPTIMISTIC})
    sim_default: str = "optimistic"

    def sim_model(self, name: str = "") -> SimModel:
        """The named sim model ("" = the profile's default); a clear error names the choices."""
        key = name or self.sim_default
        if key not in self.sim_models:
            raise ValueError(f"sim_model {key!r} is not in profile {self.name}: use one of "
                             f"{', '.join(sorted(self.sim_models))}")
        return self.sim_models[key]

    def bytes_moved(self, stage: str, batch: float, frames: int = 0) -> float:
        """Bytes one call of `stage` moves to/from device memory (0 when the profile has no table)."""
        cost = self.stages.get(stage)
        if cost is None or not cost.bytes_mb:
            return 0.0
        if cost.frames_ref and frames:
            batch = frames / cost.frames_ref
        return _interp(cost.batch, cost.bytes_mb, max(batch, cost.batch[0])) * 1e6

    def latency(self, stage: str, batch: float, sms: int | None = None, tokens: int = 0,
                frames: int = 0) -> float:
        """Seconds for one call of `stage` with `batch` rows/chunks on `sms` SMs (None = all).
        For the codec, `frames` (total frames in the batch) replaces `batch` when frames_ref is set."""
        cost = self.stages[stage]
        if cost.frames_ref and frames:
            batch = frames / cost.frames_ref
        return cost.seconds(batch, sms, self.sms, tokens)

    @classmethod
    def from_toml(cls, path: str | Path) -> CostProfile:
        data = tomllib.loads(Path(path).read_text())
        return cls.from_dict(data, default_name=Path(path).stem)

    @classmethod
    def from_dict(cls, data: dict, default_name: str = "profile") -> CostProfile:
        gpu = data.get("gpu", {})
        stages = {}
        for name, s in data.get("stages", {}).items():
            stages[name] = StageCost(
                batch=tuple(float(b) for b in s["batch"]), ms=tuple(float(m) for m in s["ms"]),
                sm=tuple(float(x) for x in s.get("sm", ())),
                speed=tuple(float(x) for x in s.get("speed", ())),
                per_token_ms=float(s.get("per_token_ms", 0.0)), frames_ref=int(s.get("frames_ref", 0)),
                sm_ms=tuple(sorted((float(k), tuple(float(m) for m in v))
                                   for k, v in s.get("sm_ms", {}).items())),
                bytes_mb=tuple(float(x) for x in s.get("bytes_mb", ())),
                cfg_row=float(s.get("cfg_row", 1.0)), cfg_group=float(s.get("cfg_group", 0.0)))
        sim = dict(data.get("sim", {}))
        default = str(sim.pop("default", "optimistic"))
        bandwidth = float(sim.pop("bandwidth_gbs", 0.0))
        models = {"optimistic": OPTIMISTIC}
        for key, table in sim.items():
            if not isinstance(table, dict):
                raise ValueError(f"[sim] {key} = {table!r}: only `default`, `bandwidth_gbs` and "
                                 "[sim.<model>] tables belong there")
            models[key] = SimModel.from_dict(key, table, bandwidth)
        if default not in models:
            raise ValueError(f"[sim] default = {default!r} names no [sim.{default}] table")
        return cls(name=gpu.get("name", default_name), sms=int(gpu.get("sms", 1)), stages=stages,
                   interference=float(gpu.get("interference", 1.0)), sim_models=models, sim_default=default)

    def to_dict(self) -> dict:
        stages = {}
        for name, s in self.stages.items():
            d = {"batch": list(s.batch), "ms": list(s.ms)}
            if s.sm:
                d["sm"], d["speed"] = list(s.sm), list(s.speed)
            if s.per_token_ms:
                d["per_token_ms"] = s.per_token_ms
            if s.frames_ref:
                d["frames_ref"] = s.frames_ref
            if s.sm_ms:
                d["sm_ms"] = {str(int(k)): list(v) for k, v in s.sm_ms}
            if s.bytes_mb:
                d["bytes_mb"] = list(s.bytes_mb)
            if s.cfg_row != 1.0 or s.cfg_group:
                d["cfg_row"], d["cfg_group"] = s.cfg_row, s.cfg_group
            stages[name] = d
        out = {"gpu": {"name": self.name, "sms": self.sms, "interference": self.interference},
               "stages": stages}
        if set(self.sim_models) != {"optimistic"}:
            out["sim"] = {"default": self.sim_default,
                          **{k: m.to_dict() for k, m in self.sim_models.items()}}
        return out

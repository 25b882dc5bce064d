"""The throughput model behind `vox profile`: the backbone/codec SM split and the role placements, from a
cost profile (a calibrated `recipes/gpus/<gpu>.toml`, or one measured on a CUDA device by
voxcli/bench/cuda_profile.py).

The split (paper §3.1 / Fig. 3b): at the target load, the backbone runs at its expected decode batch and the
codec at its expected background batch; for every split (codec SMs in multiples of 8, the backbone the
rest) compute both throughputs, compare with the time-sharing line, and choose the split that gives the
backbone the most throughput while the codec still keeps up with the background chunks of the target
load. If no split keeps up, choose the one with the highest sustainable load (codec-bound models end up
giving the codec most of the SMs). `--gpus N` ranks role placements (both / LM-only / codec-only) from
per-role throughputs (paper §3.3: backbones sharing a codec sustain min(codec, sum of backbones)).
`vox profile` passes `split_points` the capacity bound of the model's recipe at each split (`capacities`,
voxcli/sim/config_bound.py SplitBounds) in place of this module's own per-lane capacities, so "keeps
up", the bound table, the simulation and the recipe it writes share one config per split.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from voxcli.models.base import ChunkSchedule
from voxcli.sim.cost import CostProfile

if TYPE_CHECKING:
    from voxcli.config import EngineConfig

GRANULARITY = 8  # SMs per green-context group on compute capability 9.0+ (gpu-notes.md)


def gpu_profile_path(model: str, gpu: str) -> Path:
    """The calibrated cost profile of `model` on `gpu` (recipes/gpus/): the one its registration names
    when its costs are its own (Dia, Higgs: `gpus/<gpu>-dia-1.6b`), else the shared `gpus/<gpu>`. A
    ConfigError when there is none."""
    from voxcli.config import recipe_path
    from voxcli.models.registry import find_sim_model

    found = find_sim_model(model)
    return recipe_path(f"gpus/{found[1].gpu_profile.format(gpu=gpu) if found else gpu}")


@dataclass(frozen=True)
class LoadShape:
    """What one request costs: backbone frames and codec chunks (the first one goes to the urgent lane),
    and the latency limits a backbone step must respect (first chunk within the TTFA target)."""

    frames_per_request: float
    chunks_per_request: float
    frames_per_chunk: int = 10
    first_chunk_frames: int = 10
    ttfa_target_s: float = 0.200
    background_min_batch: int = 8
    max_codec_batch: int = 32
    max_decode_batch: int = 256

    @property
    def background_chunks(self) -> float:
        return max(1e-9, self.chunks_per_request - 1)


def load_shape(frames: Sequence[float], chunk: ChunkSchedule, **limits: float) -> LoadShape:
    """The load shape of requests of `frames` backbone frames each, cut into codec chunks by `chunk` (the
    model's schedule): chunks per request, the first chunk's frames, and the average frames of a
    background chunk (ramp and short last chunks included), so the codec is charged for the frames it
    decodes. A shape with the default 10 frames per chunk charges a 100-frame CosyVoice 3 chunk a tenth
    of its cost and makes a codec-bound model look backbone-bound."""
    if not frames:
        raise ValueError("a load shape needs at least one request")
    chunks = background_frames = 0.0
    for n in frames:
        left, i = float(n), 0
        while left > 0:
            size = min(left, chunk.size(i))
            if i:
                background_frames += size
            left -= size
            i += 1
        chunks += max(1, i)
    background = chunks - len(frames)
    per_chunk = background_frames / background if background else chunk.steady
    return LoadShape(frames_per_request=sum(frames) / len(frames), chunks_per_request=chunks / len(frames),
                     frames_per_chunk=max(1, round(per_chunk)), first_chunk_frames=chunk.first,
                     **limits)  # type: ignore[arg-type]


@dataclass(frozen=True)
class SplitPoint:
    lm_sms: int
    codec_sms: int
    lm_batch: float  # expected decode batch at the target load
    codec_batch: float  # expected background batch at the target load
    lm_frames_s: float  # backbone throughput at its expected batch on its partition
    codec_chunks_s: float  # codec throughput at its expected batch on its partition
    lm_capacity_rps: float  # most req/s the backbone sustains within the step-latency budget
    codec_capacity_rps: float  # most req/s the codec sustains (largest background bucket)
    keeps_up: bool  # both sustain the target load
    # SMs in neither partition: green contexts hand out SMs in groups of GRANULARITY, so the backbone gets
    # the largest multiple of 8 beside the codec and the remainder (H100: 132 = 96 + 32 + 4) stays idle
    spare_sms: int = 0

    @property
    def name(self) -> str:
        """The split's one name everywhere (tables, the chosen line, the plot, the recipe): backbone/codec
        SMs as partitioned."""
        return f"{self.lm_sms}/{self.codec_sms}"

    @property
    def described(self) -> str:
        """The name with what it means, and which SMs are spare and why."""
        total = self.lm_sms + self.codec_sms + self.spare_sms
        spare = (f", {self.spare_sms} of {total} spare: green contexts hand out SMs in groups of "
                 f"{GRANULARITY}" if self.spare_sms else "")
        return f"{self.name} (backbone {self.lm_sms} + codec {self.codec_sms} SMs{spare})"

    @property
    def sustainable_rps(self) -> float:
        return min(self.lm_capacity_rps, self.codec_capacity_rps)


def decode_ms(profile: CostProfile, batch: float, sms: int | None) -> float:
    return profile.latency("decode", batch, sms) * 1e3


def codec_ms(profile: CostProfile, chunks: float, sms: int | None, frames_per_chunk: int) -> float:
    return profile.latency("codec", chunks, sms, frames=round(chunks * frames_per_chunk)) * 1e3


def step_budget_ms(profile: CostProfile, shape: LoadShape) -> float:
    """Longest backbone step that still gets a first chunk out within the TTFA target: the first chunk
    needs `first_chunk_frames` steps plus the step already running, then one urgent codec call."""
    first_codec = codec_ms(profile, 1, None, shape.first_chunk_frames)
    return (shape.ttfa_target_s * 1e3 - first_codec) / (shape.first_chunk_frames + 1)


def expected_decode_batch(
    profile: CostProfile, rate: float, shape: LoadShape, sms: int | None = None
) -> float:
    """Rows in flight at `rate` (Little's law): rate x frames per request x step time, a fixed point."""
    b = 1.0
    for _ in range(100):
        nb = rate * shape.frames_per_request * decode_ms(profile, b, sms) / 1e3
        nb = min(shape.max_decode_batch, max(1.0, nb))
        if abs(nb - b) < 1e-3:
            break
        b = nb
    return b


def expected_codec_batch(profile: CostProfile, rate: float, shape: LoadShape, sms: int | None) -> float:
    """Background chunks that pile up while one batch runs (a fixed point), at least B, at most the
    largest bucket."""
    need = rate * shape.background_chunks
    b = float(shape.background_min_batch)
    for _ in range(100):
        nb = need * codec_ms(profile, b, sms, shape.frames_per_chunk) / 1e3
        nb = min(shape.max_codec_batch, max(shape.background_min_batch, nb))
        if abs(nb - b) < 1e-3:
            break
        b = nb
    return b


def lm_capacity_rps(profile: CostProfile, sms: int | None, shape: LoadShape) -> float:
    """Most req/s the backbone sustains on `sms`: the largest batch whose step fits the budget."""
    budget = step_budget_ms(profile, shape)
    best = 0.0
    for b in range(1, shape.max_decode_batch + 1):
        ms = decode_ms(profile, b, sms)
        if ms > budget:
            break
        best = b / (ms / 1e3)
    return best / shape.frames_per_request


def codec_capacity_rps(profile: CostProfile, sms: int | None, shape: LoadShape) -> float:
    b = shape.max_codec_batch
    return b / (codec_ms(profile, b, sms, shape.frames_per_chunk) / 1e3) / shape.background_chunks


def backbone_sms(total: int, codec: int, granularity: int = GRANULARITY) -> int:
    """The backbone's partition beside `codec` SMs: what is left, rounded down to whole groups."""
    left = total - codec
    return left - left % granularity


# (lm_sms, codec_sms) -> (backbone, codec) req/s: the capacity bound of the config a split runs
# (voxcli/sim/config_bound.py SplitBounds.capacities), in place of this module's own throughput model
Capacities = Callable[[int, int], tuple[float, float]]


def split_points(
    profile: CostProfile, rate: float, shape: LoadShape, granularity: int = GRANULARITY,
    capacities: Capacities | None = None,
) -> list[SplitPoint]:
    """Every split with its expected batches and throughputs at `rate` (paper Fig. 3b) and the most req/s
    each lane sustains: `capacities` when given (`vox profile` passes the capacity bound of the config it
    simulates and writes, so "keeps up" and the bound table can never disagree), else the throughput
    model's `lm_capacity_rps` / `codec_capacity_rps`."""
    total = profile.sms
    lm_batch = expected_decode_batch(profile, rate, shape)
    out = []
    for codec in range(granularity, total - granularity + 1, granularity):
        lm = backbone_sms(total, codec, granularity)
        cb = expected_codec_batch(profile, rate, shape, codec)
        lm_fps = lm_batch / (decode_ms(profile, lm_batch, lm) / 1e3)
        cd_cps = cb / (codec_ms(profile, cb, codec, shape.frames_per_chunk) / 1e3)
        if capacities is not None:
            lm_cap, cd_cap = capacities(lm, codec)
        else:
            lm_cap, cd_cap = lm_capacity_rps(profile, lm, shape), codec_capacity_rps(profile, codec, shape)
        out.append(
            SplitPoint(
                lm, codec, lm_batch, cb, lm_fps, cd_cps, lm_cap, cd_cap,
                rate > 0 and cd_cap >= rate and lm_cap >= rate,  # a zero bound keeps up with nothing
                spare_sms=total - lm - codec,
            )
        )
    return out


def time_sharing(profile: CostProfile, rate: float, shape: LoadShape) -> tuple[float, float]:
    """(backbone frames/s alone on the whole device, codec chunks/s alone): the two ends of the
    time-sharing line; every split of time between the two lies on the segment between them."""
    lm_batch = expected_decode_batch(profile, rate, shape)
    cb = expected_codec_batch(profile, rate, shape, None)
    return (
        lm_batch / (decode_ms(profile, lm_batch, None) / 1e3),
        cb / (codec_ms(profile, cb, None, shape.frames_per_chunk) / 1e3),
    )


def choose_split(points: list[SplitPoint]) -> SplitPoint:
    """The most backbone throughput among splits that sustain the target load; if none does, the split
    that sustains the most load (codec-bound models end up giving the codec most of the SMs)."""
    if not points:
        raise ValueError("no SM split to choose from (the device has too few SMs for two partitions)")
    ok = [p for p in points if p.keeps_up]
    if ok:
        return max(ok, key=lambda p: (p.lm_frames_s, -p.codec_sms))
    return max(points, key=lambda p: (p.sustainable_rps, p.codec_sms))


def max_sustainable_rate(profile: CostProfile, shape: LoadShape, granularity: int = GRANULARITY,
                         capacities: Capacities | None = None) -> float:
    """The highest load (req/s) some split sustains: by `capacities` when given (the capacity bound), else
    by the throughput model (backbone within its step budget, codec at its largest background batch)."""
    total = profile.sms

    def sustained(codec: int) -> float:
        lm = backbone_sms(total, codec, granularity)
        if capacities is not None:
            return min(capacities(lm, codec))
        return min(lm_capacity_rps(profile, lm, shape), codec_capacity_rps(profile, codec, shape))

    return max((sustained(c) for c in range(granularity, total - granularity + 1, granularity)), default=0.0)


# --- placements over several GPUs (paper §3.3) ----------------------------------------------------------
@dataclass(frozen=True)
class Placement:
    both: int
    lm_only: int
    codec_only: int
    rps: float

    def describe(self) -> str:
        parts = [
            f"{n}x {name}"
            for n, name in ((self.both, "both"), (self.lm_only, "LM-only"), (self.codec_only, "codec-only"))
            if n
        ]
        return " + ".join(parts)


def role_throughputs(profile: CostProfile, chosen: SplitPoint, shape: LoadShape) -> dict[str, float]:
    """Requests/s one GPU sustains in each role, measured on its own (GPUs do not slow each other)."""
    return {
        "both": chosen.sustainable_rps,
        "lm_only": lm_capacity_rps(profile, None, shape),
        "codec_only": codec_capacity_rps(profile, None, shape),
    }


def rank_placements(roles: dict[str, float], n_gpus: int) -> list[Placement]:
    if n_gpus < 1:
        raise ValueError(f"--gpus must be >= 1, got {n_gpus}")
    out = []
    for both, lm in itertools.product(range(n_gpus + 1), repeat=2):
        codec = n_gpus - both - lm
        if codec < 0:
            continue
        shared = min(lm * roles["lm_only"], codec * roles["codec_only"]) if lm and codec else 0.0
        out.append(Placement(both, lm, codec, both * roles["both"] + shared))
    return sorted(out, key=lambda p: (-p.rps, -p.both, p.codec_only))


# --- output -----------------------------------------------------------------------------------------------
def profile_tables(profile: CostProfile, shape: LoadShape) -> list:
    """Rich tables: decode ms per batch x backbone SMs, codec ms per batch x codec SMs, prefill."""
    from voxcli.tables import figure_table

    total = profile.sms
    lm_sms = [total] + [total - c for c in range(GRANULARITY, 8 * GRANULARITY + 1, GRANULARITY)]
    cd_sms = [c for c in range(GRANULARITY, 8 * GRANULARITY + 1, GRANULARITY)] + [total]

    def part(s: int) -> int | None:
        return s if s < total else None

    def ms(x: float) -> str:  # at most 5 characters up to 99999 ms: ten columns fit 80 (tables.py)
        return f"{x:.2f}" if x < 100 else f"{x:.1f}" if x < 1000 else f"{x:.0f}"

    decode = [[str(int(b)), *[ms(decode_ms(profile, b, part(s))) for s in lm_sms]]
              for b in profile.stages["decode"].batch]
    codec = [[str(int(b)), *[ms(codec_ms(profile, b, part(s), shape.frames_per_chunk)) for s in cd_sms]]
             for b in profile.stages["codec"].batch]
    tables = [
        figure_table(f"{profile.name}: backbone step (ms) per decode batch x SMs",
                     ["batch", *map(str, lm_sms)], decode),
        figure_table(f"{profile.name}: codec batch (ms) per chunks x SMs",
                     ["chunks", *map(str, cd_sms)], codec),
    ]
    if "prefill" in profile.stages:
        prefill = [[str(t), f"{profile.latency('prefill', 1, None, tokens=t) * 1e3:.2f}"]
                   for t in (32, 64, 128, 256, 512)]
        # a short title: a table of two narrow columns wraps a long one into a column of 13 characters
        tables.append(figure_table(f"{profile.name}: prefill (ms)", ["prompt tokens", "whole device"],
                                   prefill))
    return tables


SPLIT_HEADERS = ("split", "spare", "dec. batch", "codec batch", "LM frames/s", "codec chunks/s",
                 "LM max req/s", "codec max req/s", "keeps up")


def split_table(points: list[SplitPoint], chosen: SplitPoint, rate: float,
                capacities: str = "the throughput model"):
    """The splits at `rate`; `capacities` says where the max req/s columns (and so "keeps up") come from."""
    from voxcli.tables import figure_table

    rows = [[f"{'*' if p == chosen else ''}{p.name}", str(p.spare_sms), f"{p.lm_batch:.1f}",
             f"{p.codec_batch:.1f}", f"{p.lm_frames_s:.0f}", f"{p.codec_chunks_s:.0f}",
             f"{p.lm_capacity_rps:.1f}", f"{p.codec_capacity_rps:.1f}", "yes" if p.keeps_up else "no"]
            for p in points]
    return figure_table(f"SM splits (backbone/codec) at a target load of {rate:.1f} req/s; * = chosen; "
                        f"max req/s: {capacities}", SPLIT_HEADERS, rows)


def plot_splits(
    points: list[SplitPoint], line: tuple[float, float], chosen: SplitPoint, path: Path, title: str
) -> Path:
    """Backbone vs codec throughput per split against the time-sharing line (paper Fig. 3b)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4.5))
    lm0, cd0 = line
    ax.plot([0, lm0], [cd0, 0], "--", color="gray", label="time sharing")
    ax.scatter(
        [p.lm_frames_s for p in points],
        [p.codec_chunks_s for p in points],
        color="tab:blue",
        label="SM split (backbone/codec)",
    )
    for p in points:
        ax.annotate(
            p.name,
            (p.lm_frames_s, p.codec_chunks_s),
            fontsize=7,
            xytext=(3, 3),
            textcoords="offset points",
        )
    ax.scatter(
        [chosen.lm_frames_s],
        [chosen.codec_chunks_s],
        s=120,
        facecolors="none",
        edgecolors="tab:red",
        label=f"chosen {chosen.name}",
    )
    ax.set_xlabel("backbone throughput (frames/s)")
    ax.set_ylabel("codec throughput (chunks/s)")
    ax.set_title(title)
    ax.set_xlim(left=0)
    ax.set_ylim(bottom=0)
    ax.legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def recipe_text(model: str, gpu: str, chosen: SplitPoint, rate: float, base: EngineConfig,
                source: str | None, sets: Sequence[str] = ()) -> str:
    """The engine recipe `model` runs with (`base`, from the recipe `source`: admission, chunk schedule,
    decode buckets and all) with only the split changed to `chosen` (and policy full, the one policy with
    a split: every shipped recipe's), under the name the tables and the plot give it. Written in full:
    loading it gives `base` with the chosen split, nothing else changed: the config `vox profile`
    simulated and bounded for this split (voxcli/sim/split_search.py, bounds.py SplitBounds)."""
    from voxcli.config import recipe_toml

    origin = f"recipe {source}'s" if source else "a default (the model has no shipped recipe)"
    return "\n".join(
        [
            f"# written by `vox profile`: {model} on {gpu}, split chosen at a target load of "
            f"{rate:.1f} req/s",
            f"# every setting is {origin} except lm_sms and codec_sms (was {base.lm_sms}/"
            f"{base.codec_sms})" + (f" and --set {' '.join(sets)}" if sets else ""),
            f"# backbone {chosen.lm_frames_s:.0f} frames/s at batch {chosen.lm_batch:.1f}; codec "
            f"{chosen.codec_chunks_s:.0f} chunks/s at batch {chosen.codec_batch:.1f}",
            f"# split {chosen.described}",
            recipe_toml(base.replace(policy="full", lm_sms=chosen.lm_sms, codec_sms=chosen.codec_sms)),
        ]
    )


def summary_dict(points: list[SplitPoint], chosen: SplitPoint, rate: float) -> dict:
    return {"target_rps": rate, "chosen_split": chosen.name, "chosen": asdict(chosen),
            "splits": [asdict(p) for p in points]}

"""`--placement`: which role each GPU (replica) of a scale-out has (`vox serve`, `vox batch`).

    both=1,lm=2,codec=1    one replica running both stages, two LM-only replicas sharing one codec-only one
    auto                   the best placement `vox profile --gpus N --no-simulate` ranks for the model and
                           workload over N GPUs (N = --replicas), from the throughput model (profile.py)

A group of LM-only replicas shares the codec-only replicas (each request's chunks go to one of them), so
LM-only and codec-only come together or not at all. Counts are ASCII digits. Parse errors are one sentence
naming the flag, before anything loads; whether the counts fit the Ray cluster is `voxcli.cluster.fit`'s
check, before anything is deployed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from voxcli.errors import VoxError

ROLE_NAMES = ("both", "lm", "codec")
_ASCII_COUNT = re.compile(r"[0-9]{1,18}")  # bounded digits; what fits the cluster is checked later
ACCEPTED = "role=count pairs over both, lm, codec (e.g. both=1,lm=2,codec=1), or auto"


@dataclass(frozen=True)
class Placement:
    both: int = 0
    lm: int = 0
    codec: int = 0

    @property
    def replicas(self) -> int:
        return self.both + self.lm + self.codec

    def describe(self) -> str:
        return ",".join(f"{name}={n}" for name, n in zip(ROLE_NAMES, (self.both, self.lm, self.codec),
                                                          strict=True) if n)


def _bad(text: str, why: str) -> VoxError:
    return VoxError(f"--placement {text!r} {why}; give {ACCEPTED}.", 2)


def parse_placement(text: str) -> Placement | None:
    """The placement `text` names, or None for `auto` (resolved later by `auto_placement`)."""
    raw = text.strip()
    if raw == "auto":
        return None
    counts: dict[str, int] = {}
    for part in (p.strip() for p in raw.split(",")):
        name, eq, value = part.partition("=")
        name = name.strip()
        if not eq or name not in ROLE_NAMES:
            raise _bad(text, f"has {part!r}, which is not role=count")
        if name in counts:
            raise _bad(text, f"names {name} twice")
        digits = value.strip()
        if digits.startswith("-") and _ASCII_COUNT.fullmatch(digits[1:]):
            raise _bad(text, f"gives {name} a negative count")
        # ASCII digits only: int() also reads "1_0" as 10 and other scripts' digits ("١") as theirs
        if not _ASCII_COUNT.fullmatch(digits):
            raise _bad(text, f"gives {name} the count {digits!r}, not a whole number in ASCII digits")
        counts[name] = int(digits)
    p = Placement(**counts)
    if p.replicas < 1:
        raise _bad(text, "places no replica")
    if (p.lm > 0) != (p.codec > 0):
        raise _bad(text, "has LM-only replicas without a codec-only one or the other way round (they "
                         "serve together)")
    return p


def auto_placement(model: str, gpu: str, gpus: int, workload: str = "libritts") -> tuple[Placement, float]:
    """The best placement over `gpus` GPUs for `model` on the `gpu` cost profile and its predicted req/s."""
    ranked = ranked_placements(model, gpu, gpus, workload)
    best = ranked[0]
    return Placement(best.both, best.lm_only, best.codec_only), best.rps


def ranked_placements(model: str, gpu: str, gpus: int, workload: str = "libritts",
                      max_decode_batch: int | None = None) -> list:
    """`vox profile --gpus N --no-simulate`'s ranking (profile.Placement, best first); `max_decode_batch`:
    the same model for engines capped at that many running rows (a measurement's `--set max_running`)."""
    from voxcli.bench.workloads import estimate_frames, load_workload, mean_chunks
    from voxcli.config import ConfigError, recipe_path
    from voxcli.models.registry import find_sim_model, sim_spec_for
    from voxcli.profile import (
        LoadShape,
        choose_split,
        max_sustainable_rate,
        rank_placements,
        role_throughputs,
        split_points,
    )
    from voxcli.sim.cost import CostProfile

    if not gpu:
        raise VoxError("--placement auto needs --gpu (the cost profile it ranks placements on).", 2)
    found = find_sim_model(model)
    try:
        path = recipe_path(f"gpus/{found[1].gpu_profile.format(gpu=gpu) if found else gpu}")
    except ConfigError:
        raise VoxError(f"--placement auto: no cost profile for --gpu {gpu!r}; use h100, h200 or b200.",
                       2) from None
    prof = CostProfile.from_toml(path)
    utts = load_workload(workload)
    sim = sim_spec_for(model)
    frames = sum(estimate_frames(u.text, sim.frame_rate) for u in utts) / len(utts)
    cap = {} if max_decode_batch is None else {"max_decode_batch": max_decode_batch}
    shape = LoadShape(frames_per_request=frames,
                      chunks_per_request=mean_chunks(utts, sim.chunk.first, sim.chunk.steady, sim.frame_rate),
                      **cap)
    chosen = choose_split(split_points(prof, max_sustainable_rate(prof, shape), shape))
    return rank_placements(role_throughputs(prof, chosen, shape), gpus)

"""`--placement auto`: the best placement of roles over N GPUs for a model and workload, ranked by the
throughput model (voxcli/sim/splits.py) on a calibrated cost profile, as `vox profile --gpus N --no-simulate`
ranks them."""

from __future__ import annotations

from voxcli.errors import VoxError
from voxcli.placement import Placement


def auto_placement(model: str, gpu: str, gpus: int, workload: str = "libritts") -> tuple[Placement, float]:
    """The best placement over `gpus` GPUs for `model` on the `gpu` cost profile and its predicted req/s."""
    ranked = ranked_placements(model, gpu, gpus, workload)
    best = ranked[0]
    return Placement(best.both, best.lm_only, best.codec_only), best.rps


def ranked_placements(model: str, gpu: str, gpus: int, workload: str = "libritts",
                      max_decode_batch: int | None = None) -> list:
    """`vox profile --gpus N --no-simulate`'s ranking (splits.Placement, best first); `max_decode_batch`:
    the same model for engines capped at that many running rows (a measurement's `--set max_running`)."""
    from voxcli.bench.workloads import estimate_frames, load_workload, mean_chunks
    from voxcli.config import ConfigError
    from voxcli.models.registry import sim_spec_for
    from voxcli.sim.cost import CostProfile
    from voxcli.sim.splits import (
        LoadShape,
        choose_split,
        gpu_profile_path,
        max_sustainable_rate,
        rank_placements,
        role_throughputs,
        split_points,
    )

    if not gpu:
        raise VoxError("--placement auto needs --gpu (the cost profile it ranks placements on).", 2)
    try:
        path = gpu_profile_path(model, gpu)
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

"""`vox profile` on a CUDA machine (no --gpu): each stage of the real model program timed per batch bucket
on each SM partition (green contexts through `voxcli.engine.partitions`), as a cost profile the simulator
reads (voxcli/sim/cost.py layout) and the TOML file `vox profile` writes it to. Measurement, so it lives
here; what the profile is then used for (the split, the placements) is the simulation's
(voxcli/sim/splits.py)."""

from __future__ import annotations

from pathlib import Path

from voxcli.sim.splits import GRANULARITY


def measure_cuda_profile(
    model: str,
    *,
    decode_batches: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64, 128, 256),
    codec_batches: tuple[int, ...] = (1, 2, 4, 8, 16, 32),
    prompt_tokens: int = 64,
    repeats: int = 5,
    dtype: str = "bfloat16",
) -> dict:
    """Time each stage of the real model program on a CUDA device: decode per batch on the whole device
    and on every backbone partition (total - 8k SMs), the codec per batch on the whole device and on every
    codec partition (8k SMs), prefill on the whole device. Returns a CostProfile dict (cost.py layout).

    Only runs on a CUDA machine: torch.cuda and the model are imported here, never at module import."""
    import time

    import numpy as np
    import torch

    from voxcli.engine.partitions import build_partitions
    from voxcli.models import load_model
    from voxcli.models.base import CodecItem, Row, SynthesisRequest

    if not torch.cuda.is_available():
        raise RuntimeError(
            "measuring a profile needs a CUDA device; on this machine use --gpu h100|h200|b200 "
            "to load a calibrated profile instead"
        )
    props = torch.cuda.get_device_properties(0)
    total = int(props.multi_processor_count)
    program = load_model(model, "cuda", dtype)
    spec = program.spec
    max_rows = max(decode_batches)
    page = 16
    pages_per_row = (prompt_tokens + 2 * len(decode_batches) * repeats + 64) // page + 1
    program.init_kv(max_rows * pages_per_row + 1, page)
    program.init_codec_slots(max(codec_batches))
    text = " ".join(["hello"] * max(1, prompt_tokens // 2))
    prompt = program.prepare(SynthesisRequest(text=text, voice=(spec.voices[0] if spec.voices else None)))

    def rows(n: int) -> list[Row]:
        return [
            Row(request_id=i, prompt=prompt, pages=list(range(i * pages_per_row, (i + 1) * pages_per_row)))
            for i in range(n)
        ]

    def timed(fn, stream) -> float:
        with torch.cuda.stream(stream):
            fn()  # warm-up (allocations, autotuning)
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            for _ in range(repeats):
                fn()
            torch.cuda.synchronize()
        return (time.perf_counter() - t0) / repeats * 1e3

    codes = np.zeros((spec.chunk.steady, spec.codebooks), dtype=np.int64)

    def codec_fn(n: int):
        items = [CodecItem(slot=i, codes=codes, first=True, last=False) for i in range(n)]
        return lambda: program.codec(items)

    def decode_fn(n: int):
        rs = rows(n)
        program.prefill(rs)
        return lambda: program.decode(rs)

    whole = torch.cuda.current_stream()
    decode = {
        "batch": list(decode_batches),
        "ms": [timed(decode_fn(b), whole) for b in decode_batches],
        "sm_ms": {},
    }
    codec = {
        "batch": list(codec_batches),
        "ms": [timed(codec_fn(b), whole) for b in codec_batches],
        "frames_ref": spec.chunk.steady,
        "sm_ms": {},
    }
    for c in range(GRANULARITY, total - GRANULARITY + 1, GRANULARITY):
        lanes = build_partitions(total - c - (total % GRANULARITY), c)
        if not lanes.green:
            raise RuntimeError(
                f"green contexts are unavailable here ({lanes.reason}); cannot measure SM splits"
            )
        decode["sm_ms"][str(lanes.lm_sms)] = [timed(decode_fn(b), lanes.lm) for b in decode_batches]
        codec["sm_ms"][str(lanes.codec_sms)] = [timed(codec_fn(b), lanes.codec) for b in codec_batches]
        lanes.close()
    one = rows(1)
    pre_ms = timed(lambda: program.prefill(one), whole)
    return {
        "gpu": {"name": props.name, "sms": total, "interference": 1.0},
        "stages": {
            "decode": decode,
            "codec": codec,
            "prefill": {"batch": [1], "ms": [pre_ms], "per_token_ms": 0.0},
        },
    }


def profile_toml(data: dict) -> str:
    """A measured profile (`measure_cuda_profile`'s dict) as the TOML text of a recipes/gpus/ file."""
    from voxcli.models.sim_profile import toml_value

    lines = ["[gpu]"] + [f"{k} = {toml_value(v)}" for k, v in data["gpu"].items()]
    for stage, table in data["stages"].items():
        lines += ["", f"[stages.{stage}]"]
        lines += [f"{k} = {toml_value(v)}" for k, v in table.items() if not isinstance(v, dict)]
        for k, v in table.items():
            if isinstance(v, dict):
                lines += ["", f"[stages.{stage}.{k}]"] + [f"{kk} = {toml_value(vv)}" for kk, vv in v.items()]
    return "\n".join(lines) + "\n"


def write_profile(data: dict, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(profile_toml(data))
    return path

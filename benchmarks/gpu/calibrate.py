"""gpu_check's calibration step: per-batch ms of the graphed stages at >= 3 SM counts and the whole device,
interference, prefill -> recipes/gpus/<gpu>.measured.toml (read by `vox bench --executor sim --gpu
<gpu>.measured`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from benchmarks.gpu.cuda_util import capture, timed
from benchmarks.gpu.results import STATE

ROOT = Path(__file__).resolve().parents[2]


def green_stream(drv: Any, groups: list[Any], priority: int, created: list) -> Any:
    """A torch stream on a green context made of `groups` (outputs of one split)."""
    import torch

    from voxcli.engine.partitions import check, handle_int

    desc = check(drv, drv.cuDevResourceGenerateDesc(groups, len(groups)), "cuDevResourceGenerateDesc")
    dev = check(drv, drv.cuDeviceGet(0), "cuDeviceGet")
    ctx = check(drv, drv.cuGreenCtxCreate(desc, dev, drv.CUgreenCtxCreate_flags.CU_GREEN_CTX_DEFAULT_STREAM),
                "cuGreenCtxCreate")
    created.append(("ctx", ctx))
    s = check(drv, drv.cuGreenCtxStreamCreate(ctx, drv.CUstream_flags.CU_STREAM_NON_BLOCKING, priority),
              "cuGreenCtxStreamCreate")
    created.append(("stream", s))
    return torch.cuda.ExternalStream(handle_int(s), device=0)


def s_calibrate(args: Any, out: Path) -> tuple[bool | None, dict]:
    import torch
    from voxcli.models.base import Row, SynthesisRequest

    from voxcli.bench.measured import Measurements, write_profile
    from voxcli.engine.partitions import check, destroy_handles, load_driver

    program, streams = STATE.get("program"), STATE["streams"]
    if program is None:
        return None, {"reason": "engine_graphs did not run (no program on the device)"}
    total = streams.total_sms
    drv = load_driver()
    dev = check(drv, drv.cuDeviceGet(0), "cuDeviceGet")
    sm = check(drv, drv.cuDeviceGetDevResource(dev, drv.CUdevResourceType.CU_DEV_RESOURCE_TYPE_SM), "res")
    g = max(streams.granularity) if all(streams.granularity) else 8
    groups, made, _rest = check(drv, drv.cuDevSmResourceSplitByCount(total // g, sm, 0, g), "split")
    groups = list(groups)[:int(made)]
    counts = [c for c in (16, 32, 64, 96) if c // g <= len(groups)]
    created: list = []
    stage_streams = {c: green_stream(drv, groups[:c // g], 0, created) for c in counts}
    stage_streams[total] = torch.cuda.Stream()
    dec_b, cod_b, ctx = [1, 8, 64, 256], [1, 8, 32], 64
    ps, dev_t = program.page_size, torch.device("cuda", 0)

    def stage(kind: str, bucket: int) -> Any:
        """The program's own graph stage (as the executor captures it), on a lane of its own."""
        gs = program.graph_stage(kind, bucket, "calibrate", dev_t)
        if gs is None or (kind == "decode" and gs.plan_context is None):
            raise RuntimeError(f"the program offers no calibratable {kind} graph stage")
        return gs

    decode: dict[int, list[float]] = {c: [] for c in stage_streams}
    codec: dict[int, list[float]] = {c: [] for c in stage_streams}
    context_ms: dict[int, dict[int, float]] = {64: {}, 1024: {}}
    try:
        for b in dec_b:
            gs = stage("decode", b)
            for c, st in stage_streams.items():
                graph = capture(gs, st)
                with torch.cuda.stream(st):
                    gs.plan_context(ctx)
                decode[c].append(timed(graph.replay, st, reps=5))
                if c == total and b in (8, 64):
                    context_ms[64][b] = decode[c][-1]
                    with torch.cuda.stream(st):
                        gs.plan_context(1024)
                    context_ms[1024][b] = timed(graph.replay, st, reps=5)
                del graph
        for b in cod_b:
            gs = stage("codec", b)
            for c, st in stage_streams.items():
                graph = capture(gs, st)
                codec[c].append(timed(graph.replay, st, reps=5))
                del graph
        # Interference: real decode (64 rows) and codec (8 chunks) graphs on two plain streams at once.
        a, bstream = torch.cuda.Stream(), torch.cuda.Stream()
        dgs, cgs = stage("decode", 64), stage("codec", 8)
        dg, cg = capture(dgs, a), capture(cgs, bstream)
        with torch.cuda.stream(a):
            dgs.plan_context(ctx)
        solo_d, solo_c = timed(dg.replay, a), timed(cg.replay, bstream)
        torch.cuda.synchronize()
        n = 20
        ev = [torch.cuda.Event(enable_timing=True) for _ in range(4)]
        ev[0].record(a)
        ev[2].record(bstream)
        for _ in range(n):
            with torch.cuda.stream(a):
                dg.replay()
            with torch.cuda.stream(bstream):
                cg.replay()
        ev[1].record(a)
        ev[3].record(bstream)
        torch.cuda.synchronize()
        both_d, both_c = ev[0].elapsed_time(ev[1]) / n, ev[2].elapsed_time(ev[3]) / n
        interference = max(1.0, (both_d / solo_d + both_c / solo_c) / 2)
        # Prefill: eager, one prompt of each length, on the whole device.
        prefill = {}
        for sentences in (1, 12):
            text = " ".join(["Hello there, this is a long enough sentence."] * sentences)
            prompt = program.prepare(SynthesisRequest(text=text, voice="serena", fixed_frames=4))
            pages = list(range(-(-program.kv_tokens(prompt) // ps)))
            prefill[prompt.length] = timed(
                lambda p=prompt, pg=pages: program.prefill([Row(request_id=0, prompt=p, pages=pg, slot=0)]),
                stage_streams[total], reps=3)
    finally:
        torch.cuda.synchronize()
        destroy_handles(drv, created)
    props = STATE["props"]
    name = next((n for n in ("h200", "h100", "b200", "a100", "l40s", "l4")
                 if n in props.name.lower().replace(" ", "")), props.name.lower().split()[-1])
    m = Measurements(gpu=name, device_name=props.name, sms_total=total, batch_decode=dec_b, decode=decode,
                     batch_codec=cod_b, codec=codec, codec_frames=program.limits.max_chunk_frames,
                     context=ctx, prefill_ms=prefill, interference=round(interference, 4),
                     context_ms=context_ms,
                     notes=[f"SM counts {counts} from one split into groups of {g}",
                            f"lanes: {streams.summary()}",
                            f"interference: decode {solo_d:.3f} -> {both_d:.3f} ms, codec {solo_c:.3f} -> "
                            f"{both_c:.3f} ms on two plain streams"])
    path, _ = write_profile(m, ROOT / "recipes" / "gpus")
    (out / path.name).write_text(path.read_text())
    STATE["profile"] = str(path.relative_to(ROOT))
    return None, {"profile": STATE["profile"], "sm_counts": counts + [total], "decode_ms": decode,
                  "codec_ms": codec, "context_ms": context_ms, "interference": m.interference,
                  "prefill_ms": prefill}

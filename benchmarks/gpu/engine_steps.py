"""gpu_check's engine steps: the engine's decode and codec graphs on the random 1.7B program at 3 buckets
(engine_graphs), and the urgent codec graph's latency beside busy background lanes (priority)."""

from __future__ import annotations

import statistics
import time
from typing import Any

from benchmarks.gpu.cuda_util import capture, engine_config, timed
from benchmarks.gpu.results import STATE


def s_engine_graphs(args: Any) -> tuple[bool, dict]:
    import numpy as np
    import torch
    from voxcli.models.base import CodecItem, Row, SynthesisRequest

    from benchmarks.gpu.random_program import random_program
    from voxcli.engine.engine import resource_limits
    from voxcli.engine.executors.base import Work
    from voxcli.engine.executors.cuda import CudaExecutor

    t0 = time.perf_counter()
    program = random_program("1.7b", "cuda", torch.bfloat16)
    torch.cuda.synchronize()
    build_s = round(time.perf_counter() - t0, 1)
    cfg = engine_config("full", True, args.lm_sms, args.codec_sms)
    if cfg.chunk is None:  # as the engine does: no recipe schedule -> the model's own
        cfg = cfg.replace(chunk=program.spec.chunk)
    program.set_limits(resource_limits(cfg))
    program.init_kv(cfg.kv_pages, cfg.kv_page_size)
    program.init_codec_slots(cfg.codec_slots)
    t0 = time.perf_counter()
    ex = CudaExecutor(program, cfg, streams=STATE["streams"])
    capture_s = round(time.perf_counter() - t0, 1)
    STATE.update(program=program, executor=ex, config=cfg)
    # A real batch: prefill (eager, whole device), graphed decode steps, one graphed codec chunk each.
    rows, page = [], 0
    for i in range(3):
        prompt = program.prepare(SynthesisRequest(text="Hello there. This is a check.", voice="serena",
                                                  seed=i, fixed_frames=12))
        need = -(-program.kv_tokens(prompt) // cfg.kv_page_size)
        rows.append(Row(request_id=i, prompt=prompt, pages=list(range(page, page + need)), slot=i))
        page += need

    def run(work: Work) -> list[Any]:
        ex.launch(work)
        (done,) = ex.wait(None)
        if done.error is not None:
            raise done.error
        return done.result

    run(Work("lm", "prefill", rows, bucket=len(rows), tokens=sum(r.prompt.length for r in rows)))
    frames: list[list[np.ndarray]] = [[] for _ in rows]
    for _ in range(6):
        outs = run(Work("lm", "decode", rows, bucket=cfg.decode_buckets[1]))
        for i, o in enumerate(outs):
            frames[i].append(o.frame)
    codes = np.stack(frames[0])
    if codes.shape != (6, 16) or codes.min() < 0 or codes.max() >= 2048:
        return False, {"error": f"decode frames out of range: {codes.shape}, {codes.min()}..{codes.max()}"}
    items = [CodecItem(slot=i, codes=np.stack(f), first=True, last=False) for i, f in enumerate(frames)]
    wavs = run(Work("background", "codec", items, bucket=cfg.background_buckets[-1]))
    finite = all(np.isfinite(w).all() and w.size == 6 * program.spec.samples_per_frame for w in wavs)
    # Replay time of every captured graph on its own lane stream (inputs: the last loaded batch).
    replay = {}
    plan = ex.plan
    for lane in plan.lanes:
        for stage, buckets in plan.stages[lane]:
            for b in buckets:
                cap = ex.graphs.get((plan.partition[lane], stage, b))
                if cap is not None:
                    replay[f"{lane}/{stage}/{b}"] = timed(cap.graph.replay, ex.stream_of[lane], reps=5)
    STATE["engine_graphs"] = replay
    return bool(finite), {"build_s": build_s, "capture_s": capture_s, "graphs": len(ex.graphs),
                          "eager_keys": ex.eager_keys, "replay_ms": replay}


def s_priority(args: Any) -> tuple[bool | None, dict]:
    import torch

    ex = STATE.get("executor")
    if ex is None:
        return None, {"reason": "engine_graphs did not run"}
    plan, streams = ex.plan, STATE["streams"]
    big_decode = ex.graphs[(plan.partition["lm"], "decode", plan.largest("lm", "decode"))]
    big_codec = ex.graphs[(plan.partition["background"], "codec", plan.largest("background", "codec"))]
    urgent = ex.graphs[(plan.partition["urgent"], "codec", 1)]
    least, greatest = streams.priorities["codec"], streams.priorities["device"]
    low = torch.cuda.Stream(priority=least)
    # The same urgent stage captured on a least-priority whole-device stream, for the cross test.
    low_graph = capture(urgent.stage, low)

    def latency(graph: Any, stream: Any, busy: bool) -> float:
        runs = []
        for _ in range(5):
            torch.cuda.synchronize()
            if busy:
                with torch.cuda.stream(ex.stream_of["lm"]):
                    for _ in range(8):
                        big_decode.graph.replay()
                with torch.cuda.stream(ex.stream_of["background"]):
                    for _ in range(8):
                        big_codec.graph.replay()
                time.sleep(0.002)  # let both lanes fill the device first
            e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            with torch.cuda.stream(stream):
                e0.record(stream)
                graph.replay()
                e1.record(stream)
            torch.cuda.synchronize()
            runs.append(e0.elapsed_time(e1))
        return round(statistics.median(runs), 3)

    res = {"idle": latency(urgent.graph, streams.device, False),
           "busy_urgent_stream": latency(urgent.graph, streams.device, True),
           "busy_replayed_on_low": latency(urgent.graph, low, True),
           "busy_low_capture_on_urgent": latency(low_graph, streams.device, True),
           "priorities": [least, greatest]}
    res["priority_gain"] = round(res["busy_replayed_on_low"] / max(res["busy_urgent_stream"], 1e-6), 2)
    STATE["priority"] = res
    return None if not streams.green else True, res

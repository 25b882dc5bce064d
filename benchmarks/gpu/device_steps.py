"""gpu_check's device steps: env, partitions (green contexts), SM census, graphs on the lane streams,
FlashInfer; each `s_NAME(args) -> (ok, data)` (ok None: a measurement, or a check that could not run)."""

from __future__ import annotations

from typing import Any

from benchmarks.gpu.cuda_util import lane_streams, timed
from benchmarks.gpu.results import STATE


def s_env(args: Any) -> tuple[bool, dict]:
    import torch

    props = torch.cuda.get_device_properties(0)
    data = {"torch": torch.__version__, "torch_cuda": torch.version.cuda, "device": props.name,
            "sms": props.multi_processor_count, "cc": f"{props.major}.{props.minor}",
            "memory_gib": round(props.total_memory / 2**30, 1)}
    try:
        import cuda.bindings
        import cuda.bindings.driver as drv

        data["cuda_bindings"] = getattr(cuda.bindings, "__version__", "?")
        data["driver_version"] = drv.cuDriverGetVersion()[1]
    except Exception as e:
        data["cuda_bindings"] = f"unavailable: {e}"
    data["torch_priority_range"] = list(torch.cuda.Stream.priority_range())
    try:
        from voxcli.models.paged_attention import load_flashinfer

        fi = load_flashinfer()
        data["flashinfer"] = getattr(fi, "__version__", "?") if fi is not None else "absent"
    except Exception as e:
        data["flashinfer"] = f"error: {e}"
    STATE["props"] = props
    return True, data


def s_partitions(args: Any) -> tuple[bool | None, dict]:
    import torch

    from voxcli.engine.partitions import (
        build_partitions,
        check,
        device_granularity,
        load_driver,
        valid_layouts,
    )

    data: dict[str, Any] = {}
    torch.zeros(1, device="cuda")  # the primary context must exist before green contexts
    try:
        drv = load_driver()
        data["granularity"] = device_granularity(drv, 0)
        dev = check(drv, drv.cuDeviceGet(0), "cuDeviceGet")
        sm = check(drv, drv.cuDeviceGetDevResource(dev, drv.CUdevResourceType.CU_DEV_RESOURCE_TYPE_SM), "res")
        data["smCount"] = int(sm.sm.smCount)
        r = drv.cuDevSmResourceSplitByCount(16, sm, 0, 8)
        if r[0] == drv.CUresult.CUDA_SUCCESS:
            data["probe_16x8_made"], data["probe_16x8_remainder"] = int(r[2]), int(r[3].sm.smCount)
        else:
            data["probe_16x8"] = f"error {int(r[0])}"
    except Exception as e:
        data["probe_error"] = f"{type(e).__name__}: {e}"
    streams = build_partitions(args.lm_sms, args.codec_sms, device_index=0, split=True)
    STATE["streams"] = streams
    g = streams.granularity
    data.update(green=streams.green, lm_sms=streams.lm_sms, codec_sms=streams.codec_sms,
                priorities=streams.priorities, reason=streams.reason, granularity_used=g,
                granularity_source=streams.granularity_source,
                valid_layouts=valid_layouts(streams.total_sms, *g)[:8] if all(g) else None)
    if not streams.green:
        return None, {**data, "reason": f"no green contexts: {streams.reason}"}
    return (streams.lm_sms, streams.codec_sms) == (streams.plan.lm_sms, streams.plan.codec_sms), data


def s_sm_census(args: Any) -> tuple[bool | None, dict]:
    import torch

    try:
        import triton
        import triton.language as tl
    except Exception as e:
        return None, {"reason": f"triton unavailable: {e}"}

    @triton.jit
    def smid_kernel(out_ptr, spin: tl.constexpr):  # noqa: ANN001, ANN202
        pid = tl.program_id(0)
        sm = tl.inline_asm_elementwise("mov.u32 $0, %smid;", "=r", [], dtype=tl.int32, is_pure=False, pack=1)
        acc = pid.to(tl.float32)
        for _ in range(spin):
            acc = acc * 1.0000001 + 1.0
        tl.store(out_ptr + pid, sm + (acc < 0).to(tl.int32))

    n = 4 * STATE["props"].multi_processor_count
    sets = {}
    for name, stream in lane_streams().items():
        out = torch.full((n,), -1, dtype=torch.int32, device="cuda")
        with torch.cuda.stream(stream):
            smid_kernel[(n,)](out, spin=20000)
        stream.synchronize()
        sets[name] = set(out.tolist())
    counts = {k: len(v) for k, v in sets.items()}
    return None, {"distinct_sms": counts, "backbone_codec_disjoint": not (sets["backbone"] & sets["codec"])}


def s_graphs(args: Any) -> tuple[bool, dict]:
    import torch

    torch.manual_seed(0)
    ws = [torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16) * 0.02 for _ in range(4)]

    def mlp(x):  # noqa: ANN001, ANN202
        for w in ws:
            x = torch.relu(x @ w)
        return x

    data, graphs = {}, {}
    for name, st in lane_streams().items():
        x = torch.randn(64, 4096, device="cuda", dtype=torch.bfloat16)
        with torch.cuda.stream(st):
            for _ in range(2):
                mlp(x)
        st.synchronize()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, pool=torch.cuda.graph_pool_handle(), stream=st):
            y = mlp(x)
        graphs[name] = (g, x, y)
        with torch.cuda.stream(st):
            ref = mlp(x)
            g.replay()
        st.synchronize()
        torch.testing.assert_close(y, ref)
        data[name] = {"eager_ms": timed(lambda x=x: mlp(x), st), "replay_ms": timed(g.replay, st)}
    refs = {k: v[2].clone() for k, v in graphs.items()}
    for name, st in lane_streams().items():  # all lanes at once, own pools: still right
        with torch.cuda.stream(st):
            graphs[name][0].replay()
    torch.cuda.synchronize()
    for k, (_, _, y) in graphs.items():
        torch.testing.assert_close(y, refs[k])
    # A graph keeps the partition it was captured on: a backbone graph replayed on the codec stream.
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    ls, cross = lane_streams(), {}
    pairs = (("backbone", "backbone"), ("backbone", "codec"), ("codec", "codec"), ("device", "codec"))
    for cap, rep in pairs:
        with torch.cuda.stream(ls[cap]):
            a @ a
        ls[cap].synchronize()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, stream=ls[cap]):
            a @ a
        cross[f"{cap}->{rep}"] = timed(g.replay, ls[rep])
    data["matmul8192_cross_replay_ms"] = cross
    return True, data


def s_flashinfer(args: Any) -> tuple[bool | None, dict]:
    import torch
    from voxcli.models import paged_attention as A

    if A.load_flashinfer() is None:
        try:  # why not: the import's own error (paged_attention keeps it to itself)
            import flashinfer  # noqa: F401
            why = "load_flashinfer() found none"
        except Exception as e:
            why = f"{type(e).__name__}: {e}"
        return None, {"reason": f"flashinfer not importable: {why}"}
    kw = dict(num_qo_heads=16, num_kv_heads=8, head_dim=128, page_size=16, max_pages_per_row=64,
              scratch_page=1023, device="cuda", dtype=torch.bfloat16)
    st = STATE["streams"].lm
    lane = A.LaneAttention("check", backend="flashinfer", **kw)
    attn, ref = lane[8], A.TorchPagedDecode(8, **kw)
    kv = torch.randn(1024, 2, 16, 8, 128, device="cuda", dtype=torch.bfloat16)
    q = torch.randn(8, 16, 128, device="cuda", dtype=torch.bfloat16)
    with torch.cuda.stream(st):
        attn.prime()
        for _ in range(2):
            attn.run(q, kv)
    st.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g, stream=st):
        out = attn.run(q, kv)
    errs = []
    for lens in ([30 + 20 * i for i in range(8)], [1000 - 90 * i for i in range(8)]):
        tables = [list(range(i * 64, i * 64 + 64)) for i in range(8)]
        with torch.cuda.stream(st):
            attn.plan(tables, lens)
            ref.plan(tables, lens)
            g.replay()
            want = ref.run(q, kv)
        st.synchronize()
        errs.append((out.float() - want.float()).abs().max().item())
    return max(errs) < 2e-2, {"max_abs_err": errs, "workspace_mib": round(lane.workspace.numel() / 2**20)}

#!/usr/bin/env python3
"""Host CPU time to prepare one graphed decode launch (the stage's static-buffer loads + the attention
plan inputs), the per-row loops of before vs the vectorised code of now, side by side in one run.

    nice -n 10 .venv/bin/python -m benchmarks bench_graph_load [--bucket 256] [--context 1024] [--reps 30]

Real Qwen3-TTS 1.7B dimensions (hidden 2048, codec vocab 3072) on a program whose weights stay on the
meta device (loads never touch weights), `bucket` rows each `context` KV positions deep in pages of 16,
device "cpu": the staging buffers are the static buffers, so what is timed is exactly the host work
(numpy/torch calls, Python per row); on a GPU the uploads add a few non-blocking copy launches. Time is
`time.thread_time()` (this thread's CPU time: fair on a shared machine), median of `reps`.

`now: first` is a new batch composition (row state gathered row by row, settings and text term written),
`steady` a step whose rows are the previous step's rows in the same order (their state is that step's
outputs: one copy per field; settings and a settled text term already in place);
`ahead` a steady step whose host inputs `prepare_next` made while the previous step ran on the device
(its own cost, `(prepare)`, overlaps the GPU step); `ratio` = before / ahead. `before` is the load/plan
code before this script's change (kept below, the same behaviour, as the reference); `now` is
`DecodeGraphStage.load`. Both are timed for the torch attention backend (page-table grid) and for the
FlashInfer plan inputs (indptr / indices / last page lengths; the wrapper's own plan() is replaced by a
no-op: it is FlashInfer's C++ work, not ours).
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parents[1]

import torch  # noqa: E402
from voxcli.models.base import Prompt, ResourceLimits, Row, SamplingParams  # noqa: E402
from voxcli.models.paged_attention import FlashInferPagedDecode  # noqa: E402
from voxcli.models.qwen3_tts.config import GenerationDefaults, parse_config  # noqa: E402
from voxcli.models.qwen3_tts.graph_stages import DecodeGraphStage  # noqa: E402
from voxcli.models.qwen3_tts.program import Qwen3TTSProgram, RowState  # noqa: E402
from voxcli.models.qwen3_tts.talker import Qwen3TTSWeights  # noqa: E402
from voxcli.models.qwen3_tts.tiny import generation_config, make_config, tiny_tokenizer  # noqa: E402

PAGE = 16


# --- the reference: per-row loops as they were ---------------------------------------------------------
def before_load(stage: DecodeGraphStage, rows: list[Row]) -> None:
    h = stage.s.host
    for k in ("h", "c0", "text", "seen", "fixed", "q_pos", "top_k", "sub_top_k"):
        h[k].zero_()
    for k in ("penalty", "temperature", "top_p", "sub_temperature", "sub_top_p"):
        h[k].fill_(1.0)
    h["greedy"].fill_(True)
    h["sub_greedy"].fill_(True)
    h["generated"].fill_(2)
    h["uniforms"].fill_(0.5)
    for i, r in enumerate(rows):
        st = r.state
        h["uniforms"][i] = torch.rand(16, generator=st.gen, dtype=torch.float64)
        sp = st.sampling
        h["greedy"][i], h["temperature"][i], h["top_k"][i], h["top_p"][i] = (
            sp.greedy, sp.temperature, sp.top_k, sp.top_p)
        h["sub_greedy"][i], h["sub_temperature"][i], h["sub_top_k"][i], h["sub_top_p"][i] = (
            sp.sub_greedy, sp.sub_temperature, sp.sub_top_k, sp.sub_top_p)
        h["penalty"][i], h["generated"][i], h["fixed"][i] = sp.repetition_penalty, st.generated, st.fixed
        h["q_pos"][i, 0] = r.kv_len
        h["h"][i], h["c0"][i], h["seen"][i] = st.h, st.c0, st.seen
    stage.s.upload()
    d = stage.s.dev
    for i, r in enumerate(rows):
        st = r.state
        t = st.generated - 1
        d["text"][i].copy_(st.trailing[t] if t < st.trailing.shape[0] else st.tts_pad, non_blocking=True)
    before_plan(stage.attn, [r.pages for r in rows], [r.kv_len + 1 for r in rows])


def before_plan(a, page_tables: list[list[int]], kv_lens: list[int]) -> None:  # noqa: ANN001
    tables, lens = [], []
    for pages, n in zip(page_tables, kv_lens, strict=True):
        need = -(-n // a.page_size)
        if n < 1 or need > len(pages) or need > a.max_pages:
            raise ValueError("row does not fit")
        tables.append(list(pages[:need]))
        lens.append(n)
    pad = a.bucket - len(tables)
    tables, lens = tables + [[a.scratch_page]] * pad, lens + [1] * pad
    w = a._write_host
    for i, (pages, n) in enumerate(zip(tables, lens, strict=True)):
        w[i] = pages[(n - 1) // a.page_size]
        w[a.bucket + i] = (n - 1) % a.page_size
    a.write_page.copy_(w[:a.bucket], non_blocking=True)
    a.write_offset.copy_(w[a.bucket:], non_blocking=True)
    if isinstance(a, FlashInferPagedDecode):
        n = 0
        a._indptr_h[0] = 0
        for i, (pages, length) in enumerate(zip(tables, lens, strict=True)):
            a._indices_h[n:n + len(pages)] = torch.tensor(pages, dtype=torch.int32)
            n += len(pages)
            a._indptr_h[i + 1] = n
            a._last_h[i] = (length - 1) % a.page_size + 1
        return
    h = a._host
    h.fill_(a.scratch_page)
    grid = h[:a.bucket * a.max_pages].view(a.bucket, a.max_pages)
    for i, pages in enumerate(tables):
        grid[i, :len(pages)] = torch.tensor(pages, dtype=torch.long)
    h[a.bucket * a.max_pages:] = torch.tensor(lens, dtype=torch.long)
    a.page_table.copy_(grid, non_blocking=True)
    a.kv_len.copy_(h[a.bucket * a.max_pages:], non_blocking=True)


# --- setup -----------------------------------------------------------------------------------------------
def meta_program(size: str = "1.7b") -> Qwen3TTSProgram:
    tok = tiny_tokenizer()
    cfg = parse_config(make_config("custom_voice", False, size, tok))
    with torch.device("meta"):
        weights = Qwen3TTSWeights(cfg.talker)
    p = Qwen3TTSProgram(Path("meta"), cfg, GenerationDefaults.from_dict(generation_config()), weights, tok,
                        torch.device("cpu"), torch.bfloat16, f"meta-{size}")
    return p


def make_rows(p: Qwen3TTSProgram, n: int, context: int) -> list[Row]:
    H, V = p.cfg.talker.block.hidden_size, p.cfg.talker.vocab_size
    pages_per_row = -(-(context + 64) // PAGE)
    rows = []
    for i in range(n):
        sampling = p.resolve_sampling(SamplingParams(temperature=0.9 if i % 2 else None))
        bf16 = torch.bfloat16
        st = RowState(sampling=sampling, gen=torch.Generator().manual_seed(i),
                      seen=torch.zeros(V, dtype=torch.bool), generated=context - 20,
                      h=torch.randn(H).to(bf16), c0=torch.tensor(5), trailing=torch.randn(30, H).to(bf16),
                      tts_pad=torch.randn(H).to(bf16), limit=10_000, fixed=True)
        row = Row(request_id=i, prompt=Prompt(length=20, data=None, max_frames=10_000),
                  pages=list(range(i * pages_per_row, (i + 1) * pages_per_row)), kv_len=context, state=st)
        rows.append(row)
    p.page_size, p.scratch_page = PAGE, n * pages_per_row
    # The engine's bounds at the default recipe (engine.resource_limits): 4096-token prompts + 2048 frames.
    p.set_limits(ResourceLimits(max_kv_tokens_per_row=4096 + 2048 + 1, max_chunk_frames=24))
    return rows


def timed(fn, reps: int, setup=None) -> float:  # noqa: ANN001
    fn()  # warm
    out = []
    for _ in range(reps):
        if setup is not None:
            setup()  # not timed
        t0 = time.thread_time()
        fn()
        out.append(time.thread_time() - t0)
    return statistics.median(out) * 1e3


def _unstep(rows: list[Row]) -> None:
    """prepare_next prepares for the rows one step on; the benchmark's rows stay where they are, so move
    them on by one (kv_len) for the timed load to use it, and back after (uniform draws just advance)."""
    for r in rows:
        r.kv_len += 1
        r.state.generated += 1


def forget_batch(stage: DecodeGraphStage) -> None:
    """Make the next load a new batch composition (per-request caches stay: the requests are known)."""
    stage._last_ids, stage._carry, stage._text_settled = None, None, False


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bucket", type=int, default=256)
    ap.add_argument("--context", type=int, default=1024, help="KV positions per row")
    ap.add_argument("--reps", type=int, default=30)
    args = ap.parse_args()
    torch.set_num_threads(1)
    p = meta_program()
    rows = make_rows(p, args.bucket, args.context)
    print(f"one decode launch, bucket {args.bucket}, {len(rows)} rows at {args.context} KV positions, "
          f"real 1.7B dims; ms of thread CPU time (median of {args.reps})")
    print(f"{'attention plan':<16}{'before':>10}{'now: first':>12}{'steady':>10}{'ahead':>10}"
          f"{'(prepare)':>10}{'ratio':>9}")
    for backend in ("torch", "flashinfer"):
        p._lane_attention.clear()
        if backend == "flashinfer":
            def wrapper(ws, kv_layout, **kw):  # noqa: ANN001, ANN202
                return SimpleNamespace(plan=lambda *a, **k: None)

            fake = SimpleNamespace(BatchDecodeWithPagedKVCacheWrapper=wrapper)
            import voxcli.models.paged_attention as A

            A.load_flashinfer = lambda fake=fake: fake  # plan inputs only: FlashInfer's own plan is a no-op
        stage = DecodeGraphStage(p, args.bucket, torch.device("cpu"), backend)
        old = timed(lambda stage=stage: before_load(stage, rows), args.reps)
        first = timed(lambda stage=stage: stage.load(rows), args.reps, lambda s=stage: forget_batch(s))
        # Steady state: the rows' state is the previous step's outputs (finish() ran on this stage).
        host = {k: v.clone() for k, v in stage.out.items()}
        saved = [(r.kv_len, r.frames_emitted, r.state.generated) for r in rows]
        stage.finish(rows, host)
        for r, (kv, fe, gen) in zip(rows, saved, strict=True):  # keep the batch where it was
            r.kv_len, r.frames_emitted, r.state.generated = kv, fe, gen
        steady = timed(lambda stage=stage: stage.load(rows), args.reps)
        # Prepared ahead: prepare_next ran while the previous step was on the device (timed apart: it
        # overlaps the GPU); the launch then only copies what it made.
        ahead = timed(lambda stage=stage: stage.load(rows), args.reps,
                      lambda stage=stage: (stage.prepare_next(rows), _unstep(rows)))
        prep = timed(lambda stage=stage: stage.prepare_next(rows), args.reps)
        print(f"{backend:<16}{old:>10.2f}{first:>12.2f}{steady:>10.2f}{ahead:>10.2f}{prep:>10.2f}"
              f"{old / ahead:>8.1f}x")


if __name__ == "__main__":
    main()

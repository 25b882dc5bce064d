"""One short device run of the cuda backend: checks that gate, measurements that teach the simulator.

    PYTHONUNBUFFERED=1 python scripts/gpu_check.py --quick --out DIR     # <= 4 min on an H200
    PYTHONUNBUFFERED=1 python scripts/gpu_check.py --out DIR             # + SM census + calibration
    python scripts/gpu_check.py --plan [--quick]                         # the steps and budgets; CPU, seconds

Built for a scarce GPU lease: everything is built on the device (the model program is the real
Qwen3-TTS program with random real-size 1.7B weights drawn there, `benchmarks.gpu.random_program`; no
checkpoint is written or read), each step runs under a watchdog (`faulthandler.dump_traceback_later`:
a hung step dumps every thread's stack to DIR/watchdog.txt and ends the process), the run stops at the
first sticky CUDA error, DIR/gc.jsonl and DIR/summary.txt are rewritten after every step, a step is
skipped when its budget no longer fits the deadline, and every subprocess is capped by the time left
and logs to a file as it runs. Only checks gate the exit code (env, partitions, graphs, FlashInfer,
engine graphs); measurements (priority, calibration, bench) never do.

The package, one job per module: steps (the plan and budgets), results (gc.jsonl, summary.txt, shared
state), cuda_util (timing, capture, health), device_steps (env .. flashinfer), engine_steps (engine_graphs,
priority), calibrate, bench, runner (main, run_steps), random_program. Entry point: scripts/gpu_check.py
(the project card's command), or `python -m benchmarks.gpu`.

Steps (see STEPS; --plan prints them with budgets):
  env            versions, SMs, stream priority range
  partitions     the device's SM granularity, split probes, the lane streams (green contexts)
  sm_census      (full) which SMs each lane stream's kernels land on (Triton %smid)
  graphs         graphs captured and replayed on each lane stream, concurrently and across streams
  flashinfer     FlashInfer decode at head_dim 128: prime, capture, re-plan, replay vs the torch path
  engine_graphs  the engine's decode and codec graphs (CudaExecutor over the random 1.7B program) at 3
                 buckets on the lane streams: a real batch through prefill, graphed decode, graphed codec;
                 replay time per graph
  priority       urgent codec graph latency while decode and background codec graphs keep their lanes
                 busy; the same graph replayed on a least-priority stream; a graph captured on a
                 least-priority stream replayed on the urgent one
  calibrate      (full) per-batch ms of the graphed stages at >= 3 SM counts (8-SM groups of one split
                 combined) + the whole device, context 64 (and 1024 for two buckets), interference of real
                 decode + codec graphs on two plain streams, prefill: recipes/gpus/<gpu>.measured.toml
                 (`vox bench --executor sim --gpu <gpu>.measured` reads it)
  bench          the engine (random 1.7B, bf16) at two rates for policy full and sync2, one subprocess
                 per policy
Exit 0 when every gating step that ran passed, 1 otherwise (or on a sticky CUDA error), 2 without CUDA.
"""

"""The cuda executor: the lane plan's lanes on CUDA streams, per-(partition, stage, bucket) CUDA graphs.

Which lanes exist, their streams, partitions, stages and buckets come from the lane plan
(`voxcli/engine/lanes.py`), the table the scheduler reads too: policy `full` runs the lm lane's decode
graphs on the backbone green partition (priority greatest+1; prefill runs eagerly on a whole-device
stream of the same priority), background codec graphs on the codec green partition (priority least)
and urgent codec graphs on the whole device (priority greatest); the other policies have no urgent
lane, so no urgent graph is captured for them.

A graph keeps the SM partition of the stream it was captured on, whatever stream replays it, so the
table is keyed by partition: `graphs[(partition, stage, bucket)]`, captured at startup with lanes
idle, each lane with its own graph memory pool (lanes replay concurrently; a shared pool would alias
their intermediates). Before a stage's warm-up and capture the executor calls its `prime()` on the
lane's stream: an all-padding batch is planned (FlashInfer's run() needs a prior plan(); warm-ups and
the capture then write only the scratch KV page / codec slot). Right after a batch's replay is enqueued
the executor calls the stage's optional `prepare_next(rows)`: the host work of the lane's likely next
batch (the same rows one step on: every decode step but those where rows join or leave) runs while the
device computes this one, and the next launch only uploads it. Completion is a CUDA event per launch,
polled from the scheduler thread. Outputs are copied into pinned host mirrors on the lane stream before
the event, so `finish` never touches the device.

## The graph hook a model program may offer (declared in models/base.py: ModelProgram.graph_stage)

    program.graph_stage(stage, bucket, lane, device) -> GraphStage | None

`GraphStage.run()` is the fixed-shape device work of one step for `bucket` rows: it reads only
tensors the program allocated once (static inputs, KV pool, codec slot table; slots are gathered and
scattered inside `run` by a static index tensor) and returns its outputs as a dict of tensors.
`load(rows)` fills the static inputs for a batch (host, before replay, on the lane's stream:
non-blocking copies from pinned staging, `PagedDecodeAttention.plan`), padding rows up to the bucket.
`finish(rows, host_outputs)` turns the pinned host copies of the outputs into per-row results
(`StepOutput`s for decode, PCM arrays for codec) and runs the host token logic. A program without
the hook (or returning None for a stage/bucket) runs that stage eagerly: its `decode/codec/prefill`
method is called on a per-lane worker thread with the lane's stream current, so lanes still overlap.

Fault isolation (engine/isolation.py): an eager stage that raises is re-run in parts to fail only the
rows responsible; a codec graph whose `load` refuses a batch (a chunk's codes out of range) runs it
eagerly that way. A graphed decode step that raises fails its batch (its `load` has consumed the rows'
sampler draws), as does any device fault.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from voxcli.config import EngineConfig
from voxcli.engine.executors.base import Completion, Executor, LaneName, Work
from voxcli.engine.isolation import is_device_fault, run_isolated
from voxcli.engine.lanes import BucketError, LaneLayout, lane_layout
from voxcli.models.base import GraphStage

log = logging.getLogger("voxcli.cuda")

GraphKey = tuple[str, str, int]  # (partition, stage, bucket)


def graph_keys(config: EngineConfig, layout: LaneLayout | None = None) -> list[GraphKey]:
    """Every key the executor captures at startup: the lane plan's (lane, stage, buckets), largest bucket
    first within a lane (so later, smaller captures reuse the pool's blocks)."""
    plan = layout or lane_layout(config)
    keys: list[GraphKey] = []
    for lane in plan.lanes:
        for stage, buckets in (plan.stages or {}).get(lane, ()):
            keys.extend((plan.partition[lane], stage, b) for b in sorted(buckets, reverse=True))
    return keys


def codec_slots(rows: Sequence[Any]) -> set[int]:
    return {int(r.slot) for r in rows if getattr(r, "slot", -1) >= 0}


@dataclass
class Captured:
    stage: GraphStage
    graph: Any
    outputs: dict[str, Any]
    host: dict[str, Any]


@dataclass
class _Flight:
    work: Work
    started: float
    stream: Any
    event: Any = None
    captured: Captured | None = None
    future: Future | None = None
    error: BaseException | None = None
    slots: set[int] = field(default_factory=set)
    reruns: int = 0


class CudaExecutor(Executor):
    """Executor on CUDA streams. `streams` (LaneStreams) and `ops` are injectable for tests."""

    poll_interval_s = 50e-6

    def __init__(self, program: Any, config: EngineConfig, *, device_index: int = 0, streams: Any = None,
                 ops: Any = None, capture: bool = True, layout: LaneLayout | None = None) -> None:
        self.program, self.config = program, config
        self.plan = layout or lane_layout(config)
        if ops is None:
            from voxcli.engine.executors.cuda_ops import TorchCudaOps

            ops = TorchCudaOps(device_index)
        self.ops = ops
        if streams is None:
            from voxcli.engine.partitions import build_partitions

            # green-context partitions only where the plan partitions SMs: a lane policy that declares an
            # urgent lane (lane_policies.py), run by one engine for both roles (lanes.py builds it so)
            streams = build_partitions(config.lm_sms, config.codec_sms, device_index=device_index,
                                       split=self.plan.partitioned)
        self.streams = streams
        plan = self.plan
        self.stream_of: dict[LaneName, Any] = {
            lane: getattr(streams, plan.stream[lane]) for lane in plan.lanes}
        # Prefill takes the whole device: on a green backbone stream it would be confined to 96 SMs.
        prefill = getattr(streams, "prefill", None)
        self.prefill_stream = prefill if prefill is not None else self.stream_of["lm"]
        self.pools = {lane: ops.pool() for lane in plan.lanes}
        self.graphs: dict[GraphKey, Captured] = {}
        self.eager_keys: list[GraphKey] = []
        self._flights: dict[LaneName, _Flight] = {}
        self._last: dict[LaneName, tuple[Any, Any]] = {}  # lane -> (stream, event) of its last batch
        self._workers = {lane: ThreadPoolExecutor(1, thread_name_prefix=f"vox-{lane}") for lane in plan.lanes}
        if capture:
            self.capture_all()
        log.info("voxcli cuda executor: %s; %d graphs, %d eager stage/buckets",
                 streams.summary(), len(self.graphs), len(self.eager_keys))

    # -- startup -------------------------------------------------------------------------------------
    def capture_all(self) -> None:
        """Capture every (partition, stage, bucket) of the lane plan the program offers a graph for,
        lanes idle: prime (plan an all-padding batch) on the lane's stream, then warm up and capture."""
        hook = getattr(self.program, "graph_stage", None)
        plan = self.plan
        for lane in plan.lanes:
            stream = self.stream_of[lane]
            for stage, buckets in (plan.stages or {}).get(lane, ()):
                for bucket in sorted(buckets, reverse=True):
                    key = (plan.partition[lane], stage, bucket)
                    gs = hook(stage, bucket, lane, getattr(self.ops, "device", None)) if hook else None
                    if gs is None:
                        self.eager_keys.append(key)
                        continue
                    if gs.prime is not None:
                        with self.ops.on(stream):
                            gs.prime()
                    graph, outputs = self.ops.capture(gs.run, stream, self.pools[lane])
                    host = {k: self.ops.host_mirror(v) for k, v in outputs.items()}
                    self.graphs[key] = Captured(gs, graph, outputs, host)
        self.ops.synchronize()

    # -- Executor ------------------------------------------------------------------------------------
    def now(self) -> float:
        return time.perf_counter()

    def busy(self, lane: LaneName) -> bool:
        return lane in self._flights

    def launch(self, work: Work) -> None:
        lane = work.lane
        if lane in self._flights:
            busy_id = self._flights[lane].work.batch_id
            raise RuntimeError(f"lane {lane!r} already has batch {busy_id} in flight")
        started = self.now()
        stream = self.prefill_stream if work.stage == "prefill" else self.stream_of[lane]
        slots = codec_slots(work.rows) if work.stage == "codec" else set()
        flight = _Flight(work, started, stream, slots=slots)
        self._flights[lane] = flight
        try:
            captured = None
            if work.stage != "prefill":
                bucket, allowed = work.bucket, self.plan.buckets(lane, work.stage)
                if bucket not in allowed or not 1 <= len(work.rows) <= bucket:
                    raise BucketError(f"a {lane} {work.stage} batch of {len(work.rows)} rows came with "
                                      f"bucket {bucket}, not one of the lane plan's {allowed}")
                captured = self.graphs.get((self.plan.partition[lane], work.stage, bucket))
                accepts = None if captured is None else captured.stage.accepts
                if accepts is not None and not accepts(work.rows):
                    captured = None
            if captured is not None:
                try:
                    self._launch_graph(flight, captured)
                except Exception as e:
                    if work.stage != "codec" or flight.event is not None or is_device_fault(e):
                        raise
                    # A codec graph's load checks every chunk before the slot table is touched (the
                    # state is gathered and scattered inside the replay): the batch can run eagerly
                    # instead, where isolation fails only the chunks that fail on their own.
                    flight.future = self._workers[lane].submit(self._run_eager, flight)
            else:
                flight.future = self._workers[lane].submit(self._run_eager, flight)
        except Exception as e:  # bad batch or a load() error: report through the completion
            flight.error = e

    def _order(self, flight: _Flight) -> None:
        """Device-side ordering, no host blocking: (1) a lane moving between its two streams (prefill
        on the whole device, decode on the backbone) waits for its previous batch (KV writes);
        (2) a codec batch waits for the other codec lane's in-flight batch if they share a slot
        (a request's chunks must decode in order through its slot state)."""
        lane = flight.work.lane
        prev = self._last.get(lane)
        if prev is not None and prev[0] is not flight.stream:
            self.ops.wait_event(flight.stream, prev[1])
        if flight.slots:
            for other, f in list(self._flights.items()):
                if other != lane and f.slots & flight.slots and f.event is not None:
                    self.ops.wait_event(flight.stream, f.event)

    def _launch_graph(self, flight: _Flight, captured: Captured) -> None:
        with self.ops.on(flight.stream):
            self._order(flight)
            captured.stage.load(flight.work.rows)
            self.ops.replay(captured.graph)
            for k, dev in captured.outputs.items():
                captured.host[k].copy_(dev, non_blocking=True)
            flight.event = self.ops.event()
            self.ops.record(flight.event, flight.stream)
        flight.captured = captured
        if captured.stage.prepare_next is not None:
            # Host work for the lane's likely next batch (the same rows, one step on) overlaps this one.
            captured.stage.prepare_next(flight.work.rows)

    def _run_eager(self, flight: _Flight) -> list[Any]:
        stage = getattr(self.program, flight.work.stage)
        with self.ops.on(flight.stream):
            event = self.ops.event()
            self._order(flight)
            # a row whose data makes the stage raise fails alone (engine/isolation.py); CUDA errors are
            # device faults there and fail the batch without a re-run
            done = run_isolated(stage, flight.work.rows)
            self.ops.record(event, flight.stream)
        flight.event = event
        flight.reruns = done.reruns
        return done.results

    def _poll(self) -> list[Completion]:
        out = []
        for lane, f in list(self._flights.items()):
            result, error = None, f.error
            if error is None:
                if f.future is not None:
                    if not f.future.done():
                        continue
                    error = f.future.exception()
                    result = None if error else f.future.result()
                elif f.event is not None:
                    if not self.ops.done(f.event):
                        continue
                    try:
                        result = f.captured.stage.finish(f.work.rows, f.captured.host)
                    except Exception as e:
                        error = e
            del self._flights[lane]
            if f.event is not None:
                self._last[lane] = (f.stream, f.event)
            out.append(Completion(f.work, f.started, self.now(), result=result, error=error, reruns=f.reruns))
        return out

    def wait(self, until: float | None) -> list[Completion]:
        while True:
            done = self._poll()
            if done:
                return done
            if not self._flights and until is None:
                return []
            t = self.now()
            if until is not None and t >= until:
                return []
            nap = self.poll_interval_s if until is None else min(self.poll_interval_s, until - t)
            time.sleep(max(0.0, nap))

    def close(self) -> None:
        for w in self._workers.values():
            w.shutdown(wait=True)
        try:
            self.ops.synchronize()
        finally:
            # Graph execs captured on green streams must go before the streams and contexts.
            self.graphs.clear()
            self._flights.clear()
            self._last.clear()
            close = getattr(self.streams, "close", None)
            if close is not None:
                close()

"""Stand-ins for the cuda executor's device side, so its logic runs on the CPU: `FakeOps` (events, graph
capture and replay, stream waits, run eagerly and logged), a graph-capable `FakeProgram` over it, rows `R`,
and the lane streams a partitioned or unpartitioned plan gets (`fake_lane_streams`)."""

from __future__ import annotations

import contextlib
import threading
from dataclasses import dataclass

import torch

from voxcli.engine.executors.cuda import GraphStage
from voxcli.engine.partitions import LaneStreams


class FakeEvent:
    def __init__(self):
        self.stream, self.fired = None, False


class FakeOps:
    """Eager stand-in for TorchCudaOps. `hold` keeps recorded events pending until `release()`."""

    device = torch.device("cpu")

    def __init__(self, hold: bool = False):
        self.hold, self.log, self.pending = hold, [], []
        self.tls = threading.local()

    @contextlib.contextmanager
    def on(self, stream):
        prev = getattr(self.tls, "stream", None)
        self.tls.stream = stream
        try:
            yield
        finally:
            self.tls.stream = prev

    def current(self):
        return getattr(self.tls, "stream", None)

    def event(self):
        return FakeEvent()

    def record(self, ev, stream):
        ev.stream = stream
        if self.hold:
            self.pending.append(ev)
        else:
            ev.fired = True

    def release(self):
        for ev in self.pending:
            ev.fired = True
        self.pending.clear()

    def done(self, ev):
        return ev.fired

    def wait_event(self, stream, ev):
        self.log.append(("wait", stream, ev.stream))

    def pool(self):
        return object()

    def capture(self, run, stream, pool):
        self.log.append(("capture", stream, pool))
        outs = run()
        return run, outs

    def replay(self, graph):
        self.log.append(("replay", self.current()))
        graph()

    def host_mirror(self, t):
        return torch.empty_like(t)

    def synchronize(self):
        pass


@dataclass
class R:
    value: float
    slot: int = -1


class FakeProgram:
    """decode: y = 2x per row; codec: y = x + 100. Static buffers per (stage, bucket, lane)."""

    def __init__(self, graphed: bool = True, ops: FakeOps | None = None):
        self.graphed, self.ops, self.loads, self.eager_calls = graphed, ops, [], []

    def graph_stage(self, stage, bucket, lane, device):
        if not self.graphed:
            return None
        x, y = torch.zeros(bucket), torch.zeros(bucket)

        def run():
            if stage == "decode":
                torch.mul(x, 2, out=y)
            else:
                torch.add(x, 100, out=y)
            return {"y": y}

        def load(rows):
            if any(r.value < 0 for r in rows):
                raise ValueError("negative input")
            self.loads.append((stage, bucket, lane, self.ops.current() if self.ops else None))
            x.zero_()
            x[: len(rows)] = torch.tensor([r.value for r in rows])

        def finish(rows, host):
            return [float(host["y"][i]) for i in range(len(rows))]

        def accepts(rows):  # values >= 1000 stand for a batch the fixed shapes cannot hold
            return all(r.value < 1000 for r in rows)

        return GraphStage(run=run, load=load, finish=finish, accepts=accepts)

    def _eager(self, name, rows):
        self.eager_calls.append(
            (name, self.ops.current() if self.ops else None, threading.current_thread().name)
        )
        if any(r.value < 0 for r in rows):
            raise ValueError("negative input")
        return [r.value * 10 for r in rows]

    def prefill(self, rows):
        return self._eager("prefill", rows)

    def decode(self, rows):
        return self._eager("decode", rows)

    def codec(self, rows):
        return self._eager("codec", rows)


def fake_lane_streams(green=True):
    return LaneStreams(
        lm="s-lm",
        codec="s-codec",
        device="s-device",
        green=green,
        total_sms=132,
        lm_sms=96 if green else 132,
        codec_sms=32 if green else 132,
        priorities={"device": -5, "lm": -4, "codec": 0},
        prefill="s-prefill" if green else "s-lm",
    )

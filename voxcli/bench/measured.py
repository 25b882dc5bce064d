"""Measured stage timings -> a `recipes/gpus/<name>.measured.toml` cost profile the simulator reads.

`scripts/gpu_check.py` times the program's own graphed stages (random real-size weights) on green-context
partitions of several SM counts, the whole device, and two plain streams at once; this module turns
those numbers into the profile layout of `voxcli/sim/cost.py`, so `vox bench --executor sim --gpu
h200.measured` simulates the device that was measured. Kept apart from the script so it is tested on
fake measurements on a CPU machine.

What the numbers mean (stated here, used as is, nothing fitted):
- `decode[sms][i]`: ms of one graphed decode step of `batch[i]` rows, every row at `context` KV positions;
  `sms == sms_total` is the whole device. Each stage needs at least 3 SM counts (the sim interpolates
  speed linearly in SMs between them; `cost.py`).
- `codec[sms][i]`: ms of one graphed codec pass over `batch[i]` chunks padded to `codec_frames` frames
  (the graph's fixed shape), so `frames_ref = codec_frames`.
- `prefill_ms[tokens]`: one eager prefill of one prompt of `tokens` positions; the per-token slope is the
  line through the two smallest/largest measured points.
- `interference`: the mean slowdown of a decode graph and a codec graph replayed at the same time on
  two plain (unpartitioned) streams, against each alone.
- `context_ms[ctx][bucket]`: the decode step at other context lengths, whole device; recorded in the
  profile for the reader (the sim's decode cost does not depend on context yet).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

from voxcli.sim.cost import CostProfile

MIN_SM_COUNTS = 3


@dataclass
class Measurements:
    gpu: str  # profile name ("h200"); the file is <gpu>.measured.toml
    device_name: str  # what torch calls the device
    sms_total: int
    batch_decode: list[int]
    decode: dict[int, list[float]]  # SM count -> ms per batch_decode point
    batch_codec: list[int]
    codec: dict[int, list[float]]
    codec_frames: int
    context: int  # KV positions per row in `decode`
    prefill_ms: dict[int, float] = field(default_factory=dict)  # prompt tokens -> ms
    interference: float = 1.0
    context_ms: dict[int, dict[int, float]] = field(default_factory=dict)  # ctx -> bucket -> ms
    notes: list[str] = field(default_factory=list)

    def check(self) -> None:
        for stage, batch, table in (("decode", self.batch_decode, self.decode),
                                    ("codec", self.batch_codec, self.codec)):
            if self.sms_total not in table:
                raise ValueError(f"{stage}: no whole-device timing ({self.sms_total} SMs)")
            if len(table) < MIN_SM_COUNTS:
                raise ValueError(f"{stage}: timed at {sorted(table)} SMs; the simulator needs at least "
                                 f"{MIN_SM_COUNTS} SM counts (including the whole device)")
            for sms, ms in table.items():
                if len(ms) != len(batch) or any(not (m > 0) for m in ms):
                    raise ValueError(f"{stage} on {sms} SMs: {ms} is not one positive time per batch {batch}")
        if not self.interference >= 1.0 - 1e-9:
            raise ValueError(f"interference {self.interference} < 1: two streams cannot be faster than one")


def _arr(xs: list[float] | list[int]) -> str:
    return "[" + ", ".join(f"{x:.4g}" if isinstance(x, float) else str(x) for x in xs) + "]"


def _prefill(prefill_ms: dict[int, float]) -> tuple[float, float]:
    """(ms at zero tokens, ms per token) from the smallest and largest measured prompt."""
    if not prefill_ms:
        return 1.0, 0.0
    pts = sorted(prefill_ms.items())
    (t0, m0), (t1, m1) = pts[0], pts[-1]
    per = max(0.0, (m1 - m0) / (t1 - t0)) if t1 > t0 else 0.0
    return max(0.01, m0 - t0 * per), per


def profile_text(m: Measurements) -> str:
    m.check()
    base, per_token = _prefill(m.prefill_ms)
    lines = [f"# Measured by scripts/gpu_check.py on {m.device_name} ({time.strftime('%Y-%m-%d')}).",
             "# The program's own graphed stages, random real-size weights; see voxcli/bench/measured.py.",
             f"# decode: every row at {m.context} KV positions; codec: chunks padded to "
             f"{m.codec_frames} frames.",
             *[f"# {n}" for n in m.notes],
             "[gpu]", f'name = "{m.gpu}.measured"', f"sms = {m.sms_total}",
             f"interference = {m.interference:.4f}", ""]
    for stage, batch, table in (("decode", m.batch_decode, m.decode), ("codec", m.batch_codec, m.codec)):
        lines += [f"[stages.{stage}]", f"batch = {_arr(batch)}", f"ms = {_arr(table[m.sms_total])}"]
        if stage == "codec":
            lines.append(f"frames_ref = {m.codec_frames}")
        if stage == "decode" and m.context_ms:
            lines.append(f"context = {m.context}")
        lines += ["", f"[stages.{stage}.sm_ms]"]
        lines += [f"{sms} = {_arr(ms)}" for sms, ms in sorted(table.items()) if sms != m.sms_total]
        lines.append("")
        if stage == "decode" and m.context_ms:
            lines.append("[stages.decode.context_ms]  # whole device, informational: ctx = {bucket = ms}")
            for ctx, by_bucket in sorted(m.context_ms.items()):
                cells = ", ".join(f'"{b}" = {ms:.4g}' for b, ms in sorted(by_bucket.items()))
                lines.append(f"{ctx} = {{ {cells} }}")
            lines.append("")
    lines += ["[stages.prefill]", "batch = [1]", f"ms = [{base:.4f}]", f"per_token_ms = {per_token:.6f}", ""]
    return "\n".join(lines)


def write_profile(m: Measurements, folder: Path) -> tuple[Path, CostProfile]:
    """Write `<folder>/<gpu>.measured.toml` and read it back with the engine's own reader."""
    path = Path(folder) / f"{m.gpu}.measured.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(profile_text(m))
    profile = CostProfile.from_toml(tmp)  # refuse to leave a file the simulator cannot read
    tmp.replace(path)
    return path, profile

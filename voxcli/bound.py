"""The device's own bound on capacity for a workload: how many requests per second a model's cost profile
allows at best on a given SM split, so a measured capacity can be read as a fraction of what the
hardware can do (not only as a ratio against another policy).

One pure function, `capacity_bound`; its inputs are a cost profile (voxcli/engine/cost.py) and numbers
that describe the split and one average request. Assumptions, each an upper bound's choice:

1. The backbone (LM lane, on its `lm_sms` partition) always decodes at its best batch bucket: the bucket
   b <= `max_decode_batch` with the most rows per second b / decode(b). Every row of that batch is one
   frame of some request (frames/s = rows/s), so the queue is never short of work and no step is wasted.
2. A request costs the backbone `frames + lead_steps` steps per row and `width` rows (a classifier-free
   guidance pair is 2 rows, a delay pattern adds `lead_steps` steps before the first frame).
3. The LM lane is serial: while a prefill runs nothing decodes. Prefills are batched `prefill_batch` at a
   time (the engine's max_prefill_batch), costing the profile's prefill latency for that batch with all
   its prompt tokens, on the LM partition; each request pays its share of one such call ("the prefill's
   share"). So the backbone's time per request is steps x width / (rows/s at the best bucket) + that
   share, and the LM bound is its inverse.
4. The codec lane (background, on its `codec_sms` partition) decodes every frame of every request
   except `urgent_frames` (the first chunk, which the urgent lane decodes on the whole device when the
   policy has one), at its best bucket (most frames/s over the profile's codec batch points up to
   `max_codec_batch` chunks of the profile's `frames_ref` frames). A later chunk the urgent lane takes
   (promoted near its deadline) is not credited: a policy can pass the codec bound only by promoting
   chunks, which is what the late-chunk counters of the bench report show.
5. Partitioned lanes (backbone and codec on disjoint SMs) run side by side: the lower of the two bounds
   binds. Lanes on the same SMs (no partition: policies lanes, sync2, sync) at best time-share the
   device at each stage's whole-device speed (the time-sharing line of `vox profile`): the bound is
   1 / (backbone time + codec time per request).
6. No interference, bandwidth sharing, host time or noise (the honest sim's effects) is charged: the
   bound is the cost table's own, so every effect the sim or a device adds shows as a lower fraction.
"""

from __future__ import annotations

from dataclasses import dataclass

from voxcli.engine.cost import CostProfile


@dataclass(frozen=True)
class CapacityBound:
    lm_rps: float  # requests/s the backbone sustains at its best bucket, less the prefill's share
    codec_rps: float  # requests/s the codec partition sustains at its best bucket
    rps: float  # the binding bound
    binding: str  # "backbone", "codec" or "time-shared"
    best_decode_batch: int  # the bucket of assumption 1
    lm_frames_s: float  # backbone frames (rows) per second at that bucket
    codec_frames_s: float  # codec frames per second at its best bucket
    best_codec_batch: int  # chunks
    prefill_s: float  # the backbone seconds each request's prefill costs (assumption 3)

    def fraction(self, capacity: float) -> float:
        return capacity / self.rps if self.rps > 0 else 0.0


def capacity_bound(profile: CostProfile, *, lm_sms: int | None, codec_sms: int | None,
                   frames_per_request: float, prompt_tokens: float, width: int = 1, lead_steps: int = 0,
                   urgent_frames: float = 0.0,
                   prefill_batch: int = 4, max_decode_batch: int = 256, max_codec_batch: int = 32,
                   partitioned: bool = True) -> CapacityBound:
    """The capacity bound (req/s) of `profile` on the split `lm_sms` / `codec_sms` (None = the whole
    device) for requests of `frames_per_request` frames and `prompt_tokens` prompt tokens per sequence;
    see the module docstring for every assumption."""
    if frames_per_request <= 0:
        raise ValueError(f"frames_per_request must be > 0, got {frames_per_request}")
    lm_sms = None if lm_sms is not None and lm_sms >= profile.sms else lm_sms
    codec_sms = None if codec_sms is not None and codec_sms >= profile.sms else codec_sms
    decode = profile.stages["decode"]
    buckets = [int(b) for b in decode.batch if b <= max_decode_batch] or [int(decode.batch[0])]
    rows_s = {b: b / profile.latency("decode", b, lm_sms) for b in buckets}
    best_b = max(buckets, key=lambda b: (rows_s[b], -b))
    lm_rows_s = rows_s[best_b]
    prefill_s = 0.0
    if "prefill" in profile.stages:
        pb = max(1, prefill_batch)
        prefill_s = profile.latency("prefill", pb, lm_sms, tokens=round(pb * prompt_tokens * width)) / pb
    lm_s = (frames_per_request + lead_steps) * width / lm_rows_s + prefill_s

    codec = profile.stages["codec"]
    ref = codec.frames_ref or 1
    cbuckets = [int(b) for b in codec.batch if b <= max_codec_batch] or [int(codec.batch[0])]
    frames_s = {b: b * ref / profile.latency("codec", b, codec_sms, frames=b * ref) for b in cbuckets}
    best_c = max(cbuckets, key=lambda b: (frames_s[b], -b))
    codec_s = max(frames_per_request - urgent_frames, 1e-9) / frames_s[best_c]

    lm_rps, codec_rps = 1 / lm_s, 1 / codec_s
    if partitioned:
        rps = min(lm_rps, codec_rps)
        binding = "backbone" if lm_rps <= codec_rps else "codec"
    else:
        rps, binding = 1 / (lm_s + codec_s), "time-shared"
    return CapacityBound(lm_rps, codec_rps, rps, binding, best_b, lm_rows_s / width, frames_s[best_c],
                         best_c, prefill_s)

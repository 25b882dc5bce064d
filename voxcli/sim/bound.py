"""The device's own bound on capacity for a workload: how many requests per second a model's cost profile
allows at best on a given SM split, so a measured capacity can be read as a fraction of what the
hardware can do (not only as a ratio against another policy).

One pure function, `capacity_bound`; its inputs are a cost profile (voxcli/sim/cost.py) and numbers
that describe the split and one average request. Assumptions, each an upper bound's choice:

1. The backbone (LM lane, on its `lm_sms` partition) always decodes at its best batch: the row count
   R <= `max_decode_batch` with the most request-frames per second, R / width / decode(R). Every row of
   that batch belongs to some request, so the queue is never short of work and no step is wasted. Without
   an SLO (`ttfa_s` None) R ranges over the profile's batch points; with one, also over every whole
   number of requests up to the table's largest batch (the cost table interpolated, never extrapolated,
   and not padded to the config's decode buckets: a coarse bucket ladder is the config's loss and shows
   as a lower fraction).
2. A request costs the backbone `frames + lead_steps` steps per row and `width` rows (a classifier-free
   guidance pair is 2 rows, a delay pattern adds `lead_steps` steps before the first frame). A pair's
   unconditional row costs the profile's `cfg_row` rows (decode's CFG work sharing, as the sim charges
   it, when `cfg_shared`); the shared `cfg_group` rows per distinct text are not charged (they are at
   most one per request and fewer when texts share a length: leaving them out keeps this an upper bound).
2b. The SLO caps the step (only with `ttfa_s`): the engine decodes every running row each step, so near
   capacity a request still making its first chunk shares every step with the whole batch. That request
   meets its time to first audio only if its own prefill call (of k requests, assumption 3) + its
   first chunk's codec call (`first_frames` frames, on the whole device when the urgent lane decodes it,
   else on the codec partition) + (`lead_steps` + `first_frames`) steps <= `ttfa_s`, where the steps are
   stretched by the others' prefill calls that the serial LM lane runs between them: by 1 / (1 - the
   lane's share of time in prefill calls, rate x the prefill's share). That caps decode(R). And no
   request can play its last frame before the backbone makes it: the frames after the first chunk,
   (frames - first_frames) steps, must take at most the whole utterance's playback, frames x `frame_s`
   (a generous real-time cap: any chunk schedule stalls sooner). R is then the best batch whose step
   meets both caps; when even one request's step misses them, the bound is 0. Waits for a step in
   flight and for the prefills queued ahead are not charged (each would tighten the cap: leaving them
   out keeps this an upper bound). A chunk schedule that grows faster than playback caps the step
   further (`schedule_step_cap`), but that is the config's choice, not the model's: it is reported
   beside the bound, not in it.
3. The LM lane is serial: while a prefill runs nothing decodes. A prefill call holds at most
   `prefill_batch` rows (the engine's max_prefill_batch: a CFG pair is 2) and costs the profile's prefill
   latency for its rows and all their prompt tokens, on the LM partition; each request pays its share of
   one call ("the prefill's share"). Without an SLO every call is full. Under one, no request can wait
   to fill a call (a wait is TTFA spent), so the engine prefills at each step's end whoever arrived
   during the step: at rate r and step s that is x = r s arrivals, k = x / (1 - e^-x) requests per call
   given one (the Poisson mean given at least one; at most the full call). r depends on k and k on r:
   the bound is their fixed point, found by iterating from full calls (an upper bound at each step, so
   it converges downwards). So the backbone's time per request is steps x width / (rows/s at the best
   batch) + that share, and the LM bound is its inverse.
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

Why a capacity at an attainment q sits below the bound even with a perfect policy when the SLO caps the
step (`occupancy_ceiling`): the bound runs the batch at its best size n* requests all the time, but with
Poisson arrivals and every running request decoded each step (no queue: an M/G/inf system) the number of
requests in the system is Poisson-distributed around its mean, and an arrival that finds n* or more
already running shares its first chunk's steps with a batch past the SLO's cap (or is refused). At rate
x bound the mean is x n*, so attainment q needs P(Poisson(x n*) >= n*) <= 1 - q: the largest such x
is the ceiling of capacity / bound at q (`CapacityBound.ceiling`). E.g. n* = 34 requests (Dia-1.6B on
96/32): 0.79 at 90%, 0.65 at 99%; n* = 127 (Higgs v3 on 100/32): 0.89 / 0.80. It applies to the
backbone's bound only when the SLO's cap, not the cost table's largest batch, fixed n*; the codec lane
queues, so its bound has no such ceiling.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from voxcli.sim.cost import CostProfile


@dataclass(frozen=True)
class CapacityBound:
    lm_rps: float  # requests/s the backbone sustains at its best bucket, less the prefill's share
    codec_rps: float  # requests/s the codec partition sustains at its best bucket
    rps: float  # the binding bound
    binding: str  # "backbone", "codec" or "time-shared"
    best_decode_batch: int  # the rows of assumption 1
    lm_frames_s: float  # backbone frames (rows) per second at that bucket
    codec_frames_s: float  # codec frames per second at its best bucket
    best_codec_batch: int  # chunks
    prefill_s: float  # the backbone seconds each request's prefill costs (assumption 3)
    step_cap_s: float = math.inf  # the longest decode step the SLO allows (assumption 2b; inf: no SLO)
    step_s: float = 0.0  # the decode step at best_decode_batch
    schedule_cap_s: float = math.inf  # the step the config's chunk schedule allows (reported, not bound)
    best_requests: float = 0.0  # requests in the batch of assumption 1 (n*)
    capped: bool = False  # the SLO's step cap, not the table, fixed n*

    def fraction(self, capacity: float) -> float:
        return capacity / self.rps if self.rps > 0 else 0.0

    def ceiling(self, attainment: float) -> float:
        """The ceiling of capacity / bound at `attainment` from Poisson occupancy (module docstring)."""
        if not self.capped or self.rps <= 0:
            return 1.0
        lm = self.lm_rps * occupancy_ceiling(self.best_requests, attainment)
        return min(lm, self.codec_rps) / self.rps


def capacity_bound(profile: CostProfile, *, lm_sms: int | None, codec_sms: int | None,
                   frames_per_request: float, prompt_tokens: float, width: int = 1, lead_steps: int = 0,
                   urgent_frames: float = 0.0,
                   prefill_batch: int = 4, max_decode_batch: int = 256, max_codec_batch: int = 32,
                   partitioned: bool = True, ttfa_s: float | None = None, first_frames: int = 0,
                   frame_s: float = 0.0, cfg_shared: bool = False) -> CapacityBound:
    """The capacity bound (req/s) of `profile` on the split `lm_sms` / `codec_sms` (None = the whole
    device) for requests of `frames_per_request` frames and `prompt_tokens` prompt tokens per sequence;
    with `ttfa_s`, the step is capped by the SLO (first chunk of `first_frames` frames, `frame_s` seconds
    of audio per frame). See the module docstring for every assumption."""
    if frames_per_request <= 0:
        raise ValueError(f"frames_per_request must be > 0, got {frames_per_request}")
    lm_sms = None if lm_sms is not None and lm_sms >= profile.sms else lm_sms
    codec_sms = None if codec_sms is not None and codec_sms >= profile.sms else codec_sms
    decode = profile.stages["decode"]
    # cost rows per request (assumption 2): a sharing CFG pair's second row costs cfg_row rows
    cost_width = 1 + decode.cfg_row if width == 2 and cfg_shared else float(width)
    requests = [b / width for b in decode.batch if b <= max_decode_batch] or [decode.batch[0] / width]
    if ttfa_s is not None:  # every whole number of requests as well, within the table (assumption 1)
        top = min(max_decode_batch / width, max(decode.batch) / cost_width)
        requests += [float(n) for n in range(1, int(top) + 1)]
    steps = {n: profile.latency("decode", n * cost_width, lm_sms) for n in requests}
    by_step = sorted(requests, key=lambda n: steps[n])
    k_max = max(1, prefill_batch // width)  # requests per prefill call (max_prefill_batch counts rows)

    def prefill_call(k: float) -> float:  # one prefill call of k requests (assumption 3)
        if "prefill" not in profile.stages:
            return 0.0
        return profile.latency("prefill", k * width, lm_sms, tokens=round(k * prompt_tokens * width))

    def backbone(k: float, rate: float | None) -> tuple[float, float | None, float, float]:
        """(step cap, best n or None, request-frames/s, requests/s) with prefill calls of k requests and,
        under an SLO at `rate` req/s, the first chunk's window stretched by the others' prefills."""
        share = prefill_call(k) / k
        cap = math.inf
        if ttfa_s is not None:
            busy = min(0.99, (rate or 0.0) * share)  # the LM lane's share of time in prefill calls
            cap = step_time_cap(profile, lm_sms=lm_sms, ttfa_s=ttfa_s, lead_steps=lead_steps,
                                first_frames=first_frames, own_prefill_s=prefill_call(k),
                                urgent=urgent_frames > 0, codec_sms=codec_sms,
                                frames_per_request=frames_per_request, frame_s=frame_s) * (1 - busy)
        fits = [n for n in by_step if steps[n] <= cap]
        if not fits:
            return cap, None, 0.0, 0.0
        n = max(fits, key=lambda n: (n / steps[n], -n))
        frames_s = n / steps[n]
        return cap, n, frames_s, 1 / ((frames_per_request + lead_steps) / frames_s + share)

    k = float(k_max)
    step_cap, best, lm_frames_s, lm_rps = backbone(k, None)
    if ttfa_s is not None:
        # A fixed point: at rate r the engine prefills, at each step's end, whoever arrived during the
        # step: r x step arrivals, k = r s / (1 - e^-(r s)) per call given one (capped at k_max).
        for _ in range(40):
            if best is None:
                break
            x = lm_rps * steps[best]
            k = min(float(k_max), x / -math.expm1(-x)) if x > 1e-9 else 1.0
            step_cap, new_best, lm_frames_s, new_rps = backbone(k, lm_rps)
            done = abs(new_rps - lm_rps) <= 1e-9 * max(1.0, lm_rps)
            best, lm_rps = new_best, new_rps
            if done:
                break
    best_n = best if best is not None else min(requests)
    prefill_s = prefill_call(k) / k

    codec = profile.stages["codec"]
    ref = codec.frames_ref or 1
    cbuckets = [int(b) for b in codec.batch if b <= max_codec_batch] or [int(codec.batch[0])]
    frames_s = {b: b * ref / profile.latency("codec", b, codec_sms, frames=b * ref) for b in cbuckets}
    best_c = max(cbuckets, key=lambda b: (frames_s[b], -b))
    codec_rps = frames_s[best_c] / max(frames_per_request - urgent_frames, 1e-9)

    if partitioned:
        rps = min(lm_rps, codec_rps)
        binding = "backbone" if lm_rps <= codec_rps else "codec"
    else:
        rps = 0.0 if lm_rps <= 0 else 1 / (1 / lm_rps + 1 / codec_rps)
        binding = "time-shared"
    # capped: one request more than n* would step past the SLO's cap (n* is not the table's own best)
    capped = best is not None and math.isfinite(step_cap) and \
        profile.latency("decode", (best_n + 1) * cost_width, lm_sms) > step_cap
    return CapacityBound(lm_rps, codec_rps, rps, binding, round(best_n * width), lm_frames_s,
                         frames_s[best_c], best_c, prefill_s, step_cap, steps[best_n], best_requests=best_n,
                         capped=capped)


def step_time_cap(profile: CostProfile, *, lm_sms: int | None, ttfa_s: float, lead_steps: int,
                  first_frames: int, own_prefill_s: float, urgent: bool, codec_sms: int | None,
                  frames_per_request: float, frame_s: float) -> float:
    """The longest decode step (s) the SLO allows (assumption 2b) before the others' prefills stretch
    it: the tighter of the first chunk's TTFA budget (after its own prefill call, `own_prefill_s`, and
    its first codec call) over its (lead + first) steps and the generous real-time cap; 0 when those
    two calls alone miss the TTFA."""
    first = max(1, first_frames)
    fixed = own_prefill_s + profile.latency("codec", 1, None if urgent else codec_sms, frames=first)
    cap = max(0.0, ttfa_s - fixed) / (lead_steps + first)
    rest = frames_per_request - first
    if frame_s > 0 and rest > 0:
        cap = min(cap, frames_per_request * frame_s / rest)
    return cap


def schedule_step_cap(schedule_sizes: list[int], frame_s: float, hold_frames: float = 0.0) -> float:
    """The longest decode step (s) at which a chunk schedule never stalls on the backbone alone (no
    codec time): chunk k (frames up to C_k) is made (C_k - C_1) steps after the first chunk and must be
    there when the audio before it, C_(k-1) x frame_s, has played, so step <= C_(k-1) x frame_s /
    (C_k - C_1) for every k >= 2. `schedule_sizes`: the chunk sizes in frames, in order (the first
    chunks of a request, far enough that the steady size repeats). `hold_frames`: the codec's hold-back
    (ModelSpec.codec_lookahead_frames): the audio before chunk k is then C_(k-1) - h frames, not C_(k-1)."""
    cap, total = math.inf, 0
    first = schedule_sizes[0] if schedule_sizes else 0
    for size in schedule_sizes:
        if total >= first > 0:
            cap = min(cap, max(0.0, total - hold_frames) * frame_s / (total + size - first))
        total += size
    return cap


def occupancy_ceiling(requests: float, attainment: float) -> float:
    """The largest x in (0, 1] such that P(Poisson(x * requests) >= requests) <= 1 - attainment: the
    ceiling of capacity / bound at `attainment` when the bound's batch holds `requests` requests (see the
    module docstring); 1.0 for no cap (inf)."""
    if not math.isfinite(requests):
        return 1.0
    n = max(1, math.ceil(requests - 1e-9))

    def tail(mean: float) -> float:  # P(N >= n), N ~ Poisson(mean), the pmf in logs (no underflow)
        if mean <= 0:
            return 0.0
        log_m = math.log(mean)
        return max(0.0, 1.0 - sum(math.exp(k * log_m - mean - math.lgamma(k + 1)) for k in range(n)))

    lo, hi = 0.0, 1.0
    if tail(hi * n) <= 1 - attainment:
        return 1.0
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if tail(mid * n) <= 1 - attainment else (lo, mid)
    return lo

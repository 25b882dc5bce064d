"""What users feel, computed from client-side timestamps (ARCHITECTURE.md "Measuring").

- TTFA: request sent -> first audio received.
- Modelled player: starts playing at the first audio, plays every chunk's audio seconds in order and
  pauses whenever the next audio has not arrived yet. A request *stalls* if its pauses add up to
  `STALL_S` (10 ms) or more.
- SLO: the request completed, TTFA <= target (200 ms) and no stall. Rejected, failed, cancelled and
  timed-out requests are misses.
- Attainment at a rate: SLO-meeting requests / all requests sent at that rate.
- Capacity at a threshold: the highest tested rate whose attainment is >= threshold there AND at every
  lower tested rate (it stops at the first rate that fails).
- Goodput: SLO-meeting requests per second of the arrival window. Completed req/s ("done/s"): completed
  requests per second of the arrival window, the same denominator as goodput (so goodput <= done/s, and
  both read against the offered rate). Pooled over arrival seeds, the window is every seed's window
  added up: each seed replays its own window, so three seeds must not count as one seed's span (that
  printed "50.5 done/s" at 20 req/s offered).
- Audio-in (text-out) requests of a mixed workload (bench/audio_in.py) emit no audio: every TTS figure
  above (sent, SLO, goodput, TTFA, capacity) counts TTS requests only; audio-in requests report their own
  count, time to first token (TTFT: arrival to the step that sampled the first text token) p50/p99 and
  tokens per second p50 ((tokens - 1) / (last token - first token)).
- A capacity equal to the highest tested rate is only a lower bound ("≥40"): the sweep did not find
  where attainment falls below the threshold.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field

STALL_S = 0.010
TTFA_TARGET_S = 0.200
AUDIO_WITHIN_S = 1.0  # sweep stop rule: fewer than half get audio within this -> stop

DONE = "done"
MISS_STATUSES = ("rejected", "failed", "cancelled", "timeout")


@dataclass
class RequestRecord:
    """One request as the client saw it. Times are seconds on the client's clock (real or virtual).
    `deliveries` are (receive time, audio seconds in that piece), in arrival order."""

    sent: float
    status: str = DONE
    deliveries: list[tuple[float, float]] = field(default_factory=list)
    finished: float | None = None
    reason: str = ""
    utterance_id: str = ""
    audio_in: bool = False  # a text-out request (no audio): not a TTS request
    ttft: float | None = None  # audio-in: seconds from sent to the first text token
    tokens_per_s: float | None = None  # audio-in: text tokens per second after the first

    @property
    def ttfa(self) -> float | None:
        return self.deliveries[0][0] - self.sent if self.deliveries else None

    @property
    def audio_seconds(self) -> float:
        return sum(a for _, a in self.deliveries)


def player_pause(deliveries: Sequence[tuple[float, float]]) -> float:
    """Total seconds the modelled player pauses: it starts at the first delivery and, for each later
    piece, waits if it arrives after the audio before it has finished playing."""
    if not deliveries:
        return 0.0
    play_end = deliveries[0][0] + deliveries[0][1]  # when the buffered audio runs out
    paused = 0.0
    for t, audio in deliveries[1:]:
        if t > play_end:
            paused += t - play_end
            play_end = t
        play_end += audio
    return paused


def stalled(record: RequestRecord, stall_s: float = STALL_S) -> bool:
    # Compare with a tiny tolerance so 10 ms of pauses built from float sums counts as 10 ms.
    return player_pause(record.deliveries) >= stall_s - 1e-9


def meets_slo(record: RequestRecord, ttfa_target_s: float = TTFA_TARGET_S, stall_s: float = STALL_S) -> bool:
    if record.status != DONE or record.ttfa is None:
        return False
    return record.ttfa <= ttfa_target_s + 1e-9 and not stalled(record, stall_s)


def percentile(values: Sequence[float], q: float) -> float | None:
    """Linear-interpolated percentile (q in 0..100); None for no values."""
    if not values:
        return None
    xs = sorted(values)
    pos = (len(xs) - 1) * q / 100.0
    lo, hi = math.floor(pos), math.ceil(pos)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


@dataclass
class RateResult:
    """Everything measured at one offered rate (req/s) for one policy/target."""

    rate: float
    sent: int
    met: int
    completed: int
    rejected: int
    failed: int
    attainment: float
    goodput: float  # SLO-meeting requests per second of the arrival window
    completed_rps: float  # completed requests per second of the arrival window (per seed, seeds summed)
    ttfa_p50: float | None
    ttfa_p90: float | None
    ttfa_p99: float | None
    audio_within_1s: float  # fraction of sent requests with first audio within 1 s (stop rule)
    stalled: int
    window_s: float
    # the late-chunk path (sim targets; 0 elsewhere): later chunks the urgent lane took, background
    # batches launched below B by their deadline trigger, background batches cut by their chunks' slack
    promoted: int = 0
    deadline_launches: int = 0
    slack_cuts: int = 0
    # audio-in (text-out) requests of a mixed workload: not in any figure above
    audio_in_sent: int = 0
    audio_in_done: int = 0
    ttft_p50: float | None = None
    ttft_p99: float | None = None
    tokens_per_s_p50: float | None = None

    def to_dict(self) -> dict:
        return asdict(self)


def rate_result(rate: float, records: Sequence[RequestRecord], window_s: float,
                ttfa_target_s: float = TTFA_TARGET_S, stall_s: float = STALL_S) -> RateResult:
    heard = [r for r in records if r.audio_in]
    records = [r for r in records if not r.audio_in]  # the TTS requests: the SLO is theirs
    sent = len(records)
    met = sum(meets_slo(r, ttfa_target_s, stall_s) for r in records)
    completed = [r for r in records if r.status == DONE]
    ttfas = [r.ttfa for r in records if r.ttfa is not None]
    return RateResult(
        rate=rate, sent=sent, met=met, completed=len(completed),
        rejected=sum(r.status == "rejected" for r in records),
        failed=sum(r.status not in (DONE, "rejected") for r in records),
        attainment=met / sent if sent else 0.0,
        goodput=met / window_s if window_s > 0 else 0.0,
        completed_rps=len(completed) / window_s if window_s > 0 else 0.0,
        ttfa_p50=percentile(ttfas, 50), ttfa_p90=percentile(ttfas, 90), ttfa_p99=percentile(ttfas, 99),
        audio_within_1s=(sum(t <= AUDIO_WITHIN_S for t in ttfas) / sent) if sent else 0.0,
        stalled=sum(r.status == DONE and stalled(r, stall_s) for r in records),
        window_s=window_s,
        audio_in_sent=len(heard), audio_in_done=sum(r.status == DONE for r in heard),
        ttft_p50=percentile(ttfts := [r.ttft for r in heard if r.ttft is not None], 50),
        ttft_p99=percentile(ttfts, 99),
        tokens_per_s_p50=percentile([r.tokens_per_s for r in heard if r.tokens_per_s], 50))


def capacity(results: Iterable[RateResult], threshold: float) -> float:
    """Highest tested rate with attainment >= threshold there and at every lower tested rate
    (0 when even the lowest rate fails)."""
    best = 0.0
    for r in sorted(results, key=lambda r: r.rate):
        if r.attainment + 1e-12 < threshold:
            break
        best = r.rate
    return best


def capacity_at_top(results: Sequence[RateResult], threshold: float) -> bool:
    """Whether the capacity is the highest rate tested: a lower bound, not a measurement."""
    cap = capacity(results, threshold)
    return cap > 0 and cap >= max(r.rate for r in results)


def should_stop(result: RateResult) -> bool:
    """Sweep stop rule: stop after a rate where fewer than half of the requests get audio within 1 s."""
    return result.audio_within_1s < 0.5

"""Choosing the time dilation of a CPU benchmark from this machine's measured speed.

A CPU that synthesises one stream slower than real time (real-time factor RTF = wall s / audio s > 1)
stalls every request under every policy, so sync vs full would compare two zeros; a fixed dilation
picked on one machine is wrong on the next (a slower machine stalls, a faster one never loads up).
Instead: measure the single-stream RTF here, then run the clock `HEADROOM` times slower than that, so
one stream uses 1/HEADROOM of the machine and the sweep crosses from "keeps up" to "overloaded" in the
tested rates on any machine.

Assumptions (stated, not fitted): a single stream's RTF measured alone, after one warm-up request, is
representative of one request's cost inside the sweep; HEADROOM = 3 leaves room for about three
concurrent streams before stalls, which puts sync's capacity inside the swept range. The sequential
capacity 1 / (RTF x mean audio seconds per request) is what time sharing serves one request at a time;
`auto_rates` sweeps fractions and multiples of it.
"""

from __future__ import annotations

import math

HEADROOM = 3.0


def choose_dilation(rtf: float, headroom: float = HEADROOM) -> float:
    """Dilation K >= 1 with one stream using 1/headroom of the machine, rounded up to a half step."""
    if not math.isfinite(rtf) or rtf <= 0:
        raise ValueError(f"real-time factor must be a positive number, got {rtf}")
    return max(1.0, math.ceil(rtf * headroom * 2) / 2)


def sequential_capacity(rtf: float, mean_audio_s: float) -> float:
    """Requests per second one-at-a-time synthesis serves (compute time per request = rtf x audio)."""
    return 1.0 / (rtf * mean_audio_s)


def auto_rates(capacity_rps: float, steps: tuple[float, ...] = (0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0)
               ) -> list[float]:
    """Offered rates around the sequential capacity: below it both policies should hold the SLO, above
    it time sharing cannot, and batching (full) still may."""
    return sorted({float(f"{capacity_rps * f:.3g}") for f in steps})

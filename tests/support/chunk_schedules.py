"""Chunk schedules for the streaming-codec tests: how many frames each decode call of one request gets."""

from __future__ import annotations

import random
from collections.abc import Sequence


def chunk_schedule(lead: Sequence[int], total: int, steady: int = 16) -> list[int]:
    """Sizes summing to `total`: the `lead` sizes first, then `steady` per chunk, the last cut short."""
    out, left = [], total
    for i in range(total):
        if not left:
            break
        n = min(lead[i] if i < len(lead) else steady, left)
        out.append(n)
        left -= n
    return out


def random_lead(total: int, largest: int, seed: int) -> list[int]:
    """`total` random sizes in 1..largest (more than enough to cover `total` frames)."""
    rng = random.Random(seed)
    return [rng.randint(1, largest) for _ in range(total)]

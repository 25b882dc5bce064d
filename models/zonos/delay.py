"""Zonos' delay pattern on the host: codebook k of frame j is predicted at decode column j + k + 1, so a
column holds codebook k's token for frame (column - k - 1); the first column (prefill input) is all the
masked token, and positions outside frames [0, limit) stay masked whatever is sampled there.

The stop rule is the reference's: when codebook 0 samples EOS, nine more columns run at most; in the i-th
column after it codebooks below i are forced to the masked token and codebook i to EOS (so the EOS frame
is a diagonal), the others keep their samples (they finish earlier frames). The request's audio is every
frame before the EOS frame; a frame is complete (all nine codebooks) one column after codebook 8 saw it,
and the engine receives it then, with EOS/masked codes read as 0 as the reference's output does. A request
that reaches its frame cap ends as the reference's does there too (see `plan`: its last frames' upper
codebooks take the lower heads' tokens).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .config import CODEBOOKS

STOP_COLUMNS = CODEBOOKS  # columns the reference runs from the EOS column on, that one included


@dataclass
class DelayTracker:
    limit: int  # frame cap (max_frames, or fixed_frames for the bench)
    eos: int
    masked: int
    stop_on_eos: bool = True
    columns: list[np.ndarray] = field(default_factory=list)
    remaining: int = 0
    stopping: bool = False

    def __post_init__(self) -> None:
        self.columns = [np.full(CODEBOOKS, self.masked, dtype=np.int64)]
        self.remaining = self.limit + CODEBOOKS - 1  # the reference's max_steps after prefill

    @property
    def next_column(self) -> int:
        return len(self.columns)

    def last_input(self) -> np.ndarray:
        return self.columns[-1]

    def recent(self, window: int) -> np.ndarray:
        """[9, window] the last `window` columns fed so far (the repetition penalty's history)."""
        return np.stack(self.columns[-window:], axis=1)

    def _open(self, column: int) -> np.ndarray:
        """Codebooks whose position in `column` is a real frame (sampled), not delay padding."""
        frame = column - np.arange(CODEBOOKS) - 1
        return (frame >= 0) & (frame < self.limit)

    def plan(self, tokens: np.ndarray, prefill: bool) -> tuple[np.ndarray, bool, int, bool]:
        """What recording `tokens` (sampled for the next column) would do, without doing it:
        (column, stopping, remaining, done)."""
        col = self.next_column
        t = tokens.copy()
        stopping, remaining = self.stopping, self.remaining
        if not prefill:
            if self.stop_on_eos and t[0] == self.eos:
                remaining, stopping = min(remaining, STOP_COLUMNS), True
            if stopping:
                idx = min(STOP_COLUMNS - remaining, CODEBOOKS - 1)
                t[:idx] = self.masked
                t[idx] = self.eos
            remaining -= 1
        # The reference writes the tokens with masked_scatter_: the open positions take the tokens IN ORDER
        # (the first open codebook takes codebook 0's token...). Near the start the open codebooks are a
        # prefix, so each takes its own; in the last columns before the frame cap they are a suffix, and the
        # frames there take the lower heads' tokens. Kept, so the output is the reference's.
        column = np.full(CODEBOOKS, self.masked, dtype=np.int64)
        open_at = np.flatnonzero(self._open(col))
        column[open_at] = t[: open_at.size]
        # the reference's last column writes nothing past the frames; stop when the next would be that one
        done = not prefill and (remaining <= 0 or col + 1 >= self.limit + CODEBOOKS)
        return column, stopping, remaining, done

    def record(self, planned: tuple[np.ndarray, bool, int, bool]) -> tuple[np.ndarray | None, bool]:
        """Commit a `plan`: (the frame it completes or None, done)."""
        column, self.stopping, self.remaining, done = planned
        self.columns.append(column)
        col = len(self.columns) - 1
        j = col - CODEBOOKS
        dropped = done and self.remaining <= 0 and self.stopping  # the EOS frame itself
        if 0 <= j < self.limit and not dropped:
            frame = np.array([self.columns[j + k + 1][k] for k in range(CODEBOOKS)], dtype=np.int64)
            frame[frame >= 1024] = 0
            return frame, done
        return None, done

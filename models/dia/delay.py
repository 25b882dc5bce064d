"""The delay pattern, kept inside the program: the engine only ever sees ALIGNED frames.

Dia's channel c at decoder position p carries the code of audio frame p - delay[c] (delays
0, 8, 9, ..., 15). The reference builds a "delay mask" for the prompt region (BOS where p <= delay[c],
the audio prompt's codes shifted by the delays, PAD = free) and forces those tokens over whatever the
model samples there. Generation ends with a drain: channel 0 emits EOS at position s, channel c is
forced to EOS at s + delay[c], after which a channel only carries PAD.

Positions: g = 1 + prompt frames is the first generated position; aligned frame j (0-based, after the
prompt) is channel c's token at g + j + delay[c], complete once position g + j + max(delay) has been
sampled. So the first frame costs max(delay) + 1 decoder steps instead of 1 (15 extra steps for Dia:
174 ms of audio at 86 frames/s, paid once per request as time-to-first-audio); after that one frame
comes out per step. With EOS at s there are F = s - g frames; the last one completes at
s + max(delay) - 1, the step after which the request is done (the reference runs one more step whose
tokens are all EOS/PAD and dropped).
"""

from __future__ import annotations

import numpy as np


def delayed_prefix(codes: np.ndarray | None, delay: tuple[int, ...], bos: int, pad: int) -> np.ndarray:
    """The reference processor's delayed decoder input for an (optional) audio prompt [T, C]:
    [T + 1 + max(delay), C]; PAD marks positions the model samples freely."""
    C, D = len(delay), max(delay)
    T = 0 if codes is None else int(codes.shape[0])
    undelayed = np.full((T + 1 + D, C), pad, dtype=np.int64)
    undelayed[0] = bos
    if T:
        undelayed[1 : T + 1] = codes
    out = np.empty_like(undelayed)
    for c, d in enumerate(delay):
        src = np.arange(undelayed.shape[0]) - d
        out[:, c] = np.where(src < 0, bos, undelayed[np.clip(src, 0, None), c])
    return out


class DelayTracker:
    """One request's view of the delay pattern: what to feed at each position, which positions are
    forced, when an aligned frame is complete, and when the request is done."""

    def __init__(
        self, codes: np.ndarray | None, delay: tuple[int, ...], bos: int, eos: int, pad: int, max_frames: int
    ) -> None:
        self.delay = np.asarray(delay, dtype=np.int64)
        self.D = int(self.delay.max())
        self.eos, self.pad = eos, pad
        self.mask = delayed_prefix(codes, delay, bos, pad)
        self.first = 1 if codes is None else int(codes.shape[0]) + 1  # g
        self.tokens: list[np.ndarray] = [self.mask[p].copy() for p in range(self.first)]
        self.finished = np.zeros(len(delay), dtype=bool)
        self.limit_pos = self.first + max_frames  # EOS is forced here at the latest
        self.frames_total: int | None = None  # F, known once channel 0 emits EOS
        self.next_frame = 0

    @property
    def position(self) -> int:
        """The position the next sampled tokens belong to (= decoder positions fed so far)."""
        return len(self.tokens)

    def prefix_inputs(self) -> np.ndarray:
        return np.stack(self.tokens)  # [g, C]

    def last_input(self) -> np.ndarray:
        return self.tokens[-1]

    def record(self, sampled: np.ndarray) -> tuple[list[np.ndarray], bool]:
        """Append the sampled tokens [C] of position `self.position`; return the aligned frames that
        became complete and whether the request is done."""
        p = self.position
        tok = np.where(self.finished, self.pad, sampled).astype(np.int64)
        self.finished |= tok == self.eos  # the reference's per-channel EOS stopping rule
        if p < self.mask.shape[0]:
            tok = np.where(self.mask[p] != self.pad, self.mask[p], tok)
        self.tokens.append(tok)
        if self.frames_total is None and tok[0] == self.eos:
            self.frames_total = p - self.first
        frames = []
        while self.frames_total is None or self.next_frame < self.frames_total:
            j = self.next_frame
            need = self.first + j + self.D
            if need > p:
                break
            frames.append(np.array([self.tokens[self.first + j + d][c] for c, d in enumerate(self.delay)]))
            self.next_frame += 1
        done = self.frames_total is not None and self.next_frame >= self.frames_total
        return frames, done

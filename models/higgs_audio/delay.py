"""Higgs Audio's delay pattern, kept inside the program so the engine sees ALIGNED frames only.

The reference (transformers 5.23, `HiggsAudioV2DelayPatternLogitsProcessor` + the generation mixin) samples
one delayed position of C = 8 codebooks per step. Per request it keeps two counters per codebook, set up from
the LAST C PROMPT IDS on the first step: `bos` = delay - (C - i) with i the first `<|audio_out_bos|>` among
them (zeros when absent), `eos` = delay - (C - j) with j the first audio-delay token (delay when absent),
delay = 1..C. Each step: codebooks with bos >= 0 are forced to stream BOS (then bos -= 1); if the previous
placeholder was the delay token, eos -= 1; codebooks with eos <= 0 are forced to stream EOS. The placeholder
fed next is the audio token, the delay token once any codebook emitted EOS (and from then on), the text EOS
once every codebook did, which ends the request.

With the generation prompt ending in `<|audio_out_bos|>` that gives: step 0 all BOS, codebook k free from step
k + 1; a natural EOS on any codebook at step s closes codebook k at step s + 1 + k and the request with an
all-EOS frame at s + C. Aligned frame j (what the processor's batch_decode hands the codec) is codebook k's
token at step 1 + j + k, clipped to the real codes [0, BOS): it is complete once step j + C is sampled, and it
exists unless that step is the closing all-EOS frame. TTFA therefore pays C = 8 extra steps (320 ms of audio
at 25 Hz) before the first frame; after that one frame per step. `max_frames` ends a request after that many
frames, as `generate(max_new_tokens=max_frames + C)` would.
"""

from __future__ import annotations

import numpy as np


def init_counters(
    prompt_tail: list[int], C: int, audio_bos: int, audio_delay: int
) -> tuple[np.ndarray, np.ndarray]:
    delay = np.arange(1, C + 1, dtype=np.int64)
    tail = list(prompt_tail)[-C:]
    n = len(tail)  # the reference slices input_ids[:, -C:]; a shorter prompt keeps its length
    bos_i = next((i for i, t in enumerate(tail) if t == audio_bos), None)
    bos = np.zeros(C, dtype=np.int64) if bos_i is None else delay - (n - bos_i)
    eos_i = next((i for i, t in enumerate(tail) if t == audio_delay), None)
    eos = delay.copy() if eos_i is None else delay - (n - eos_i)
    return bos, eos


class DelayTracker:
    """One request's delay-pattern state: the forced-token masks for the next step, the placeholder stream,
    and the aligned frames that became complete."""

    def __init__(
        self,
        prompt_ids: list[int],
        C: int,
        stream_bos: int,
        stream_eos: int,
        audio_token: int,
        audio_bos: int,
        audio_delay: int,
        text_eos: int,
        max_frames: int,
        history: np.ndarray | None = None,
    ) -> None:
        self.C, self.bos_id, self.eos_id = C, stream_bos, stream_eos
        self.audio_token, self.audio_delay, self.text_eos = audio_token, audio_delay, text_eos
        self.bos, self.eos = init_counters(prompt_ids, C, audio_bos, audio_delay)
        self.last_text = int(prompt_ids[-1])
        self.max_frames = max_frames
        self.positions: list[np.ndarray] = []  # sampled tokens per step [C]
        # Frames seen before this request's generation (a voice clone's prompt audio), for the RAS window.
        self.history = np.zeros((0, C), dtype=np.int64) if history is None else np.asarray(history)
        self.frames_out = 0
        self.done = False

    def forced(self) -> tuple[np.ndarray, np.ndarray]:
        """Masks for the step about to be sampled: (force BOS [C], force EOS [C]). Advances the counters the
        way the processor does on each call, so call it exactly once per step."""
        force_bos = self.bos >= 0
        self.bos[force_bos] -= 1
        if self.last_text == self.audio_delay:
            self.eos -= 1
        return force_bos, self.eos <= 0

    def window(self, n: int) -> np.ndarray:
        """The last `n` frames fed to the model (prompt audio + generated), for repetition-aware sampling."""
        gen = np.stack(self.positions) if self.positions else np.zeros((0, self.C), dtype=np.int64)
        return np.concatenate([self.history, gen])[-n:]

    def record(self, tokens: np.ndarray) -> list[np.ndarray]:
        """Append the step's tokens [C]; return the aligned frames that became complete."""
        tok = np.asarray(tokens, dtype=np.int64)
        self.positions.append(tok)
        is_eos = tok == self.eos_id
        closing = bool(is_eos.all())
        nxt = self.audio_token
        if bool(is_eos.any()) or self.last_text == self.audio_delay:
            nxt = self.audio_delay
        if closing:
            nxt = self.text_eos
        self.last_text = nxt
        frames = []
        p = len(self.positions) - 1
        if not closing and p >= self.C and self.frames_out < self.max_frames:
            j = p - self.C
            frame = np.array([self.positions[1 + j + k][k] for k in range(self.C)], dtype=np.int64)
            frames.append(np.clip(frame, 0, self.bos_id - 1))
            self.frames_out += 1
        self.done = closing or self.frames_out >= self.max_frames
        return frames

    def last_input(self) -> np.ndarray:
        return self.positions[-1]

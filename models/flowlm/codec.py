"""The codec stage's slot machinery that upstream's CosyVoice models share (cosyvoice/cli/model.py, the
`tts` of CosyVoice2Model and CosyVoice3Model): speech tokens -> 24 kHz PCM per request in a slot, in one
of upstream's two outputs:

* "stream" (upstream `stream=True`): hops of 25 + pad tokens (pad makes the prompt plus the first hop a
  whole number of 25-token blocks), then 50, then 100 per hop, each needing the flow's look-ahead tokens;
  the LAST chunk is the flow over all tokens with full attention (upstream calls token2wav without
  `stream=`), of which the frames not yet emitted are kept.
* "offline" (upstream `stream=False`): the flow over all tokens with full attention, once the request's
  last token is in.

Engine chunks (CodecItem) may end anywhere: tokens wait in the slot until a hop is complete. One pass of
`decode` runs every pending hop of every item, round by round (round k holds each request's k-th pending
hop), a request's final chunk after all of its full hops. What a hop and a final chunk compute (the
flow's estimator, the vocoder and its caches) is each family's own (`_open`, `_hops`, `_finals`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from ..base import CodecItem, check_codec_batch
from .options import MODES  # the one list, declared with the option

FIRST_HOP, MAX_HOP, HOP_SCALE = 25, 100, 2  # upstream's token_hop_len, 4x it, stream_scale_factor


@dataclass
class VoiceState:
    """What the flow needs of the voice (a spk2info entry or a cloned reference)."""

    prompt_tokens: torch.Tensor  # [P] flow prompt speech tokens
    prompt_feat: torch.Tensor  # [2P, 80] prompt mel
    embedding: torch.Tensor  # [192] speaker embedding (flow_embedding)


@dataclass
class Slot:
    """One request's place in the hop schedule; a family's slot adds its flow and vocoder state."""

    run: Any  # the family's flow state for this request
    mode: str
    tokens: list[int] = field(default_factory=list)
    offset: int = 0  # tokens whose mel is done
    hop: int = FIRST_HOP
    pad: int = 0
    done: bool = False


def first_hop_pad(prompt_tokens: int) -> int:
    """Tokens added to the first hop so that the voice prompt plus it fill whole FIRST_HOP blocks."""
    return -prompt_tokens % FIRST_HOP


class HopCodec(ABC):
    """Per-slot bookkeeping and upstream's hop schedule; `lookahead` is the flow's pre_lookahead_len."""

    def __init__(self, lookahead: int) -> None:
        self.lookahead = lookahead
        self.slots: list[Any] = []  # the family's Slot subclass per slot, None when free
        self.voices: dict[int, tuple[VoiceState, str]] = {}  # set by the program when a request starts

    def init_slots(self, n: int) -> None:
        self.slots = [None] * n
        self.voices.clear()

    def bind(self, slot: int, voice: VoiceState, mode: str) -> None:
        if mode not in MODES:
            raise ValueError(f"codec mode must be one of {', '.join(MODES)}, got {mode!r}")
        self.voices[slot] = (voice, mode)

    def release_slot(self, slot: int) -> None:
        if 0 <= slot < len(self.slots):
            self.slots[slot] = None
        self.voices.pop(slot, None)

    def stream_hop_ends(self, prompt_tokens: int, total: int) -> list[int]:
        """The token counts at which a streaming request of `total` tokens, voice prompt `prompt_tokens`
        long, completes each block-causal hop before its final chunk (upstream's schedule, as `decode`
        runs it: FIRST_HOP + the prompt's pad, then x HOP_SCALE up to MAX_HOP; each hop also waits for the
        flow's look-ahead tokens). Benchmarks feed a codec these hops."""
        pad = first_hop_pad(prompt_tokens)
        ends, hop, end = [], FIRST_HOP, 0
        while end + hop + (0 if ends else pad) + self.lookahead <= total:
            end += hop + (0 if ends else pad)
            ends.append(end)
            hop = min(MAX_HOP, hop * HOP_SCALE)
        return ends

    def _bound_voice(self, slot: int) -> tuple[VoiceState, str]:
        voice, mode = self.voices.get(slot) or (None, "")
        if voice is None:
            raise RuntimeError(f"codec slot {slot} has no voice bound (the program binds it at prefill)")
        return voice, mode

    @abstractmethod
    def _open(self, slot: int) -> Slot:
        """A new request's slot state, from the voice and mode bound to `slot`."""

    @abstractmethod
    def _hops(self, hops: list[tuple[int, int]]) -> list[np.ndarray]:
        """PCM of each (slot, n tokens) block-causal hop; advances the slot's offset and hop."""

    @abstractmethod
    def _finals(self, slots: list[int]) -> list[np.ndarray]:
        """PCM of each slot's final chunk (full attention over all tokens); marks the slot done."""

    # --- planning: which hops are complete -----------------------------------------------------------
    def _next_hop(self, s: Slot, final: bool) -> tuple[str, int] | None:
        """('hop', n tokens) for the next block-causal hop, ('final', 0) for the last chunk, or None."""
        if s.done:
            return None
        if s.mode == "stream":
            this = s.hop + s.pad if s.offset == 0 else s.hop
            if len(s.tokens) - s.offset >= this + self.lookahead:
                return ("hop", this)
        return ("final", 0) if final else None

    @torch.inference_mode()
    def decode(self, items: list[CodecItem]) -> list[np.ndarray]:
        check_codec_batch(items, len(self.slots))
        order = [it.slot for it in items]
        for it in items:
            if it.first or self.slots[it.slot] is None:
                self.slots[it.slot] = self._open(it.slot)
            self.slots[it.slot].tokens.extend(int(t) for t in np.asarray(it.codes).reshape(-1))
        out: dict[int, list[np.ndarray]] = {sl: [] for sl in order}
        finals = {it.slot: it.last for it in items}
        while True:
            todo = [(sl, self._next_hop(self.slots[sl], finals[sl])) for sl in order]
            todo = [(sl, h) for sl, h in todo if h is not None]
            if not todo:
                break
            hops = [(sl, n) for sl, (kind, n) in todo if kind == "hop"]
            last = [sl for sl, (kind, _) in todo if kind == "final"]
            if hops:
                for sl, pcm in zip([h[0] for h in hops], self._hops(hops), strict=True):
                    out[sl].append(pcm)
            if last and not hops:  # a request's final chunk runs after all of its full hops
                for sl, pcm in zip(last, self._finals(last), strict=True):
                    out[sl].append(pcm)
        return [np.concatenate(out[sl]) if out[sl] else np.zeros(0, np.float32) for sl in order]

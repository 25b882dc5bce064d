"""The codec stage: speech tokens -> 24 kHz PCM, per request in a slot, reproducing one of upstream's two
outputs exactly (cosyvoice/cli/model.py, CosyVoice3Model.tts):

* "stream" (upstream `stream=True`, our default): hops of 25 + pad tokens (pad makes the prompt plus the
  first hop a whole number of 25-token blocks), then 50, then 100 per hop, each needing 3 tokens of look-
  ahead; the DiT attends block-causally in blocks of 50 mel frames; the LAST chunk is the flow over all
  tokens with full attention (upstream calls token2wav without `stream=`), of which the frames not yet
  emitted are kept; the vocoder emits what its look-ahead allows (8 mel frames are held back).
  Upstream re-runs the flow over the whole history and the vocoder over the whole mel for every hop; here
  a hop runs the DiT on its new frames only, against the keys/values of the frames before it kept per
  Euler step and CFG row (exact: block-causal attention never lets an earlier block see a later one), and
  the vocoder on a window of the last frames (`hift.MARGIN` frames of warm-up). Only the last chunk,
  full attention by upstream's definition, costs the whole utterance once.
* "offline" (upstream `stream=False`): the flow over all tokens with full attention and the vocoder over
  all of it, once the request's last token is in.

Engine chunks (CodecItem) may end anywhere: tokens wait in the slot until a hop is complete. One pass
of `decode` runs every pending hop of every item; hops of different requests share DiT batches (one
batch per round: round k holds each request's k-th pending hop); the vocoder runs per request.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from ..base import CodecItem, check_codec_batch
from .flow import Flow, FlowRun
from .hift import MARGIN, HiFT
from .options import MODES  # the one list, declared with the option

FIRST_HOP, MAX_HOP, HOP_SCALE = 25, 100, 2  # CosyVoice3Model: token_hop_len, 4x it, stream_scale_factor


@dataclass
class VoiceState:
    """What the flow needs of the voice (a spk2info entry or a cloned reference)."""

    prompt_tokens: torch.Tensor  # [P] flow prompt speech tokens
    prompt_feat: torch.Tensor  # [2P, 80] prompt mel
    embedding: torch.Tensor  # [192] speaker embedding (flow_embedding)


@dataclass
class Slot:
    run: FlowRun
    mode: str
    tokens: list[int] = field(default_factory=list)
    offset: int = 0  # tokens whose mel is done
    hop: int = FIRST_HOP
    pad: int = 0
    mel: torch.Tensor | None = None  # [80, M] generated mel so far (upstream's hift cache)
    f0: torch.Tensor | None = None  # [K] f0 of frames whose f0 is final
    rad: torch.Tensor | None = None  # [K, H] phase increments of those frames
    emitted: int = 0  # samples handed out
    done: bool = False


class CosyCodec:
    def __init__(self, flow: Flow, hift: HiFT) -> None:
        self.flow, self.hift = flow, hift
        self.slots: list[Slot | None] = []
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
        lookahead = self.flow.cfg.pre_lookahead_len
        pad = -prompt_tokens % FIRST_HOP
        ends, hop, end = [], FIRST_HOP, 0
        while end + hop + (0 if ends else pad) + lookahead <= total:
            end += hop + (0 if ends else pad)
            ends.append(end)
            hop = min(MAX_HOP, hop * HOP_SCALE)
        return ends

    def _open(self, slot: int) -> Slot:
        voice, mode = self.voices.get(slot) or (None, "")
        if voice is None:
            raise RuntimeError(f"codec slot {slot} has no voice bound (the program binds it at prefill)")
        run = self.flow.new_run(voice.prompt_tokens, voice.prompt_feat, voice.embedding)
        self.flow.init_caches(run)
        P = int(run.prompt_tokens.numel())
        pad = int(np.ceil(P / FIRST_HOP) * FIRST_HOP - P)
        return Slot(run=run, mode=mode, pad=pad)

    # --- planning: which hops are complete -----------------------------------------------------------
    def _next_hop(self, s: Slot, final: bool) -> tuple[str, int] | None:
        """('hop', n tokens) for the next block-causal hop, ('final', 0) for the last chunk, or None."""
        if s.done:
            return None
        L = self.flow.cfg.pre_lookahead_len
        if s.mode == "stream":
            this = s.hop + s.pad if s.offset == 0 else s.hop
            if len(s.tokens) - s.offset >= this + L:
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
        out = {sl: [] for sl in order}
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

    # --- flow -------------------------------------------------------------------------------------
    def _hops(self, hops: list[tuple[int, int]]) -> list[np.ndarray]:
        slots = [self.slots[sl] for sl, _ in hops]
        mus, starts = [], []
        for s, (_, n) in zip(slots, hops, strict=True):
            toks = torch.tensor(s.tokens[: s.offset + n + self.flow.cfg.pre_lookahead_len])
            mus.append(self.flow.mu(s.run, toks, finalize=False))
            starts.append(s.run.frames)
        mels = self.flow.solve([s.run for s in slots], mus, starts, streaming=True, keep=True)
        pcm = []
        for s, (_, n), m, start in zip(slots, hops, mels, starts, strict=True):
            p = s.run.prompt_feat.shape[0]
            new = m[max(0, p - start) :].T  # generated frames only
            s.offset += n
            s.hop = min(MAX_HOP, s.hop * HOP_SCALE)
            pcm.append(self._vocode(s, new, final=False))
        return pcm

    def _finals(self, sls: list[int]) -> list[np.ndarray]:
        slots = [self.slots[sl] for sl in sls]
        ratio = self.flow.cfg.token_mel_ratio
        mus = [self.flow.mu(s.run, torch.tensor(s.tokens, dtype=torch.long), finalize=True) for s in slots]
        mels = self.flow.solve([s.run for s in slots], mus, [0] * len(slots), streaming=False, keep=False)
        pcm = []
        for s, m in zip(slots, mels, strict=True):
            p = s.run.prompt_feat.shape[0]
            new = m[p + s.offset * ratio :].T
            s.offset = len(s.tokens)
            s.done = True
            s.run.caches = []  # the request is over: give the keys/values back now
            pcm.append(self._vocode(s, new, final=True))
        return pcm

    # --- vocoder ------------------------------------------------------------------------------------
    def _vocode(self, s: Slot, new_mel: torch.Tensor, final: bool) -> np.ndarray:
        h = self.hift
        up = h.c.upsample
        new_mel = new_mel.to(h.dtype)  # the flow's mel in the vocoder's dtype (HIFT_DTYPE)
        s.mel = new_mel if s.mel is None else torch.cat([s.mel, new_mel], dim=1)
        M = s.mel.shape[1]
        K = 0 if s.f0 is None else int(s.f0.shape[0])
        f0_end = M if final else max(M - 3, 0)
        if f0_end > K:
            w = max(0, K - 16)  # the f0 predictor sees 8 frames back: 16 is plenty
            look = None if final else s.mel[:, f0_end:M]
            f0 = h.f0(s.mel[:, w:f0_end], look)[K - w :]
            rad = h.rad(f0)
            s.f0 = f0 if s.f0 is None else torch.cat([s.f0, f0])
            s.rad = rad if s.rad is None else torch.cat([s.rad, rad])
        end = M if final else max(M - 8, 0)  # samples [emitted, end * up) become final now
        if end * up <= s.emitted:
            return np.zeros(0, np.float32)
        w0 = max(0, s.emitted // up - MARGIN)
        phase = torch.cumsum(s.rad, dim=0)[w0:f0_end]
        src = h.source(s.f0[w0:f0_end], phase, w0)
        look = None if final else s.mel[:, M - 7 : M - 3]
        mel_end = M if final else M - 7
        wav = h.decode(s.mel[:, w0:mel_end], look, src)
        if not final:
            wav = wav[: (end - w0) * up]
        wav = torch.clamp(wav, -h.c.audio_limit, h.c.audio_limit)
        pcm = wav[s.emitted - w0 * up :].float().cpu().numpy()
        s.emitted = end * up
        return pcm

"""CosyVoice 3's codec stage (upstream CosyVoice3Model.tts): the library's hop schedule and slots
(models/flowlm/codec.py) around the DiT flow and the causal vocoder.

* "stream": the DiT attends block-causally in blocks of 50 mel frames; the vocoder emits what its
  look-ahead allows (8 mel frames are held back). Upstream re-runs the flow over the whole history and
  the vocoder over the whole mel for every hop; here a hop runs the DiT on its new frames only, against
  the keys/values of the frames before it kept per Euler step and CFG row (exact: block-causal attention
  never lets an earlier block see a later one), and the vocoder on a window of the last frames
  (`hift.MARGIN` frames of warm-up). Only the last chunk, full attention by upstream's definition, costs
  the whole utterance once.
* "offline": the flow over all tokens with full attention and the vocoder over all of it.

Hops of different requests share DiT batches (one batch per round); the vocoder runs per request.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from ..flowlm.codec import HOP_SCALE, MAX_HOP, HopCodec, Slot, first_hop_pad
from .flow import Flow, FlowRun
from .hift import MARGIN, HiFT


@dataclass
class CausalSlot(Slot):
    run: FlowRun
    mel: torch.Tensor | None = None  # [80, M] generated mel so far (upstream's hift cache)
    f0: torch.Tensor | None = None  # [K] f0 of frames whose f0 is final
    rad: torch.Tensor | None = None  # [K, H] phase increments of those frames
    emitted: int = 0  # samples handed out


class CosyVoice3Codec(HopCodec):
    def __init__(self, flow: Flow, hift: HiFT) -> None:
        super().__init__(flow.cfg.pre_lookahead_len)
        self.flow, self.hift = flow, hift
        self.slots: list[CausalSlot | None] = []

    def _open(self, slot: int) -> CausalSlot:
        voice, mode = self._bound_voice(slot)
        run = self.flow.new_run(voice.prompt_tokens, voice.prompt_feat, voice.embedding)
        self.flow.init_caches(run)
        return CausalSlot(run=run, mode=mode, pad=first_hop_pad(int(run.prompt_tokens.numel())))

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
    def _vocode(self, s: CausalSlot, new_mel: torch.Tensor, final: bool) -> np.ndarray:
        h = self.hift
        up = h.c.upsample
        new_mel = new_mel.to(h.dtype)  # the flow's mel in the vocoder's dtype (spec.DTYPE_POLICY)
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

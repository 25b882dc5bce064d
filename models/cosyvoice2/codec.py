"""The codec stage: speech tokens -> 24 kHz PCM per request in a slot, reproducing one of upstream's two
outputs exactly (cosyvoice/cli/model.py, CosyVoice2Model.tts / token2wav):

* "stream" (upstream `stream=True`, our default): the library's hop schedule (25 + pad, 50, 100 tokens,
  each waiting for 3 look-ahead tokens; models/flowlm/codec.py), the flow block-causal (encoder blocks of
  25 tokens, estimator blocks of 50 frames) on the hop's new tokens only against the request's caches
  (flow.py), the LAST chunk the flow over all tokens with full attention (upstream calls token2wav
  without `stream=`) keeping the frames not yet emitted. The vocoder runs as upstream's hift cache does:
  each call decodes the previous call's last 8 mel frames + the new mel, its source's first 3840 samples
  replaced by the previous call's, its first 3840 samples cross-faded (Hamming) with the previous call's
  held-back tail, and (but for the last call) holds its own last 3840 samples back.
* "offline" (upstream `stream=False`): the flow over all tokens with full attention and one vocoder call.

Each vocoder call draws fresh noise (hift.py) from the request's own generator, in upstream's order
(one call per hop, then the final one), so every request of a batch keeps its own draws. Upstream draws
the LM's samples and the vocoder's noise from one global generator: offline, its LM finishes before the
vocoder starts, so the slot continues the LM row's generator (the program hands it over at prefill) and a
request seeded N gives upstream's output after torch.manual_seed(N) sampled or greedy; streamed, its LM
thread and vocoder draw in an order set by thread timing, so the slot draws from a generator of its own
seeded N: exact wherever the LM draws nothing (greedy). A codec engine in another process (codec_binding)
gets the seed only, and so the seeded generator in both modes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from ..flowlm.codec import HOP_SCALE, MAX_HOP, HopCodec, Slot, VoiceState, first_hop_pad
from .flow import Flow, FlowRun
from .hift import HiFT

MEL_CACHE = 8  # CosyVoice2Model.mel_cache_len
SOURCE_CACHE = MEL_CACHE * 480  # source_cache_len (samples)


@dataclass
class HiftCache:
    mel: torch.Tensor  # [80, 8]
    source: torch.Tensor  # [1, 1, 3840]
    speech: torch.Tensor  # [3840]


@dataclass
class Slot2(Slot):
    run: FlowRun
    gen: torch.Generator | None = None
    hift_cache: HiftCache | None = None


class CosyCodec2(HopCodec):
    def __init__(self, flow: Flow, hift: HiFT) -> None:
        super().__init__(flow.cfg.pre_lookahead_len)
        self.flow, self.hift = flow, hift
        self.slots: list[Slot2 | None] = []
        self.seeds: dict[int, int] = {}
        # offline requests: the LM's own generator, whose draws upstream's vocoder continues (below)
        self.lm_gens: dict[int, torch.Generator] = {}
        self.window = torch.from_numpy(np.hamming(2 * SOURCE_CACHE))  # float64, as upstream's numpy window

    def bind(self, slot: int, voice: VoiceState, mode: str, seed: int = 0) -> None:
        super().bind(slot, voice, mode)
        self.seeds[slot] = seed
        self.lm_gens.pop(slot, None)  # a new request: the program hands its LM generator over after this

    def release_slot(self, slot: int) -> None:
        super().release_slot(slot)
        self.seeds.pop(slot, None)
        self.lm_gens.pop(slot, None)

    def _open(self, slot: int) -> Slot2:
        voice, mode = self._bound_voice(slot)
        run = self.flow.new_run(voice.prompt_tokens, voice.prompt_feat, voice.embedding)
        gen = self.lm_gens.get(slot) if mode == "offline" else None
        gen = gen or torch.Generator().manual_seed(self.seeds.get(slot, 0))
        return Slot2(run=run, mode=mode, pad=first_hop_pad(int(run.prompt_tokens.numel())), gen=gen)

    def _hops(self, hops: list[tuple[int, int]]) -> list[np.ndarray]:
        pcm = []
        L = self.flow.cfg.pre_lookahead_len
        for sl, n in hops:
            s = self.slots[sl]
            assert isinstance(s, Slot2)
            mel = self.flow.chunk(s.run, s.tokens[: s.offset + n + L])
            s.offset += n
            s.hop = min(MAX_HOP, s.hop * HOP_SCALE)
            pcm.append(self._vocode(s, mel.T, final=False))
        return pcm

    def _finals(self, sls: list[int]) -> list[np.ndarray]:
        pcm = []
        ratio = self.flow.cfg.token_mel_ratio
        for sl in sls:
            s = self.slots[sl]
            assert isinstance(s, Slot2)
            # the full pass reads none of the streamed chunks' caches: give them back before it, so the
            # last chunk never holds both
            s.run.steps, s.run.enc.kv = [], []
            mel = self.flow.full(s.run, s.tokens)[s.offset * ratio:]
            s.offset = len(s.tokens)
            s.done = True
            pcm.append(self._vocode(s, mel.T, final=True))
        return pcm

    def _vocode(self, s: Slot2, new_mel: torch.Tensor, final: bool) -> np.ndarray:
        assert isinstance(s, Slot2) and s.gen is not None
        c = s.hift_cache
        new_mel = new_mel.to(self.hift.dtype)  # the flow's mel in the vocoder's dtype (spec.DTYPE_POLICY)
        mel = new_mel if c is None else torch.cat([c.mel, new_mel], dim=1)
        speech, source = self.hift.generate(mel, None if c is None else c.source, s.gen)
        if c is not None:
            n = SOURCE_CACHE
            faded = speech[:n].double() * self.window[:n] + c.speech[-n:].double() * self.window[n:]
            speech = torch.cat([faded.to(speech.dtype), speech[n:]])
        if not final:
            tail = SOURCE_CACHE
            s.hift_cache = HiftCache(mel[:, -MEL_CACHE:], source[:, :, -tail:], speech[-tail:])
            speech = speech[:-SOURCE_CACHE]
        return speech.float().cpu().numpy()

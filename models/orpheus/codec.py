"""SNAC in the codec lanes: Orpheus frames [n, 7] -> 24 kHz PCM, streamed per request through a slot table.

SNAC's decoder is non-causal (convolutions on both sides at every rate), so a chunk cannot simply be decoded
on its own. Two streaming modes, chosen per request (options.py `snac_stream`) and held by the request's slot:

* "whole" (the default): exact to the whole-utterance decode (`SNAC.decode` of every frame at once, as the
  Orpheus model card's notebook decodes). A sample depends on `context_samples()` = 5,636 samples (2.75
  frames) of input either side (models/codecs/snac/config.py), so each chunk holds back its last HOLD = 3
  frames (256 ms) and re-decodes 3 frames of left context from the slot's history: chunk 0 of n frames
  plays n - 3 frames, a middle chunk n, the last chunk n + 3; the request's total is frames * 2048
  samples. Noise: `PositionNoise`.
* "canopy": canopyai/Orpheus-TTS's streaming rule: whenever a frame completes and at least four are there,
  decode the last four frames (28 tokens) and keep samples [2048:4096], i.e. frame f's audio comes from the
  window f-1..f+2. The first frame and the last two are never played (a request plays frames - 3 frames), and
  the audio of a frame differs from the whole decode's by up to a few 1e-3 (the window's edges). Noise:
  `SequentialNoise`, equal to the reference's after `torch.manual_seed(seed)`.

Both need four frames before the first audio (chunk 0 >= 4 frames): "whole" then plays frame 0, "canopy"
frame 1. Windows of equal length across requests share one padded-free forward (grouped by length).
Re-runnable (models/base.py): slot state is committed only after the whole batch decoded.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import torch

from ..base import CodecItem, check_codec_batch
from ..codecs.snac.model import SnacDecoder
from ..codecs.snac.noise import PositionNoise, SequentialNoise
from ..codecs.snac.weights import load_snac
from .tokens import CODES, FRAME_TOKENS, levels

MODES = ("whole", "canopy")
DEFAULT_MODE = "whole"
CANOPY_WINDOW = 4  # frames the reference decodes each time
CANOPY_KEEP = 1  # ... of which it keeps the second


@dataclass
class SlotState:
    mode: str
    seed: int
    history: np.ndarray = field(default_factory=lambda: np.zeros((0, FRAME_TOKENS), dtype=np.int64))
    frames: int = 0  # frames received
    played: int = 0  # frames whose audio has been returned (canopy: the next frame to play, from 1)
    noise: PositionNoise | SequentialNoise | None = None


@dataclass
class _Window:
    item: int
    codes: np.ndarray  # [w, 7]
    noise: list[torch.Tensor]  # per noise block [1, 1, T_i]
    lo: int  # samples of the window's output to return
    hi: int


class OrpheusCodec:
    def __init__(self, net: SnacDecoder) -> None:
        self.net = net
        self.cfg = net.cfg
        self.sample_rate = self.cfg.sampling_rate
        self.samples_per_frame = self.cfg.samples_per_frame
        self.hold = math.ceil(self.cfg.context_samples() / self.samples_per_frame)  # 3 for snac_24khz
        self.slots: list[SlotState | None] = []

    @classmethod
    def load(cls, root: Path, device: str = "cpu", dtype: torch.dtype = torch.float32) -> OrpheusCodec:
        return cls(load_snac(Path(root), torch.device(device), dtype))

    @property
    def device(self) -> torch.device:
        return self.net.quantizer.quantizers[0].codebook.weight.device

    # --- slots ------------------------------------------------------------------------------------
    def init_slots(self, num_slots: int) -> None:
        if num_slots < 1:
            raise ValueError(f"the codec slot table needs at least 1 slot, got {num_slots}")
        self.slots = [None] * num_slots

    def bind(self, slot: int, mode: str, seed: int) -> None:
        if mode not in MODES:
            raise ValueError(f"SNAC streaming mode must be one of {', '.join(MODES)}, got {mode!r}")
        self._check_slot(slot)
        self.slots[slot] = SlotState(mode=mode, seed=int(seed))

    def release_slot(self, slot: int) -> None:
        self._check_slot(slot)
        self.slots[slot] = None

    def _check_slot(self, slot: int) -> None:
        if not 0 <= slot < len(self.slots):
            raise ValueError(f"codec slot {slot} is outside the table of {len(self.slots)} slots")

    # --- decoding ---------------------------------------------------------------------------------
    def _noise_lengths(self, frames: int) -> list[int]:
        return [frames * self.cfg.positions_per_frame(i) for i in range(self.net.noise_blocks())]

    def _forward(self, windows: list[np.ndarray], noise: list[list[torch.Tensor]]) -> torch.Tensor:
        """Equal-length windows [w, 7] -> PCM [B, w * 2048] (fp32, host)."""
        dev = self.device
        lv = levels(np.stack(windows))
        codes = [torch.from_numpy(np.ascontiguousarray(c)).to(dev) for c in lv]
        per_block = [torch.cat([n[i] for n in noise]).to(dev) for i in range(self.net.noise_blocks())]
        with torch.inference_mode():
            wav = self.net(codes, per_block or None)
        return wav[:, 0].float().cpu()

    def _run(self, windows: list[_Window], n_items: int) -> list[np.ndarray]:
        groups: dict[int, list[int]] = {}
        for j, w in enumerate(windows):
            groups.setdefault(w.codes.shape[0], []).append(j)
        cut: list[torch.Tensor | None] = [None] * len(windows)
        for idx in groups.values():
            out = self._forward([windows[j].codes for j in idx], [windows[j].noise for j in idx])
            for b, j in enumerate(idx):
                cut[j] = out[b, windows[j].lo : windows[j].hi]
        pcm: list[list[torch.Tensor]] = [[] for _ in range(n_items)]
        for w, c in zip(windows, cut, strict=True):
            assert c is not None
            pcm[w.item].append(c)
        return [torch.cat(p).numpy() if p else np.zeros(0, dtype=np.float32) for p in pcm]

    def decode(self, items: list[CodecItem]) -> list[np.ndarray]:
        """One pass over chunks of several requests; float32 PCM per item (the module doc says how much)."""
        if not items:
            return []
        check_codec_batch(items, len(self.slots))
        windows: list[_Window] = []
        new: list[SlotState] = []
        saved: list[tuple[SequentialNoise, torch.Tensor]] = []
        try:
            for i, it in enumerate(items):
                st = self.slots[it.slot]
                if st is None:
                    raise ValueError(f"codec slot {it.slot} has no request bound to it (bind it first)")
                codes = self._check(it.codes, it.slot)
                if it.first:
                    st = SlotState(mode=st.mode, seed=st.seed)
                elif st.frames == 0:
                    raise ValueError(
                        f"codec slot {it.slot} has no request in progress: its chunk must be first"
                    )
                if st.mode == "whole":
                    st = self._plan_whole(i, st, codes, it.last, windows)
                else:
                    if st.noise is None:
                        st = replace(st, noise=SequentialNoise(st.seed))
                    assert isinstance(st.noise, SequentialNoise)
                    saved.append((st.noise, st.noise.state()))
                    st = self._plan_canopy(i, st, codes, windows)
                new.append(st)
            pcm = self._run(windows, len(items))
        except BaseException:
            for gen, state in saved:  # a failed pass leaves every slot as it was (models/base.py)
                gen.restore(state)
            raise
        for it, st in zip(items, new, strict=True):
            self.slots[it.slot] = st
        return pcm

    def _plan_whole(
        self, i: int, st: SlotState, codes: np.ndarray, last: bool, out: list[_Window]
    ) -> SlotState:
        spf, hold = self.samples_per_frame, self.hold
        a = st.frames
        end = a + codes.shape[0]
        upto = end if last else max(st.played, end - hold)  # frames settled by what has arrived
        noise = st.noise if isinstance(st.noise, PositionNoise) else PositionNoise(st.seed)
        if upto > st.played:
            start = max(0, st.played - hold)  # left context the whole decode has there
            have = np.concatenate([st.history, codes])  # history holds frames [a - len(history), a)
            w = have[start - (a - st.history.shape[0]) :]
            lens = self._noise_lengths(1)
            nz = [noise.window(b, start * n, (end - start) * n)[None, None] for b, n in enumerate(lens)]
            out.append(_Window(i, w, nz, (st.played - start) * spf, (upto - start) * spf))
        keep = 2 * hold
        hist = np.concatenate([st.history, codes])[-keep:]
        return replace(st, history=hist, frames=end, played=upto, noise=noise)

    def _plan_canopy(self, i: int, st: SlotState, codes: np.ndarray, out: list[_Window]) -> SlotState:
        spf = self.samples_per_frame
        a = st.frames
        end = a + codes.shape[0]
        have = np.concatenate([st.history, codes])
        base = a - st.history.shape[0]  # frame index of have[0]
        nxt = max(st.played, CANOPY_KEEP)
        assert isinstance(st.noise, SequentialNoise)
        lens = self._noise_lengths(CANOPY_WINDOW)
        # frame f plays once frames f - 1 .. f + 2 are there (the reference decodes at every 7th token
        # from the 28th on: the window ending at the newest frame)
        while nxt + CANOPY_WINDOW - 1 - CANOPY_KEEP < end:
            lo = nxt - CANOPY_KEEP
            w = have[lo - base : lo - base + CANOPY_WINDOW]
            out.append(_Window(i, w, st.noise.draw(lens), CANOPY_KEEP * spf, (CANOPY_KEEP + 1) * spf))
            nxt += 1
        hist = have[-(CANOPY_WINDOW - 1) :]
        return replace(st, history=hist, frames=end, played=nxt)

    def _check(self, codes: np.ndarray, slot: int) -> np.ndarray:
        c = np.asarray(codes)
        if c.ndim != 2 or c.shape[1] != FRAME_TOKENS or c.shape[0] < 1:
            raise ValueError(
                f"chunk of slot {slot} must be [n >= 1, {FRAME_TOKENS}] codes, got shape {c.shape}"
            )
        if not np.issubdtype(c.dtype, np.integer) or int(c.min()) < 0 or int(c.max()) >= CODES:
            raise ValueError(f"chunk of slot {slot}: SNAC codes must be whole numbers in [0, {CODES})")
        return c.astype(np.int64, copy=False)

    # --- offline (tests, references) ----------------------------------------------------------------
    def decode_whole(self, frames: np.ndarray, seed: int) -> np.ndarray:
        """Every frame at once (the whole-utterance decode) with the "whole" mode's noise."""
        f = self._check(frames, -1)
        noise = PositionNoise(seed)
        nz = [noise.window(b, 0, n)[None, None] for b, n in enumerate(self._noise_lengths(f.shape[0]))]
        return self._forward([f], [nz])[0].numpy()

    def whole_noise(self, frames: int, seed: int) -> list[np.ndarray]:
        """The "whole" mode's noise of a `frames`-frame utterance, per noise block [T_i] (for a reference
        decode that takes it instead of its own global-RNG draw)."""
        noise = PositionNoise(seed)
        return [noise.window(b, 0, n).numpy() for b, n in enumerate(self._noise_lengths(frames))]

"""ESPnet's DAC decoder (espnet_dac.py) streamed per request through codec slots; streamed = offline.

The SEANet decoder is not causal (its convolutions pad both sides, reflect at the utterance's edges) and
carries an LSTM, so it cannot be re-run on a sliding window alone. A slot holds two stages' state:

* frame stage: the first convolution's input history (its last kernel - 1 latent frames) and the LSTM's
  (h, c) after the last frame it consumed. A conv-1 output frame t needs latent frames up to t + right
  pad, so each chunk advances the LSTM to `received - right pad` frames (all of them on the last chunk,
  against the reflect padding the offline forward uses); the LSTM, fed frame by frame with its carried
  state, equals one pass over the whole sequence.
* sample stage: the upsampling stack after the LSTM has a finite receptive field of (left, right) LSTM
  frames (SeanetDecoder.upsample_context). The slot keeps the last left + right LSTM output frames; a
  chunk re-runs the stack on [held frames + new frames] and emits the hop samples of every frame whose
  receptive field lies inside that window (and for a window starting at frame 0 the reflect padding is
  the true one), holding back the last `right` frames until the next chunk or the end.

So a request's samples are emitted `holdback_frames` = conv-1 right pad + the stack's right context frames
late (3 + 2 = 5 frames, 100 ms at 16 kHz / 320 for OpusLM's ratios 8, 5, 4, 2 and kernels 7): a first
chunk of n frames yields (n - 5) x hop samples (none when n <= 5), later chunks n x hop, the last one
n x hop + what was held back; the request's total is frames x hop, equal to the offline decode.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from ..base import CheckpointError, CodecItem, check_codec_batch
from ..codecs.dac.codec import DacCodec
from .espnet_dac import DacNet, load_net


class EspnetDacDecoder:
    """The codec lane's ESPnet DAC: `decode(items)` streams per slot, `decode_offline(codes)` is
    `ESPnetGANCodecModel.decode` of the whole utterance."""

    def __init__(self, net: DacNet) -> None:
        self.net = net
        dec = net.decoder
        sh = net.shape
        self.sample_rate, self.hop_length = sh.sample_rate, sh.hop
        self.codebooks = len(net.quantizer.layers)
        self.codebook_size = sh.bins
        conv1 = dec.model[0]
        if sh.pad_mode == "circular":
            raise CheckpointError("encdec_pad_mode circular wraps the utterance's end onto its start: it "
                                  "cannot be streamed (reflect, constant or replicate can)")
        self.pad_left, self.pad_right = conv1.pads
        self.ctx_left, self.ctx_right = dec.upsample_context()
        self.holdback_frames = self.pad_right + self.ctx_right
        # a window shorter than this would meet pad1d's short-input zeros at some layer (never at its edge
        # of the utterance: a start window waits for this many frames)
        self.min_window = dec.min_frames() if sh.pad_mode == "reflect" else 1
        self.window = max(self.ctx_left + self.ctx_right, self.min_window)
        self.width = conv1.conv.conv.out_channels
        self.num_slots = 0
        self._q: torch.Tensor | None = None  # [slots, dim, pad_left + pad_right] latent history
        self._y: torch.Tensor | None = None  # [slots, width, ctx_left + ctx_right] LSTM outputs held
        self._h: torch.Tensor | None = None  # [slots, layers, width]
        self._c: torch.Tensor | None = None
        self._received: list[int] = []  # latent frames seen
        self._fed: list[int] = []  # frames through conv 1 + LSTM
        self._emitted: list[int] = []  # frames whose samples are out
        self._open: list[bool] = []

    @classmethod
    def load(cls, root: Path, device: torch.device | str = "cpu", n_streams: int = 8,
             dtype: torch.dtype = torch.float32) -> EspnetDacDecoder:
        return cls(load_net(Path(root), n_streams, device).to(dtype))

    @property
    def device(self) -> torch.device:
        return self.net.decoder.model[0].conv.conv.weight.device

    # --- offline ----------------------------------------------------------------------------------
    @torch.inference_mode()
    def decode_offline(self, codes: np.ndarray) -> np.ndarray:
        """codes [T, codebooks] -> float32 PCM [T * hop]."""
        c = self._check(codes, "codes")
        z = self.net.quantizer.decode(torch.from_numpy(c.T.copy()).to(self.device)[None])
        return self.net.decoder(z)[0, 0].float().cpu().numpy()

    # --- slots ------------------------------------------------------------------------------------
    def init_slots(self, num_slots: int) -> None:
        if num_slots < 1:
            raise ValueError(f"the codec slot table needs at least 1 slot, got {num_slots}")
        dev, dt = self.device, self.net.decoder.model[0].conv.conv.weight.dtype
        layers = max(1, self.net.shape.lstm)
        self._q = torch.zeros((num_slots, self.net.shape.dim, self.pad_left + self.pad_right), device=dev,
                              dtype=dt)
        self._y = torch.zeros((num_slots, self.width, self.window), device=dev, dtype=dt)
        self._h = torch.zeros((num_slots, layers, self.width), device=dev, dtype=dt)
        self._c = torch.zeros_like(self._h)
        self.num_slots = num_slots
        self._received, self._fed = [0] * num_slots, [0] * num_slots
        self._emitted, self._open = [0] * num_slots, [False] * num_slots

    def slot_bytes(self) -> int:
        if self._q is None:
            return 0
        return sum(t[0].numel() * t.element_size() for t in (self._q, self._y, self._h, self._c))  # type: ignore[union-attr]

    def release_slot(self, slot: int) -> None:
        if not 0 <= slot < self.num_slots:
            raise ValueError(f"codec slot {slot} is outside the table of {self.num_slots} slots")
        self._open[slot] = False
        self._received[slot] = self._fed[slot] = self._emitted[slot] = 0

    # --- streaming --------------------------------------------------------------------------------
    @torch.inference_mode()
    def decode(self, items: list[CodecItem]) -> list[np.ndarray]:
        check_codec_batch(items, self.num_slots)
        out = []
        for it in items:
            if not it.first and not self._open[it.slot]:
                raise ValueError(f"codec slot {it.slot} has no request in progress: its chunk must be first")
            out.append(self._chunk(it.slot, self._check(it.codes, f"chunk of slot {it.slot}"), it.first,
                                   it.last))
        return out

    def _chunk(self, s: int, codes: np.ndarray, first: bool, last: bool) -> np.ndarray:
        assert self._q is not None and self._y is not None and self._h is not None and self._c is not None
        if first:
            self.release_slot(s)
            self._h[s].zero_()
            self._c[s].zero_()
        dev = self.device
        z = self.net.quantizer.decode(torch.from_numpy(codes.T.copy()).to(dev)[None])[0]  # [dim, n]
        n_old, fed, emitted = self._received[s], self._fed[s], self._emitted[s]
        total = n_old + z.shape[1]
        keep = min(n_old, self._q.shape[2])
        lat = torch.cat([self._q[s, :, self._q.shape[2] - keep:], z], dim=1)  # frames [total - len, total)
        lat0 = total - lat.shape[1]
        # frame stage: conv 1 + LSTM up to `upto`
        upto = total if last else total - self.pad_right
        if not last and fed == 0 and total <= self.pad_left and self.net.shape.pad_mode == "reflect":
            upto = 0  # the left reflection needs frames 1..pad_left
        y_new = None
        if upto > fed:
            y_new = self._frames(s, lat, lat0, total, fed, upto, last)
        self._received[s], self._fed[s] = total, max(fed, upto)
        if self._q.shape[2]:
            hist = lat[:, max(0, lat.shape[1] - self._q.shape[2]):]
            self._q[s, :, self._q.shape[2] - hist.shape[1]:] = hist
        # sample stage
        n_y = self._fed[s]
        held = min(fed - max(0, emitted - self.ctx_left), self._y.shape[2])
        ys = self._y[s, :, self._y.shape[2] - held:]
        win = ys if y_new is None else torch.cat([ys, y_new], dim=1)  # frames [n_y - len, n_y)
        w0 = n_y - win.shape[1]
        until = n_y if last else max(emitted, n_y - self.ctx_right)
        if not last and win.shape[1] < self.min_window:
            until = emitted
        pcm = np.zeros(0, dtype=np.float32)
        if until > emitted:
            wav = self.net.decoder.upsample(win[None])[0, 0]
            hop = self.hop_length
            pcm = wav[(emitted - w0) * hop:(until - w0) * hop].float().cpu().numpy()
        if self._y.shape[2]:
            tail = win[:, max(0, win.shape[1] - self._y.shape[2]):]
            self._y[s, :, self._y.shape[2] - tail.shape[1]:] = tail
        self._emitted[s] = until
        self._open[s] = not last
        return pcm

    def _frames(self, s: int, lat: torch.Tensor, lat0: int, total: int, fed: int, upto: int,
                last: bool) -> torch.Tensor:
        """Conv-1 outputs for frames [fed, upto), through the LSTM with the slot's carried state."""
        conv1 = self.net.decoder.model[0]
        if fed == 0 and last:  # the whole utterance at once: ESPnet's padding exactly (tiny inputs too)
            x = conv1(lat[None])
        else:
            # global frame i of the padded input, padded at the true edges as F.pad's mode does
            idx = torch.arange(fed - self.pad_left, upto + self.pad_right)
            outside = (idx < 0) | (idx >= total)
            if conv1.mode == "reflect":
                idx = torch.where(idx < 0, -idx, idx)
                idx = torch.where(idx >= total, 2 * (total - 1) - idx, idx)
            idx = idx.clamp(0, total - 1)  # replicate; constant zeroes them below
            src = lat[:, (idx - lat0).to(lat.device)]
            if conv1.mode in ("constant", "zero"):
                src = src.masked_fill(outside.to(lat.device), 0.0)
            x = conv1.conv.conv(src[None])  # already padded
        if self.net.decoder.head == 1:
            return x[0]
        assert self._h is not None and self._c is not None
        state = (self._h[s][:, None].contiguous(), self._c[s][:, None].contiguous())
        y, (h, c) = self.net.decoder.model[1](x, state)
        self._h[s], self._c[s] = h[:, 0], c[:, 0]
        return y[0]

    def _check(self, codes: np.ndarray, what: str) -> np.ndarray:
        return DacCodec._check_codes(self, codes, what)  # type: ignore[arg-type]  # same attributes

"""DAC (Descript Audio Codec) layers with transformers' `DacModel` parameter names, plus exact streaming
for the decoder.

Offline path: the reference architecture, convolutions with their centered zero padding.

Streaming path ("delay space"): every decoder convolution is non-causal (output t reads inputs up to
t + p), so a streamed layer emits output t only once input t + p has arrived: its output stream is the
true signal delayed by p samples (at that layer's rate). Each layer keeps the last (k - 1) * dilation
inputs of its slot as left context; residual skips keep a p-sample delay line so both branches line up.
The delays add up through the stack (`Pos.delay`), which is the look-ahead the decoder costs.

Zero padding is reproduced exactly by masking every convolution's input by TRUE position: samples before
position 0 (the left pad) and, on a request's last chunk, at or after its true length (the right pad)
are zeroed. Pointwise ops (Snake, residual add) map zero-padded positions to values that the next mask
zeroes again, so nothing outside [0, length) ever reaches a valid output. On a last chunk the caller
appends enough zero frames (`lookahead_frames`) to push the held-back tail out.

Shapes: signals are [B, C, T]; per-row state is gathered from the slot table by the caller (`Stream.old`)
and written back from `Stream.new`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import NamedTuple, Protocol

import torch
import torch.nn.functional as F
from torch import nn

from .config import DacCodecConfig

END_UNKNOWN = 2**40  # `Stream.end` of a row whose request has not ended yet (frames; x512 fits int64)


class Pos(NamedTuple):
    """Where a stream stands: samples per code frame, and delay (samples at that rate) of stream index 0
    of the request behind true position 0."""

    rate: int
    delay: int


@dataclass
class Stream:
    """Per-call streaming context for a right-padded batch of chunks of different requests."""

    start: torch.Tensor  # [B] int64: frames of this request decoded before this call
    end: torch.Tensor  # [B] int64: the request's total frames on its last chunk, else END_UNKNOWN
    steps: torch.Tensor  # [B] int64: frames of this chunk (the state is taken after them)
    old: dict[str, torch.Tensor]
    new: dict[str, torch.Tensor] = field(default_factory=dict)

    def valid(self, length: int, pos: Pos) -> torch.Tensor:
        """[B, 1, length] bool: stream samples of this call whose true position lies in [0, length)."""
        i = torch.arange(length, device=self.start.device)
        true = self.start[:, None] * pos.rate + i[None, :] - pos.delay
        return ((true >= 0) & (true < self.end[:, None] * pos.rate))[:, None, :]

    def carry(self, key: str, ext: torch.Tensor, rate: int, size: int) -> None:
        """Keep `size` samples of `ext` (= [old context, this call's stream]) ending after this row's
        valid frames: the context the row's next chunk needs."""
        if size == 0:
            return
        idx = (self.steps * rate)[:, None] + torch.arange(size, device=ext.device)[None, :]
        self.new[key] = ext.gather(2, idx[:, None, :].expand(-1, ext.shape[1], -1))


class Snake1d(nn.Module):
    """x + sin(alpha x)^2 / alpha, per channel (same op order as the reference, incl. its 1e-9)."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.alpha = nn.Parameter(torch.ones(1, channels, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + (self.alpha + 1e-9).reciprocal() * torch.sin(self.alpha * x).pow(2)


class Conv(nn.Module):
    """A Conv1d with centered ("same"-style) padding; weight-norm is folded at load time."""

    def __init__(self, cin: int, cout: int, kernel: int, dilation: int = 1, stride: int = 1,
                 padding: int | None = None) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.empty(cout, cin, kernel))
        self.bias = nn.Parameter(torch.empty(cout))
        self.kernel, self.dilation, self.stride = kernel, dilation, stride
        self.padding = (kernel - 1) * dilation // 2 if padding is None else padding
        self.state_key = ""  # set by the owning codec (module path)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.conv1d(x, self.weight, self.bias, self.stride, self.padding, self.dilation)

    @property
    def context(self) -> int:
        return (self.kernel - 1) * self.dilation

    def state_shapes(self) -> dict[str, tuple[int, ...]]:
        return {self.state_key: (self.weight.shape[1], self.context)} if self.context else {}

    def stream(self, x: torch.Tensor, st: Stream, pos: Pos) -> tuple[torch.Tensor, Pos]:
        """Stride-1, symmetric padding only (every decoder conv)."""
        if not self.context:  # pointwise in time: nothing to mask or carry
            return F.conv1d(x, self.weight, self.bias), pos
        x = torch.where(st.valid(x.shape[-1], pos), x, torch.zeros((), dtype=x.dtype, device=x.device))
        ext = torch.cat([st.old[self.state_key], x], dim=2)
        st.carry(self.state_key, ext, pos.rate, self.context)
        y = F.conv1d(ext, self.weight, self.bias, dilation=self.dilation)
        return y, Pos(pos.rate, pos.delay + self.padding)


class ConvTranspose(nn.Module):
    """ConvTranspose1d(kernel 2s, stride s, padding s/2): output block i (s samples) reads inputs i-1, i.
    `odd_stride_padding` (X-Codec's and Higgs' decoders): output_padding s % 2, so an odd stride gives s
    samples per input too; streaming is the same (the extra sample only lengthens the offline output)."""

    def __init__(self, cin: int, cout: int, stride: int, odd_stride_padding: bool = False) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.empty(cin, cout, 2 * stride))
        self.bias = nn.Parameter(torch.empty(cout))
        self.stride = stride
        self.padding = math.ceil(stride / 2)
        self.output_padding = stride % 2 if odd_stride_padding else 0
        self.state_key = ""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.conv_transpose1d(x, self.weight, self.bias, self.stride, self.padding, self.output_padding)

    def state_shapes(self) -> dict[str, tuple[int, ...]]:
        return {self.state_key: (self.weight.shape[0], 1)}

    def stream(self, x: torch.Tensor, st: Stream, pos: Pos) -> tuple[torch.Tensor, Pos]:
        x = torch.where(st.valid(x.shape[-1], pos), x, torch.zeros((), dtype=x.dtype, device=x.device))
        ext = torch.cat([st.old[self.state_key], x], dim=2)  # [previous input, this call's inputs]
        st.carry(self.state_key, ext, pos.rate, 1)
        s, n = self.stride, x.shape[-1]
        # Unpadded transpose of ext: block e (e = 1..n) combines ext[e-1] and ext[e]; blocks 0 and n+1
        # see only one neighbour and are never a complete output, so they are cut off.
        y = F.conv_transpose1d(ext, self.weight, self.bias, s)[..., s : (n + 1) * s]
        return y, Pos(pos.rate * s, pos.delay * s + self.padding)


class ResidualUnit(nn.Module):
    def __init__(self, channels: int, dilation: int) -> None:
        super().__init__()
        self.snake1 = Snake1d(channels)
        self.conv1 = Conv(channels, channels, 7, dilation=dilation)
        self.snake2 = Snake1d(channels)
        self.conv2 = Conv(channels, channels, 1)
        self.state_key = ""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.conv2(self.snake2(self.conv1(self.snake1(x))))
        return x + y  # kernel 7 with padding 3*dilation keeps the length: no trimming needed

    def state_shapes(self) -> dict[str, tuple[int, ...]]:
        return {self.state_key + ".skip": (self.conv2.weight.shape[0], self.conv1.padding)}

    def stream(self, x: torch.Tensor, st: Stream, pos: Pos) -> tuple[torch.Tensor, Pos]:
        y, out = self.conv1.stream(self.snake1(x), st, pos)
        y, out = self.conv2.stream(self.snake2(y), st, out)
        # The skip path waits conv1's padding so it meets the same true positions as the conv branch.
        key, lag = self.state_key + ".skip", self.conv1.padding
        ext = torch.cat([st.old[key], x], dim=2)
        st.carry(key, ext, pos.rate, lag)
        return ext[..., : x.shape[-1]] + y, out


class DecoderBlock(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int, odd_stride_padding: bool = False) -> None:
        super().__init__()
        self.snake1 = Snake1d(cin)
        self.conv_t1 = ConvTranspose(cin, cout, stride, odd_stride_padding)
        self.res_unit1 = ResidualUnit(cout, 1)
        self.res_unit2 = ResidualUnit(cout, 3)
        self.res_unit3 = ResidualUnit(cout, 9)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.conv_t1(self.snake1(x))
        return self.res_unit3(self.res_unit2(self.res_unit1(x)))

    def stream(self, x: torch.Tensor, st: Stream, pos: Pos) -> tuple[torch.Tensor, Pos]:
        x, pos = self.conv_t1.stream(self.snake1(x), st, pos)
        for unit in (self.res_unit1, self.res_unit2, self.res_unit3):
            x, pos = unit.stream(x, st, pos)
        return x, pos


class DecoderSizes(Protocol):
    """What the decoder reads of a codec's config (DAC's, Higgs', X-Codec's)."""

    decoder_hidden_size: int
    upsampling_ratios: tuple[int, ...]


class Decoder(nn.Module):
    """conv1 (k7) -> upsampling blocks -> Snake -> conv2 (k7, to 1 channel) -> tanh: DAC's decoder, and
    with `odd_stride_padding` and no tanh (`tanh=False`) the acoustic decoder of X-Codec and Higgs'
    tokenizer. `in_channels`: the latent width (DAC's `hidden_size`)."""

    def __init__(self, cfg: DecoderSizes, in_channels: int, odd_stride_padding: bool = False,
                 tanh: bool = True) -> None:
        super().__init__()
        ch = cfg.decoder_hidden_size
        self.conv1 = Conv(in_channels, ch, 7)
        self.block = nn.ModuleList(
            [DecoderBlock(ch // 2**i, ch // 2 ** (i + 1), s, odd_stride_padding)
             for i, s in enumerate(cfg.upsampling_ratios)]
        )
        out = ch // 2 ** len(cfg.upsampling_ratios)
        self.snake1 = Snake1d(out)
        self.conv2 = Conv(out, 1, 7)
        self.tanh = tanh

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.conv1(x)
        for blk in self.block:
            x = blk(x)
        x = self.conv2(self.snake1(x))
        return torch.tanh(x) if self.tanh else x

    def stream(self, x: torch.Tensor, st: Stream) -> tuple[torch.Tensor, Pos]:
        """Latents [B, hidden, L] at frame rate -> wav stream [B, 1, L * hop] and its (rate, delay)."""
        x, pos = self.conv1.stream(x, st, Pos(1, 0))
        for blk in self.block:
            x, pos = blk.stream(x, st, pos)
        x, pos = self.conv2.stream(self.snake1(x), st, pos)
        return (torch.tanh(x) if self.tanh else x), pos

    def lookahead_samples(self) -> int:
        """Output samples each streamed sample waits for: the decoder's total right context."""
        delay = self.conv1.padding
        for blk in self.block:
            delay = delay * blk.conv_t1.stride + blk.conv_t1.padding
            delay += sum(u.conv1.padding for u in (blk.res_unit1, blk.res_unit2, blk.res_unit3))
        return delay + self.conv2.padding


class EncoderBlock(nn.Module):
    def __init__(self, cin: int, stride: int) -> None:
        super().__init__()
        self.res_unit1 = ResidualUnit(cin, 1)
        self.res_unit2 = ResidualUnit(cin, 3)
        self.res_unit3 = ResidualUnit(cin, 9)
        self.snake1 = Snake1d(cin)
        self.conv1 = Conv(cin, 2 * cin, 2 * stride, stride=stride, padding=math.ceil(stride / 2))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.res_unit3(self.res_unit2(self.res_unit1(x)))
        return self.conv1(self.snake1(x))


class Encoder(nn.Module):
    """conv1 (1 -> enc, k7) -> downsampling blocks (width doubles) -> Snake -> conv2 (k3) to hidden."""

    def __init__(self, cfg: DacCodecConfig) -> None:
        super().__init__()
        enc = cfg.encoder_hidden_size
        self.conv1 = Conv(1, enc, 7)
        self.block = nn.ModuleList(
            [EncoderBlock(enc * 2**i, s) for i, s in enumerate(cfg.downsampling_ratios)]
        )
        self.snake1 = Snake1d(cfg.hidden_size)
        self.conv2 = Conv(cfg.hidden_size, cfg.hidden_size, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.conv1(x)
        for blk in self.block:
            x = blk(x)
        return self.conv2(self.snake1(x))


class VectorQuantize(nn.Module):
    """One factorized codebook: project down (in_proj), nearest l2-normalized entry, project up."""

    def __init__(self, cfg: DacCodecConfig) -> None:
        super().__init__()
        self.in_proj = Conv(cfg.hidden_size, cfg.codebook_dim, 1)
        self.out_proj = Conv(cfg.codebook_dim, cfg.hidden_size, 1)
        self.codebook = nn.Embedding(cfg.codebook_size, cfg.codebook_dim)

    def quantize(self, residual: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """residual [B, hidden, T] -> (codes [B, T], quantized contribution [B, hidden, T])."""
        proj = self.in_proj(residual)
        b, d, t = proj.shape
        enc = F.normalize(proj.permute(0, 2, 1).reshape(b * t, d))
        book = F.normalize(self.codebook.weight)
        # The reference's distance expression, term for term, so ties and near-ties break the same way.
        dist = -(enc.pow(2).sum(1, keepdim=True) - 2 * enc @ book.t()) + book.pow(2).sum(1, keepdim=True).t()
        codes = dist.max(1)[1].reshape(b, t)
        q = self.codebook(codes).transpose(1, 2)
        q = proj + (q - proj)  # the reference's straight-through form; not bitwise q in floating point
        return codes, self.out_proj(q)

    def embed(self, codes: torch.Tensor) -> torch.Tensor:
        """codes [B, T] -> [B, hidden, T]."""
        return self.out_proj(self.codebook(codes).transpose(1, 2))


class ResidualVQ(nn.Module):
    def __init__(self, cfg: DacCodecConfig) -> None:
        super().__init__()
        self.quantizers = nn.ModuleList([VectorQuantize(cfg) for _ in range(cfg.n_codebooks)])

    def encode(self, z: torch.Tensor) -> torch.Tensor:
        """Latents [B, hidden, T] -> codes [B, n_codebooks, T] (residual quantization in order)."""
        codes, residual = [], z
        for q in self.quantizers:
            c, contrib = q.quantize(residual)
            residual = residual - contrib
            codes.append(c)
        return torch.stack(codes, dim=1)

    def decode(self, codes: torch.Tensor) -> torch.Tensor:
        """codes [B, n_codebooks, T] -> latents [B, hidden, T]; summed in codebook order."""
        z = self.quantizers[0].embed(codes[:, 0])
        for i in range(1, codes.shape[1]):
            z = z + self.quantizers[i].embed(codes[:, i])
        return z


class DacNet(nn.Module):
    """The whole codec: `encoder`, `quantizer`, `decoder` exactly as DacModel names them."""

    def __init__(self, cfg: DacCodecConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.encoder = Encoder(cfg)
        self.decoder = Decoder(cfg, cfg.hidden_size)
        self.quantizer = ResidualVQ(cfg)
        for name, m in self.decoder.named_modules():
            if isinstance(m, Conv | ConvTranspose | ResidualUnit):
                m.state_key = "decoder." + name

    def decoder_state_shapes(self) -> dict[str, tuple[int, ...]]:
        shapes: dict[str, tuple[int, ...]] = {}
        for m in self.decoder.modules():
            if isinstance(m, Conv | ConvTranspose | ResidualUnit):
                shapes.update(m.state_shapes())
        return shapes

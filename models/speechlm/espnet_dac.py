"""OpusLM's codec: ESPnet's DAC (`espnet2/gan_codec/dac/dac.py`), decode half only, in plain torch.

What ESPnet runs (`DiscreteAudioIO._codec_decode_batch` with codec_choice "ESPnet" -> the GAN-codec
model's `decode` -> `DACGenerator.decode`): the residual VQ sums `project_out(embed_q[codes_q])` over the
codec streams the LM carries, then the SEANet decoder (EnCodec's, `gan_codec/shared/decoder/seanet.py`):

    SConv1d(dim -> 2^R n_filters, kernel_size) -> SLSTM (lstm layers, skip) ->
    R x [act, SConvTranspose1d(stride r, kernel 2r), n_residual_layers x SEANetResnetBlock] ->
    act, SConv1d(n_filters -> channels, last_kernel_size) [-> final activation]

with non-causal "same" padding (left = total - total // 2, in `pad_mode`, reflect by default, including
pad1d's extra zeros on inputs shorter than the pad), transposed convolutions trimmed the same way, Snake
activations with ONE alpha per module (`Snake1d`: a (1, 1, 1) parameter repeated over channels), weight
norm folded at load. A checkpoint is an espnet_model_zoo pack: `meta.yaml` naming `train_config`
(config.yaml: `codec: dac`, `codec_conf`) and `model_file` (a .pth state dict of ESPnetGANCodecModel,
keys `codec.generator.*`).

Streaming lives in espnet_dac_stream.py.
"""

from __future__ import annotations

import math
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from ..base import CheckpointError
from .espnet_dac_config import (  # noqa: F401 - torch-free (describe reads them); re-exported
    ENCODER_ONLY,
    GENERATOR_DEFAULTS,
    NORMS,
    DacShape,
    pack_files,
)


def pad1d(x: torch.Tensor, left: int, right: int, mode: str) -> torch.Tensor:
    """ESPnet's pad1d: reflect padding of an input no longer than the pad first adds zeros on the right
    (and drops them after)."""
    if mode != "reflect":
        return F.pad(x, (left, right), mode if mode != "zero" else "constant")
    extra = 0
    if x.shape[-1] <= max(left, right):
        extra = max(left, right) - x.shape[-1] + 1
        x = F.pad(x, (0, extra))
    y = F.pad(x, (left, right), "reflect")
    return y[..., : y.shape[-1] - extra]


def conv_pads(kernel: int, dilation: int, causal: bool) -> tuple[int, int]:
    total = (kernel - 1) * dilation  # stride 1: get_extra_padding_for_conv1d is 0
    return (total, 0) if causal else (total - total // 2, total // 2)


class SConv(nn.Module):
    """SConv1d, stride 1 (every decoder convolution): `conv.conv` as ESPnet names it."""

    def __init__(self, cin: int, cout: int, kernel: int, dilation: int, shape: DacShape) -> None:
        super().__init__()
        self.conv = nn.Module()
        self.conv.conv = nn.Conv1d(cin, cout, kernel, dilation=dilation)
        self.pads = conv_pads(kernel, dilation, shape.causal)
        self.mode = shape.pad_mode

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv.conv(pad1d(x, *self.pads, self.mode))


class SConvTranspose(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int, shape: DacShape) -> None:
        super().__init__()
        self.convtr = nn.Module()
        self.convtr.convtr = nn.ConvTranspose1d(cin, cout, 2 * stride, stride)
        total = stride  # kernel - stride
        right = math.ceil(total * shape.trim_right_ratio) if shape.causal else total // 2
        self.trim = (total - right, right)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.convtr.convtr(x)
        return y[..., self.trim[0]: y.shape[-1] - self.trim[1]]


class Snake(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.alpha = nn.Parameter(torch.ones(1, 1, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a = self.alpha.expand(1, x.shape[1], 1)
        return x + (a + 1e-9).reciprocal() * torch.sin(a * x).pow(2)


def activation(shape: DacShape) -> nn.Module:
    if shape.activation == "Snake":
        return Snake()
    act = getattr(nn, shape.activation, None)
    if act is None:
        raise CheckpointError(f"encdec_activation {shape.activation!r} is neither Snake nor a torch.nn "
                              "module")
    return act(**shape.activation_params)


class SLSTM(nn.Module):
    def __init__(self, dim: int, layers: int) -> None:
        super().__init__()
        self.lstm = nn.LSTM(dim, dim, layers)

    def forward(self, x: torch.Tensor, state: tuple[torch.Tensor, torch.Tensor] | None = None
                ) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        """x [B, C, T] -> (lstm(x) + x, the state after the last frame)."""
        t = x.permute(2, 0, 1)
        y, new = self.lstm(t, state)
        return (y + t).permute(1, 2, 0), new


class ResBlock(nn.Module):
    def __init__(self, dim: int, dilation: int, shape: DacShape) -> None:
        super().__init__()
        hidden = dim // shape.compress
        self.block = nn.Sequential(activation(shape),
                                   SConv(dim, hidden, shape.residual_kernel_size, dilation, shape),
                                   activation(shape), SConv(hidden, dim, 1, 1, shape))
        self.shortcut = nn.Identity() if shape.true_skip else SConv(dim, dim, 1, 1, shape)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.shortcut(x) + self.block(x)


class SeanetDecoder(nn.Module):
    """`model` is ESPnet's nn.Sequential layer for layer (same indices, so the state dict keys match)."""

    def __init__(self, shape: DacShape) -> None:
        super().__init__()
        mult = 2 ** len(shape.ratios)
        layers: list[nn.Module] = [SConv(shape.dim, mult * shape.n_filters, shape.kernel_size, 1, shape)]
        if shape.lstm:
            layers.append(SLSTM(mult * shape.n_filters, shape.lstm))
        self.head = len(layers)  # layers [0, head) run at the frame rate, before the upsampling stack
        for r in shape.ratios:
            c = mult * shape.n_filters
            layers += [activation(shape), SConvTranspose(c, c // 2, r, shape)]
            layers += [ResBlock(c // 2, shape.dilation_base ** j, shape)
                       for j in range(shape.n_residual_layers)]
            mult //= 2
        layers += [activation(shape),
                   SConv(shape.n_filters, shape.channels, shape.last_kernel_size, 1, shape)]
        if shape.final_activation is not None:
            final = getattr(nn, shape.final_activation, None)
            if final is None:
                raise CheckpointError(f"decoder_final_activation {shape.final_activation!r} is not a "
                                      "torch.nn module")
            layers.append(final(**(shape.final_activation_params or {})))
        self.model = nn.Sequential(*layers)

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        x = self.model[0](z)
        if self.head == 2:
            x = self.model[1](x)[0]
        return self.upsample(x)

    def upsample(self, x: torch.Tensor) -> torch.Tensor:
        """The layers after the LSTM: frames [B, C, T] -> samples [B, channels, T * hop]."""
        for layer in list(self.model)[self.head:]:
            x = layer(x)
        return x

    def upsample_context(self) -> tuple[int, int]:
        """Frames of LSTM output left / right of a frame that its hop samples depend on (walked back from
        the output through every padding and transposed-convolution trim; conservative by < 1 frame)."""
        left = right = 0  # in samples of the tensor at the current layer's rate
        for layer in reversed(list(self.model)[self.head:]):
            if isinstance(layer, SConv):
                left, right = left + layer.pads[0], right + layer.pads[1]
            elif isinstance(layer, ResBlock):
                pads = [m.pads for m in layer.block if isinstance(m, SConv)]
                left, right = left + sum(p[0] for p in pads), right + sum(p[1] for p in pads)
            elif isinstance(layer, SConvTranspose):
                r, trim = layer.convtr.convtr.stride[0], layer.trim[0]
                # output n (trimmed) = untrimmed n + trim, fed by inputs m with 0 <= n + trim - m r < 2r
                left = -math.floor((-left + trim - 2 * r + 1) / r)
                right = math.floor((r - 1 + right + trim) / r)
        return left, right


    def min_frames(self) -> int:
        """The fewest frames a window must hold so that no layer's input is shorter than its pad."""
        rate, need = 1, 1
        for layer in list(self.model)[self.head:]:
            convs = list(layer.block) if isinstance(layer, ResBlock) else [layer]
            for m in convs:
                if isinstance(m, SConv):
                    need = max(need, math.ceil((max(m.pads) + 1) / rate))
            if isinstance(layer, SConvTranspose):
                rate *= layer.convtr.convtr.stride[0]
        return need


class DacQuantizer(nn.Module):
    """ResidualVectorQuantization.decode: sum over streams of project_out(embed[codes])."""

    def __init__(self, shape: DacShape, n_streams: int) -> None:
        super().__init__()
        self.layers = nn.ModuleList(_Layer(shape) for _ in range(n_streams))

    def decode(self, codes: torch.Tensor) -> torch.Tensor:
        """codes [B, nq, T] -> [B, dim, T]."""
        out = None
        for i, layer in enumerate(self.layers):
            q = layer.project_out(F.embedding(codes[:, i], layer.embed))
            out = q if out is None else out + q
        assert out is not None
        return out.transpose(1, 2)


class _Layer(nn.Module):
    def __init__(self, shape: DacShape) -> None:
        super().__init__()
        self.register_buffer("embed", torch.zeros(shape.bins, shape.codebook_dim))
        self.project_out = (nn.Linear(shape.codebook_dim, shape.dim) if shape.codebook_dim != shape.dim
                            else nn.Identity())


class DacNet(nn.Module):
    def __init__(self, shape: DacShape, n_streams: int) -> None:
        super().__init__()
        self.shape = shape
        self.quantizer = DacQuantizer(shape, n_streams)
        self.decoder = SeanetDecoder(shape)


# --- checkpoint ------------------------------------------------------------------------------------
def file_key(key: str) -> str:
    """Our key -> ESPnetGANCodecModel's (without its weight-norm parametrization)."""
    if key.startswith("quantizer.layers."):
        i, rest = key[len("quantizer.layers."):].split(".", 1)
        rest = "_codebook.embed" if rest == "embed" else rest
        return f"codec.generator.quantizer.vq.layers.{i}.{rest}"
    return "codec.generator." + key


_WEIGHT_NORM = (("parametrizations.weight.original0", "parametrizations.weight.original1"),
                ("weight_g", "weight_v"))


def read_weights(net: DacNet, file: Path) -> dict[str, torch.Tensor]:
    """The decode half's tensors, strictly (every key present with its shape, finite), weight norm folded
    with torch's own `_weight_norm` (dim 0). Errors name the key and the file."""
    try:
        sd = torch.load(file, map_location="cpu", weights_only=True)
    except Exception as e:  # noqa: BLE001 - any unreadable file is the same user problem
        raise CheckpointError(f"cannot read the codec weights {file}: {e}") from e
    for wrap in ("module", "state_dict"):
        if isinstance(sd, dict) and wrap in sd and isinstance(sd[wrap], dict):
            sd = sd[wrap]
    if not isinstance(sd, dict):
        raise CheckpointError(f"{file} holds no state dict")
    if not any(k.startswith("codec.generator.") for k in sd):
        sd = {"codec.generator." + k.removeprefix("generator."): v for k, v in sd.items()}
    out = {}
    for k, v in net.state_dict().items():
        src = file_key(k)
        if k.endswith(".weight") and src not in sd:
            base = src[: -len("weight")]
            pair = next(((base + g, base + w) for g, w in _WEIGHT_NORM
                         if base + g in sd and base + w in sd), None)
            if pair is None:
                raise CheckpointError(f"{file}: tensor {src!r} (or its weight-norm pair) is missing")
            t = torch._weight_norm(sd[pair[1]].float(), sd[pair[0]].float(), 0)
        elif src not in sd:
            raise CheckpointError(f"{file}: tensor {src!r} is missing")
        else:
            t = sd[src]
        if tuple(t.shape) != tuple(v.shape):
            raise CheckpointError(f"{file}: tensor {src!r} has shape {list(t.shape)}, expected "
                                  f"{list(v.shape)}")
        if t.is_floating_point() and not torch.isfinite(t).all():
            raise CheckpointError(f"{file}: tensor {src!r} holds NaN or inf values")
        out[k] = t.float()
    return out


def load_net(root: Path, n_streams: int, device: torch.device | str = "cpu") -> DacNet:
    import yaml

    cfg_file, model_file = pack_files(Path(root))
    shape = DacShape.from_config(yaml.safe_load(cfg_file.read_text()) or {}, str(cfg_file))
    if n_streams > shape.n_q:
        raise CheckpointError(f"{cfg_file}: the LM has {n_streams} codec streams but the codec only "
                              f"{shape.n_q} quantizers")
    net = DacNet(shape, n_streams)  # built for real, not on meta: nn.LSTM keeps views of its weights
    net.load_state_dict(read_weights(net, model_file), strict=True)
    return net.to(device).eval()


__all__ = ["DacNet", "DacShape", "load_net", "pad1d"]

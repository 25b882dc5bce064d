"""The Higgs Audio v2 audio tokenizer's decoder (transformers `HiggsAudioV2TokenizerModel.decode`): codes [T,
8] -> 24 kHz mono PCM, streamed exactly through per-request codec slots.

Decode path, as the reference runs it: per codebook `quantizer.quantizers.i.codebook.embed[code]` ->
`project_out` (summed over codebooks) -> `fc2` (to the acoustic width) -> the DAC decoder `acoustic_decoder`,
with two changes from plain DAC: every transposed convolution has `output_padding = stride % 2` (the odd
ratios 5 and 3 of [8, 5, 4, 2, 3] still give exactly `stride` samples per input) and there is no final tanh.

Streaming reuses the DAC machinery (models/codecs/dac/codec.py, layers.py): the quantizer and fc2 are
pointwise in time, every decoder convolution keeps its left context in the slot and is masked by true
position, so a chunk waits only for the decoder's right context. For the released ratios (hop 960 at 24 kHz)
that look-ahead, referred to the output rate, is: conv1 3; per block of stride s, delay x s + ceil(s/2) (the
transposed conv) + 3 + 9 + 27 (the dilated residual units): 67, 377, 1549, 3138, 9455; conv2 + 3 = 9458
samples = 9.85 frames = 394 ms of audio. A first chunk needs 10 frames before it yields a single sample,
which is why the recipe's first chunk is 15 frames (it releases 4942 samples, 206 ms) and the second only
10. A request's last chunk flushes the held-back tail against the same zero padding the offline decode uses.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import torch
import torch.nn.functional as F
from safetensors import SafetensorError, safe_open
from torch import nn

from ..base import CheckpointError
from ..checkpoint import read_json
from ..codecs.dac.codec import DacCodec
from ..codecs.dac.layers import Conv, ConvTranspose, Decoder, ResidualUnit
from ..dtypes import torch_dtype
from ..locate import locate_component
from ..weights import assign_weights, read_source, refuse_extra, source_keys
from .codec_config import TOKENIZER_HUB_ID, HiggsCodecConfig  # noqa: F401 - torch-free (describe reads it)


class QuantizerSizes(Protocol):
    """What a codebook needs (HiggsCodecConfig here, the encoder's config in encoder.py)."""

    codebook_size: int
    codebook_dim: int
    hidden_size: int


class Codebook(nn.Module):
    def __init__(self, cfg: QuantizerSizes) -> None:
        super().__init__()
        self.embed = nn.Parameter(torch.empty(cfg.codebook_size, cfg.codebook_dim))


class VectorQuantizer(nn.Module):
    def __init__(self, cfg: QuantizerSizes) -> None:
        super().__init__()
        self.codebook = Codebook(cfg)
        self.project_out = nn.Linear(cfg.codebook_dim, cfg.hidden_size)


class Quantizer(nn.Module):
    def __init__(self, cfg: HiggsCodecConfig) -> None:
        super().__init__()
        self.quantizers = nn.ModuleList(VectorQuantizer(cfg) for _ in range(cfg.n_codebooks))


class HiggsDecoderNet(nn.Module):
    """The decode half of the tokenizer with its checkpoint names (`quantizer.*`, `fc2`, `acoustic_decoder`).
    Shaped like Dia's DacNet where DacCodec reads it (`cfg`, `quantizer.decode`, `decoder`)."""

    def __init__(self, cfg: HiggsCodecConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.quantizer = Quantizer(cfg)
        self.fc2 = nn.Linear(cfg.hidden_size, cfg.acoustic_hidden)
        self.acoustic_decoder = Decoder(cfg, cfg.acoustic_hidden, odd_stride_padding=True, tanh=False)
        for name, m in self.acoustic_decoder.named_modules():
            if isinstance(m, Conv | ConvTranspose | ResidualUnit):
                m.state_key = "decoder." + name
        self._latents = _Latents(self)

    @property
    def decoder(self) -> Decoder:
        return self.acoustic_decoder

    def latents(self, codes: torch.Tensor) -> torch.Tensor:
        """codes [B, n_codebooks, T] -> [B, acoustic_hidden, T], summed in codebook order as the reference."""
        q = None
        for i, vq in enumerate(self.quantizer.quantizers):
            e = vq.project_out(F.embedding(codes[:, i], vq.codebook.embed))
            q = e if q is None else q + e
        return self.fc2(q).transpose(1, 2)

    def decoder_state_shapes(self) -> dict[str, tuple[int, ...]]:
        shapes: dict[str, tuple[int, ...]] = {}
        for m in self.acoustic_decoder.modules():
            if isinstance(m, Conv | ConvTranspose | ResidualUnit):
                shapes.update(m.state_shapes())
        return shapes


class _Latents:
    """`net.quantizer.decode` as DacCodec calls it, without a module cycle in the state dict."""

    def __init__(self, net: HiggsDecoderNet) -> None:
        self._net = [net]

    def decode(self, codes: torch.Tensor) -> torch.Tensor:
        return self._net[0].latents(codes)


class _NetView:
    """What DacCodec sees: the config, `quantizer.decode`, `decoder`, `decoder_state_shapes`."""

    def __init__(self, net: HiggsDecoderNet) -> None:
        self.net, self.cfg = net, net.cfg
        self.quantizer = net._latents
        self.decoder = net.acoustic_decoder

    def eval(self) -> _NetView:
        self.net.eval()
        return self

    def decoder_state_shapes(self) -> dict[str, tuple[int, ...]]:
        return self.net.decoder_state_shapes()


# Checkpoint parts the decoder does not use (the encoders, the semantic branch, training buffers).
_UNUSED = ("acoustic_encoder.", "encoder_semantic.", "decoder_semantic.", "semantic_model.", "fc.", "fc1.")
_UNUSED_VQ = ("codebook.inited", "codebook.cluster_size", "codebook.embed_avg", "project_in.")


class HiggsCodec(DacCodec):
    """Streaming decode (`decode`, slots) and `decode_offline` are DacCodec's on the Higgs decoder."""

    def __init__(self, net: HiggsDecoderNet) -> None:
        self.hnet = net
        super().__init__(_NetView(net))  # type: ignore[arg-type]

    @classmethod
    def load(cls, root: Path, device: str = "cpu", dtype: str = "float32") -> HiggsCodec:
        root = Path(root)
        dt = torch_dtype(dtype)  # the codec part of spec.DTYPE_POLICY
        if not root.is_dir():
            raise CheckpointError(f"Higgs audio tokenizer folder {root} does not exist")
        cfg = HiggsCodecConfig.read(root / "config.json")
        with torch.device("meta"):
            net = HiggsDecoderNet(cfg)
        state = read_decoder_weights(net, root / "model.safetensors")
        return cls(assign_weights(net, state, device, dt))

    @classmethod
    def from_state(
        cls, sd: dict[str, torch.Tensor], prefix: str, where: Any, device: str = "cpu", dtype: str = "float32"
    ) -> HiggsCodec:
        """The decoder bundled inside a checkpoint's state dict under `prefix` (v3)."""
        sub = {k[len(prefix) :]: v for k, v in sd.items() if k.startswith(prefix)}
        shapes = {k: tuple(v.shape) for k, v in sub.items()}
        cfg = config_from_shapes(shapes, where)
        with torch.device("meta"):
            net = HiggsDecoderNet(cfg)
        state = pick_decoder_weights(net, shapes, sub.__getitem__, where)
        return cls(assign_weights(net, state, device, torch_dtype(dtype)))

    @property
    def device(self) -> torch.device:
        return self.hnet.fc2.weight.device

    @property
    def dtype(self) -> torch.dtype:
        return self.hnet.fc2.weight.dtype

    def to_dtype(self, dtype: torch.dtype) -> HiggsCodec:
        """A copy in another dtype (float64 for the exactness tests)."""
        import copy

        net = copy.deepcopy(self.hnet).to(dtype)
        return HiggsCodec(net)

    def encode(self, pcm: np.ndarray, sample_rate: int) -> np.ndarray:
        """Not DacCodec's encode (this net holds only the decode half): encoder.py encodes Higgs clips."""
        raise NotImplementedError("HiggsCodec decodes only; HiggsEncoder (encoder.py) encodes clips")


def read_decoder_weights(net: HiggsDecoderNet, file: Path) -> dict[str, Any]:
    """The decoder's tensors from the tokenizer's model.safetensors (see `pick_decoder_weights`)."""
    return read_tokenizer_weights(file, lambda shapes, get: pick_decoder_weights(net, shapes, get, file))


def read_tokenizer_weights(file: Path, pick: Callable[[dict[str, tuple[int, ...]], Any], dict]) -> dict:
    """`pick(shapes, get_tensor)` over the tokenizer's model.safetensors (decoder or encoder tensors)."""
    if not file.exists():
        raise CheckpointError(
            f"missing weights file {file} (the Higgs audio tokenizer needs model.safetensors)"
        )
    try:
        with safe_open(str(file), framework="pt", device="cpu") as f:
            shapes = {k: tuple(f.get_slice(k).get_shape()) for k in f.keys()}
            return pick(shapes, f.get_tensor)
    except SafetensorError as e:
        raise CheckpointError(f"cannot read {file} (corrupt or truncated safetensors file?): {e}") from e


def pick_decoder_weights(
    net: HiggsDecoderNet, shapes: dict[str, tuple[int, ...]], get, where: Any
) -> dict[str, Any]:
    """Checked strictly: every tensor the decoder needs present with its shape (weight-norm pairs folded,
    no NaN/inf); parts only the encoder uses are skipped, any other tensor is refused. Errors name key and
    path."""
    expected = {k: tuple(v.shape) for k, v in net.state_dict().items()}
    plan = {k: source_keys(k, s, shapes, where) for k, s in expected.items()}
    used = {s for srcs in plan.values() for s in srcs}
    extra = sorted(
        k
        for k in set(shapes) - used
        if not k.startswith(_UNUSED)
        and not (k.startswith("quantizer.") and k.split(".", 3)[-1].startswith(_UNUSED_VQ))
    )
    refuse_extra(extra, where)
    return {k: read_source(get, srcs, where) for k, srcs in plan.items()}


def _weight_shape(shapes: dict[str, tuple[int, ...]], base: str, where: Any) -> tuple[int, ...]:
    """The shape of `base`.weight, plain or as a weight-norm direction."""
    for k in (base + ".weight", base + ".weight_v", base + ".parametrizations.weight.original1"):
        if k in shapes:
            return shapes[k]
    raise CheckpointError(f"checkpoint {where}: tensor {base + '.weight'!r} is missing")


def config_from_shapes(
    shapes: dict[str, tuple[int, ...]], where: Any, sampling_rate: int = 24000
) -> HiggsCodecConfig:
    """The decoder's architecture read off its tensors (v3 bundles the tokenizer without a config of its own):
    codebooks and their width from the codebook tables, the latent widths from project_out / fc2, the decoder
    width from conv1, each upsampling ratio from its transposed convolution's kernel (2 x stride)."""
    n = 0
    while f"quantizer.quantizers.{n}.codebook.embed" in shapes:
        n += 1
    if n == 0:
        raise CheckpointError(
            f"checkpoint {where}: tensor 'quantizer.quantizers.0.codebook.embed' is missing"
        )
    size, dim = shapes["quantizer.quantizers.0.codebook.embed"]
    hidden = _weight_shape(shapes, "quantizer.quantizers.0.project_out", where)[0]
    acoustic = _weight_shape(shapes, "fc2", where)[0]
    dec = _weight_shape(shapes, "acoustic_decoder.conv1", where)[0]
    ratios = []
    while any(k.startswith(f"acoustic_decoder.block.{len(ratios)}.conv_t1.") for k in shapes):
        ratios.append(_weight_shape(shapes, f"acoustic_decoder.block.{len(ratios)}.conv_t1", where)[2] // 2)
    return HiggsCodecConfig(
        sampling_rate=sampling_rate,
        upsampling_ratios=tuple(ratios),
        decoder_hidden_size=dec,
        acoustic_hidden=acoustic,
        hidden_size=hidden,
        codebook_dim=dim,
        codebook_size=size,
        n_codebooks=n,
    )


def resolve_tokenizer(root: Path) -> Path:
    """The audio tokenizer of a Higgs checkpoint: the name processor_config.json gives it
    (`audio_tokenizer_name_or_path`, bosonai/higgs-audio-v2-tokenizer by default) as an existing folder, then
    inside the checkpoint, then `root/audio_tokenizer` (tests, the demo), then the hub cache
    (models/locate.py: the error lists what was tried)."""
    name = TOKENIZER_HUB_ID
    pc = Path(root) / "processor_config.json"
    if pc.exists():
        at = read_json(pc).get("audio_tokenizer") or {}
        named = at.get("audio_tokenizer_name_or_path") if isinstance(at, dict) else None
        name = named if isinstance(named, str) and named else name
    return locate_component(name, Path(root), "the Higgs audio tokenizer", folder="audio_tokenizer")

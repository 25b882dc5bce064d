"""X-Codec's decoder (transformers `XcodecModel.decode`, Bagpiper's codec), read from its HF folder.

decode(codes [B, nq, T]) = acoustic_decoder(fc2(sum_q codebook_q[codes_q])): a residual VQ of plain
embedding tables (`quantizer.quantizers.N.codebook.embed`), a linear projection to the acoustic latent,
and a DAC decoder that X-Codec adjusts in two ways: every transposed convolution gets output_padding
stride % 2 (X-Codec upsamples by 8, 5, 4, 2: the odd 5 would lose a sample per frame otherwise) and the
final tanh is gone. Everything else — the layers, their exact streaming in "delay space" and the codec
slot table (`DacCodec`) — is Dia's DAC code, reused; only the encoder side (HuBERT + acoustic encoder)
is not loaded, since nothing here encodes audio.

The decoder is not causal: a streamed sample waits for `lookahead_samples` of later input, i.e. the
first chunk holds back that many samples and the last chunk flushes them against the same zero padding
as the offline forward (see models/codecs/dac/codec.py), so streamed = offline.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from safetensors import SafetensorError, safe_open
from torch import nn

from ..base import CheckpointError
from ..checkpoint import read_json
from ..codecs.dac.codec import DacCodec
from ..codecs.dac.layers import Conv, ConvTranspose, DacNet, Decoder, ResidualUnit
from ..dtypes import torch_dtype
from ..weights import assign_weights, read_source, source_keys


@dataclass(frozen=True)
class XcodecShape:
    """What the decoder needs from XcodecConfig (names as DacCodec reads them)."""

    hidden_size: int  # acoustic latent width (acoustic_model_config.hidden_size)
    decoder_hidden_size: int
    upsampling_ratios: tuple[int, ...]
    codebook_dim: int
    codebook_size: int
    n_codebooks: int  # streams decoded (the LM's codec streams), <= the config's num_quantizers
    sampling_rate: int

    @property
    def hop_length(self) -> int:
        return math.prod(self.upsampling_ratios)

    @property
    def frame_rate(self) -> float:
        return self.sampling_rate / self.hop_length

    @classmethod
    def read(cls, path: Path, n_streams: int) -> XcodecShape:
        d = read_json(path)
        ac = d.get("acoustic_model_config") or {}
        sem = d.get("semantic_model_config") or {}
        ratios = tuple(ac.get("upsampling_ratios") or ac.get("downsampling_ratios", (8, 5, 4, 2))[::-1])
        down = tuple(ac.get("downsampling_ratios", (8, 5, 4, 2)))
        if math.prod(ratios) != math.prod(down):
            raise CheckpointError(f"{path}: upsampling_ratios {list(ratios)} must multiply to the hop "
                                  f"{math.prod(down)} of downsampling_ratios")
        hidden = int(ac.get("hidden_size", 256))
        dim = d.get("codebook_dim") or hidden + int(sem.get("hidden_size", 768))
        size = int(d.get("codebook_size", 1024))
        sr = int(d.get("sample_rate", 16000))
        bws = d.get("target_bandwidths") or [0.5, 1, 1.5, 2, 4]
        frame_rate = math.ceil(sr / math.prod(down))
        nq = int(1000 * bws[-1] // (frame_rate * math.ceil(math.log2(size))))
        if n_streams > nq:
            raise CheckpointError(f"{path}: the LM has {n_streams} codec streams but the codec only {nq} "
                                  "quantizers")
        return cls(hidden_size=hidden, decoder_hidden_size=int(ac.get("decoder_hidden_size", 1024)),
                   upsampling_ratios=ratios, codebook_dim=int(dim), codebook_size=size, n_codebooks=n_streams,
                   sampling_rate=sr)


class XcodecQuantizer(nn.Module):
    """Codes -> acoustic latent: the RVQ sum in quantizer order, then fc2 (what decode does before the
    acoustic decoder)."""

    def __init__(self, shape: XcodecShape) -> None:
        super().__init__()
        self.quantizers = nn.ModuleList(_Codebook(shape) for _ in range(shape.n_codebooks))
        self.fc2 = nn.Linear(shape.codebook_dim, shape.hidden_size)

    def decode(self, codes: torch.Tensor) -> torch.Tensor:
        """codes [B, nq, T] -> latents [B, hidden, T]."""
        q = F.embedding(codes[:, 0], self.quantizers[0].codebook.embed)
        for i in range(1, codes.shape[1]):
            q = q + F.embedding(codes[:, i], self.quantizers[i].codebook.embed)
        return self.fc2(q).transpose(1, 2)


class _Codebook(nn.Module):
    def __init__(self, shape: XcodecShape) -> None:
        super().__init__()
        self.codebook = nn.Module()
        self.codebook.register_buffer("embed", torch.zeros(shape.codebook_size, shape.codebook_dim))


class XcodecNet(DacNet):
    """`decoder` + `quantizer` as DacCodec drives them (the decode half of XcodecModel; no encoder).
    DacNet's slot-state layout (`decoder_state_shapes`) is reused as is."""

    def __init__(self, shape: XcodecShape) -> None:
        nn.Module.__init__(self)  # not DacNet's: it would build a DAC encoder and quantizer
        self.cfg = shape  # type: ignore[assignment]
        # DAC's decoder with X-Codec's two changes: output_padding stride % 2, no tanh
        self.decoder = Decoder(shape, shape.hidden_size, odd_stride_padding=True, tanh=False)
        self.quantizer = XcodecQuantizer(shape)  # type: ignore[assignment]
        for name, m in self.decoder.named_modules():
            if isinstance(m, Conv | ConvTranspose | ResidualUnit):
                m.state_key = "decoder." + name


def file_key(key: str) -> str:
    """Our key -> XcodecModel's: decoder.* is acoustic_decoder.*, quantizer.fc2.* is fc2.*."""
    if key.startswith("decoder."):
        return "acoustic_" + key
    if key.startswith("quantizer.fc2."):
        return key[len("quantizer."):]
    return key


def read_weights(net: XcodecNet, file: Path) -> dict[str, torch.Tensor]:
    """The decode half's tensors from an XcodecModel safetensors file (the encoder side is skipped),
    strictly: every key present with its shape, finite; weight-norm pairs folded. Errors name key + file."""
    if not file.exists():
        raise CheckpointError(f"missing weights file {file} (an X-Codec folder needs model.safetensors)")
    out: dict[str, torch.Tensor] = {}
    try:
        with safe_open(str(file), framework="pt", device="cpu") as f:
            shapes = {k: tuple(f.get_slice(k).get_shape()) for k in f.keys()}
            for k, v in net.state_dict().items():
                srcs = source_keys(file_key(k), tuple(v.shape), shapes, file)
                out[k] = read_source(f.get_tensor, srcs, file)
    except SafetensorError as e:
        raise CheckpointError(f"cannot read {file} (corrupt or truncated safetensors file?): {e}") from e
    return out


class XcodecDecoder(DacCodec):
    """The codec lane's X-Codec: `decode(items)` streams per slot; `decode_offline(codes)` is
    XcodecModel.decode."""

    @classmethod
    def load(cls, root: Path, device: torch.device | str = "cpu",  # type: ignore[override]
             n_streams: int = 8, dtype: str = "float32") -> XcodecDecoder:
        shape = XcodecShape.read(Path(root) / "config.json", n_streams)
        with torch.device("meta"):
            net = XcodecNet(shape)
        state = read_weights(net, Path(root) / "model.safetensors")
        dt = torch_dtype(dtype, ("float32", "float64"))
        return cls(assign_weights(net, state, device, dt))  # type: ignore[arg-type]

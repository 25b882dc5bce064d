"""X-Codec's encoder (transformers `XcodecModel.encode`, Bagpiper's audio input tokenizer) in plain torch.

encode(x [B, 1, n]) at the codec rate (16 kHz):
  semantic: x zero-padded by hop / 2 on both sides -> HuBERT (models/codecs/xcodec/hubert.py) -> the mean of
            all its hidden states (num_hidden_layers + 1) -> the semantic encoder (a conv, then blocks of
            ELU residual units and a conv; models/codecs/xcodec/encoder.py) -> [B, H_s, T_s];
  acoustic: the DAC encoder on x, or on x padded by hop / 2 on both sides when the conv arithmetic on n
            would not give T_s frames (XcodecModel's rule, not ours: a whole-frame clip takes the first
            branch, a ragged one the second);
  fc(cat(acoustic, semantic)) -> residual VQ over the quantizers the bandwidth allows: per quantizer the
  nearest codebook row by the reference's distance expression term for term (so near-ties break alike),
  its row subtracted from the residual. No projections: X-Codec's codebooks live in the fc's space.

The Higgs audio tokenizer is the same design at 24 kHz (with a resampler and projected codebooks); the
shared building blocks are models/codecs/xcodec/'s; this file holds X-Codec's config reading, quantizer and
weight picking. The weights come from the checkpoint's model.pt when it carries the codec (ESPnet loads
model.pt strictly over the codec folder's weights, `multimodal_io_dict.discrete_audio.codec_model.*`), else
from the folder.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from ..base import CheckpointError
from ..checkpoint import read_json
from ..codecs.xcodec.encoder import AcousticEncoder, HiggsEncoderConfig, SemanticEncoder
from ..codecs.xcodec.hubert import Hubert, fold_kernel_weight_norm
from ..weights import assign_weights, fold_weight_norm, source_keys

CODEC_PREFIX = "multimodal_io_dict.discrete_audio.codec_model."
POS_CONV = "semantic_model.encoder.pos_conv_embed.conv.weight"
_POS_CONV_NORMS = (
    ("parametrizations.weight.original0", "parametrizations.weight.original1"),
    ("weight_g", "weight_v"),
)


def read_config(path: Path, n_streams: int) -> tuple[HiggsEncoderConfig, int]:
    """X-Codec's config.json as the shared encoder config, and the quantizers `encode` runs: ESPnet picks
    the target bandwidth closest to log2(cb) * frame_rate / 1000 * streams (kbps), XcodecModel then runs
    floor(bandwidth / (log2(cb) * frame_rate / 1000)) quantizers (frame_rate = ceil(sr / hop))."""
    d = read_json(path)
    try:
        sr = int(d.get("sample_rate", 16000))
        # X-Codec runs HuBERT at its own rate, downsamples by its hop and chooses its
        # bandwidth per stream count (below)
        cfg = HiggsEncoderConfig.from_dict(d, str(path), sample_rate=sr, semantic_sample_rate=sr,
                                           codebook_dim=d.get("codebook_dim"), bandwidth=0.0,
                                           downsample_factor=None)
        bandwidths = [float(b) for b in d.get("target_bandwidths", [0.5, 1, 1.5, 2, 4])]
    except (TypeError, ValueError) as e:
        raise CheckpointError(f"{path}: invalid X-Codec setting ({e})") from None
    if cfg.codebook_dim != cfg.hidden_size:
        raise CheckpointError(
            f"{path}: codebook_dim {cfg.codebook_dim} must equal the fc width "
            f"{cfg.hidden_size} (acoustic + semantic hidden sizes): X-Codec's codebooks have "
            "no projection"
        )
    per_q = math.log2(cfg.codebook_size) * math.ceil(sr / cfg.hop_length) / 1000
    bandwidth = min(bandwidths, key=lambda b: abs(b - per_q * n_streams))
    n_q = int(max(1, math.floor(bandwidth / per_q)))
    top = int(
        1000 * bandwidths[-1] // (math.ceil(sr / cfg.hop_length) * math.ceil(math.log2(cfg.codebook_size)))
    )
    if n_q > top or n_q < n_streams:
        raise CheckpointError(
            f"{path}: the LM reads {n_streams} codec streams but bandwidth {bandwidth} kbps "
            f"gives {n_q} of the codec's {top} quantizers"
        )
    return cfg, n_q


class _Codebook(nn.Module):
    def __init__(self, cfg: HiggsEncoderConfig) -> None:
        super().__init__()
        self.codebook = nn.Module()
        self.codebook.register_buffer("embed", torch.zeros(cfg.codebook_size, cfg.codebook_dim))

    def encode(self, residual: torch.Tensor) -> torch.Tensor:
        """residual [B, D, T] -> codes [B, T]."""
        h = residual.permute(0, 2, 1)
        B, T, D = h.shape
        flat = h.reshape(-1, D)
        embed = self.codebook.embed.t()
        dist = -(flat.pow(2).sum(1, keepdim=True) - 2 * flat @ embed + embed.pow(2).sum(0, keepdim=True))
        return dist.max(dim=-1).indices.view(B, T)


class _Quantizer(nn.Module):
    def __init__(self, cfg: HiggsEncoderConfig, n_q: int) -> None:
        super().__init__()
        self.quantizers = nn.ModuleList(_Codebook(cfg) for _ in range(n_q))


class XcodecEncoderNet(nn.Module):
    """The encode half of XcodecModel with its checkpoint names."""

    def __init__(self, cfg: HiggsEncoderConfig, n_q: int) -> None:
        super().__init__()
        self.cfg = cfg
        self.acoustic_encoder = AcousticEncoder(cfg)
        self.encoder_semantic = SemanticEncoder(cfg)
        self.semantic_model = Hubert(cfg.semantic)
        self.fc = nn.Linear(cfg.hidden_size, cfg.hidden_size)
        self.quantizer = _Quantizer(cfg, n_q)

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        """x [B, 1, n] at the codec rate -> codes [B, n_q, frames]."""
        pad = self.cfg.hop_length // 2
        states = self.semantic_model.hidden_states(F.pad(x[:, 0], (pad, pad)))
        sem = self.encoder_semantic(torch.stack(states, dim=1).mean(dim=1).transpose(1, 2))
        if self.acoustic_encoder.output_length(x.shape[2]) != sem.shape[2]:
            x = F.pad(x, (pad, pad))
        ac = self.acoustic_encoder(x)
        if ac.shape[2] != sem.shape[2]:
            raise CheckpointError(
                f"the X-Codec encoder's branches disagree on a {x.shape[2]}-sample clip "
                f"({ac.shape[2]} acoustic vs {sem.shape[2]} semantic frames): its HuBERT "
                "strides must multiply to the hop"
            )
        residual = self.fc(torch.cat([ac, sem], dim=1).transpose(1, 2)).transpose(1, 2)
        codes = []
        for q in self.quantizer.quantizers:
            c = q.encode(residual)
            residual = residual - F.embedding(c, q.codebook.embed).permute(0, 2, 1)
            codes.append(c)
        return torch.stack(codes, dim=1)


def pick_weights(net: XcodecEncoderNet, shapes: dict[str, tuple[int, ...]], get, where: Any) -> dict:
    """Every tensor the encoder needs (names without the prefix), presence and shape checked, weight-norm
    pairs folded, finite; errors name the key and where it was looked for."""
    for part in ("acoustic_encoder.", "encoder_semantic.", "semantic_model.", "fc."):
        if not any(k.startswith(part) for k in shapes):
            raise CheckpointError(
                f"{where} has no X-Codec {part[:-1]} tensors: the codec was saved without its "
                "encoder, so this checkpoint cannot take audio input"
            )
    out: dict[str, torch.Tensor] = {}
    for k, v in net.state_dict().items():
        shape = tuple(v.shape)
        if k == POS_CONV and k not in shapes:
            base = POS_CONV[: -len("weight")]
            pair = next(
                (
                    (base + g, base + d)
                    for g, d in _POS_CONV_NORMS
                    if base + g in shapes and base + d in shapes
                ),
                None,
            )
            if pair is None or shapes[pair[1]] != shape:
                raise CheckpointError(
                    f"{where}: tensor {POS_CONV!r} (or its weight-norm pair, shape "
                    f"{list(shape)}) is missing or misshapen"
                )
            out[k] = fold_kernel_weight_norm(get(pair[0]).float(), get(pair[1]).float())
            continue
        srcs = source_keys(k, shape, shapes, where)
        ts = [get(s) for s in srcs]
        out[k] = ts[0] if len(ts) == 1 else fold_weight_norm(ts[0].float(), ts[1].float())
    for k, t in out.items():
        if t.is_floating_point() and not torch.isfinite(t).all():
            raise CheckpointError(f"tensor {k!r} in {where} holds NaN or inf values")
    return out


class XcodecEncoder:
    """Loaded once per program, on the program's device, in float32 (the reference at dtype float32)."""

    def __init__(self, net: XcodecEncoderNet) -> None:
        self.net = net.eval()
        self.cfg = net.cfg

    @property
    def hop(self) -> int:
        return self.cfg.hop_length

    @property
    def sample_rate(self) -> int:
        return self.cfg.sample_rate

    @classmethod
    def load(
        cls,
        folder: Path,
        module: dict[str, torch.Tensor] | None,
        n_streams: int,
        device: torch.device | str = "cpu",
        where: str = "",
    ) -> XcodecEncoder:
        """`module`: model.pt's state dict (its codec tensors win, as ESPnet's strict load makes them);
        without any, the codec folder's model.safetensors."""
        cfg, n_q = read_config(Path(folder) / "config.json", n_streams)
        with torch.device("meta"):
            net = XcodecEncoderNet(cfg, n_q)
        inner = {k[len(CODEC_PREFIX) :]: v for k, v in (module or {}).items() if k.startswith(CODEC_PREFIX)}
        if inner:
            shapes = {k: tuple(v.shape) for k, v in inner.items()}
            state = pick_weights(net, shapes, inner.__getitem__, where or "model.pt")
        else:
            from safetensors import SafetensorError, safe_open

            file = Path(folder) / "model.safetensors"
            if not file.exists():
                raise CheckpointError(
                    f"missing weights file {file} (an X-Codec folder needs model.safetensors)"
                )
            try:
                with safe_open(str(file), framework="pt", device="cpu") as f:
                    shapes = {k: tuple(f.get_slice(k).get_shape()) for k in f.keys()}
                    state = pick_weights(net, shapes, f.get_tensor, file)
            except SafetensorError as e:
                raise CheckpointError(
                    f"cannot read {file} (corrupt or truncated safetensors file?): {e}"
                ) from e
        return cls(assign_weights(net, state, device, torch.float32))

    @torch.inference_mode()
    def encode(self, x: torch.Tensor) -> torch.Tensor:
        """x [B, 1, n] float at the codec rate -> codes [B, n_q, frames] (XcodecModel.encode)."""
        return self.net.encode(x.to(self.net.fc.weight.device, torch.float32))

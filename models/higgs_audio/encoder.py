"""The Higgs Audio v2 audio tokenizer's encoder (transformers `HiggsAudioV2TokenizerModel.encode`): 24 kHz
mono PCM -> codes [frames, 8] at 25 Hz, for voice clone from a reference clip.

As the reference computes it (float32):
  semantic: resample to 16 kHz (models/audio/resample.py), pad 160 samples each side, HuBERT
            (models/codecs/xcodec/hubert.py), the mean of all its hidden states, every
            `semantic_downsample`-th frame (2 at the released rates), then the semantic encoder (a conv,
            then blocks of ELU residual units and a conv; models/codecs/xcodec/encoder.py);
  acoustic: the DAC encoder (models/codecs/xcodec/encoder.py, on the DAC blocks) on the clip, or on the
            clip padded by hop / 2 each side when its conv arithmetic would not give the semantic
            branch's frame count;
  both concatenated (acoustic first) -> `fc` -> residual VQ with the top bandwidth's quantizers: per codebook
  `project_in`, the nearest entry by Euclidean distance (the reference's expression term for term, so ties
  break alike), its `project_out` embedding subtracted from the residual.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from ..audio.resample import resample
from ..base import CheckpointError, InputError
from ..codecs.xcodec.encoder import AcousticEncoder, HiggsEncoderConfig, SemanticEncoder
from ..codecs.xcodec.hubert import Hubert, fold_kernel_weight_norm
from ..weights import fold_weight_norm, source_keys
from .codec import VectorQuantizer, read_tokenizer_weights

HUBERT_PAD = 160  # samples at 16 kHz each side (transformers' value, not the original codebase's hop / 2)


class _VQ(VectorQuantizer):
    """The decoder's codebook + project_out (codec.py), with the encoder's project_in."""

    def __init__(self, cfg: HiggsEncoderConfig) -> None:
        super().__init__(cfg)
        self.project_in = nn.Linear(cfg.hidden_size, cfg.codebook_dim)

    def encode(self, residual: torch.Tensor) -> torch.Tensor:
        """residual [B, hidden, T] -> codes [B, T]."""
        h = self.project_in(residual.permute(0, 2, 1))
        B, T, D = h.shape
        flat = h.reshape(-1, D)
        embed = self.codebook.embed.t()
        dist = -(flat.pow(2).sum(1, keepdim=True) - 2 * flat @ embed + embed.pow(2).sum(0, keepdim=True))
        return dist.max(dim=-1).indices.view(B, T)

    def decode(self, codes: torch.Tensor) -> torch.Tensor:
        return self.project_out(F.embedding(codes, self.codebook.embed)).permute(0, 2, 1)


class _Quantizer(nn.Module):
    def __init__(self, cfg: HiggsEncoderConfig) -> None:
        super().__init__()
        self.quantizers = nn.ModuleList(_VQ(cfg) for _ in range(cfg.n_quantizers))


class HiggsEncoderNet(nn.Module):
    """The encode half of the tokenizer with its checkpoint names."""

    def __init__(self, cfg: HiggsEncoderConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.acoustic_encoder = AcousticEncoder(cfg)
        self.encoder_semantic = SemanticEncoder(cfg)
        self.semantic_model = Hubert(cfg.semantic)
        self.fc = nn.Linear(cfg.hidden_size, cfg.hidden_size)
        self.quantizer = _Quantizer(cfg)

    def semantic_features(self, x: torch.Tensor) -> torch.Tensor:
        """x [B, 1, T] at the tokenizer rate -> [B, frames, semantic hidden]."""
        wav = resample(x, self.cfg.sample_rate, self.cfg.semantic_sample_rate)[:, 0, :]
        states = self.semantic_model.hidden_states(F.pad(wav, (HUBERT_PAD, HUBERT_PAD)))
        feats = torch.stack(states, dim=1).mean(dim=1)
        step = self.cfg.semantic_downsample
        return feats[:, ::step, :] if step > 1 else feats

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        """x [B, 1, T] -> codes [B, n_quantizers, frames]."""
        sem = self.encoder_semantic(self.semantic_features(x).transpose(1, 2))
        if self.acoustic_encoder.output_length(x.shape[2]) != sem.shape[2]:
            pad = self.cfg.hop_length // 2
            x = F.pad(x, (pad, pad))
        ac = self.acoustic_encoder(x)
        if ac.shape[2] != sem.shape[2]:
            raise InputError(
                f"the reference clip of {x.shape[2]} samples is too short for the Higgs audio tokenizer; "
                "give at least a second of speech"
            )
        emb = self.fc(torch.cat([ac, sem], dim=1).transpose(1, 2)).transpose(1, 2)
        residual, codes = emb, []
        for q in self.quantizer.quantizers:
            c = q.encode(residual)
            residual = residual - q.decode(c)
            codes.append(c)
        return torch.stack(codes, dim=1)


POS_CONV = "semantic_model.encoder.pos_conv_embed.conv.weight"
_POS_CONV_NORMS = (
    ("weight_g", "weight_v"),
    ("parametrizations.weight.original0", "parametrizations.weight.original1"),
)


class HiggsEncoder:
    """The encode half, loaded from a tokenizer folder in float32 (the reference's precision)."""

    def __init__(self, net: HiggsEncoderNet) -> None:
        self.net = net.eval()
        self.cfg = net.cfg

    @classmethod
    def load(cls, root: Path, device: str = "cpu") -> HiggsEncoder:
        root = Path(root)
        cfg = HiggsEncoderConfig.read(root / "config.json")
        with torch.device("meta"):
            net = HiggsEncoderNet(cfg)
        file = root / "model.safetensors"
        state = read_tokenizer_weights(file, lambda shapes, get: pick_encoder_weights(net, shapes, get, file))
        net.load_state_dict(
            {k: v.to(device=device, dtype=torch.float32) for k, v in state.items()}, strict=True, assign=True
        )
        return cls(net)

    @torch.inference_mode()
    def encode(self, pcm: np.ndarray, sample_rate: int) -> np.ndarray:
        """Mono PCM at `sample_rate` -> codes [frames, n_quantizers] int64. A clip at another rate is first
        resampled to the tokenizer's with the same windowed-sinc resampler its semantic branch uses (the
        reference processor refuses other rates outright)."""
        x = np.asarray(pcm, dtype=np.float32)
        if x.ndim != 1:
            raise InputError(
                f"the reference audio must be mono (one channel), got an array of shape {x.shape}"
            )
        if x.size == 0:
            raise InputError("the reference audio is empty; give a few seconds of speech")
        if not np.isfinite(x).all():
            raise InputError("the reference audio holds NaN or infinite samples; give a clean recording")
        wav = torch.from_numpy(x).to(self.net.fc.weight.device)[None, None]
        if sample_rate != self.cfg.sample_rate:
            wav = resample(wav, int(sample_rate), self.cfg.sample_rate)
        if wav.shape[2] < self.cfg.hop_length:
            raise InputError(
                f"the reference clip is {x.size / sample_rate * 1000:.0f} ms long; the Higgs audio "
                f"tokenizer needs at least {self.cfg.hop_length / self.cfg.sample_rate * 1000:.0f} ms "
                "(a few seconds is usual)"
            )
        return self.net.encode(wav)[0].T.cpu().numpy().astype(np.int64)


def pick_encoder_weights(net: HiggsEncoderNet, shapes: dict[str, tuple[int, ...]], get, where: Any) -> dict:
    """Every tensor the encoder needs, checked for presence and shape (weight-norm pairs folded, no
    NaN/inf); errors name the key and the file. A tokenizer saved without its encoder (only the decode half)
    is refused with the first missing key."""
    for part in ("acoustic_encoder.", "encoder_semantic.", "semantic_model.", "fc."):
        if not any(k.startswith(part) for k in shapes):
            raise CheckpointError(
                f"checkpoint {where} has no {part[:-1]} tensors: this audio tokenizer holds only its "
                "decoder, and voice clone from a clip needs the encoder too (the full "
                "bosonai/higgs-audio-v2-tokenizer has it)"
            )
    out: dict[str, Any] = {}
    for k, v in net.state_dict().items():
        shape = tuple(v.shape)
        srcs = (
            _pos_conv_keys(shape, shapes, where)
            if k == POS_CONV and k not in shapes
            else source_keys(k, shape, shapes, where)
        )
        ts = [get(s) for s in srcs]
        for s, t in zip(srcs, ts, strict=True):
            if t.is_floating_point() and not torch.isfinite(t).all():
                raise CheckpointError(f"tensor {s!r} in {where} holds NaN or inf values")
        if len(ts) == 1:
            out[k] = ts[0]
        elif k == POS_CONV:
            out[k] = fold_kernel_weight_norm(ts[0].float(), ts[1].float())
        else:
            out[k] = fold_weight_norm(ts[0], ts[1])
    return out


def _pos_conv_keys(shape: tuple[int, ...], shapes: dict[str, tuple[int, ...]], where: Any) -> tuple[str, str]:
    base = POS_CONV[: -len("weight")]
    for g, v in _POS_CONV_NORMS:
        if base + g in shapes and base + v in shapes:
            if shapes[base + v] != shape or shapes[base + g] != (1, 1, shape[2]):
                raise CheckpointError(
                    f"checkpoint {where}: tensors {base + g!r} / {base + v!r} have shapes "
                    f"{list(shapes[base + g])} / {list(shapes[base + v])}, the architecture in config.json "
                    f"needs {[1, 1, shape[2]]} / {list(shape)}"
                )
            return base + g, base + v
    raise CheckpointError(f"checkpoint {where}: tensor {POS_CONV!r} (or its weight-norm pair) is missing")

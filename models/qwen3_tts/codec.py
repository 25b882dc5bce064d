"""Qwen3-TTS 12 Hz codec decoder (codes -> 24 kHz waveform) with exact streaming through a slot table.

Pipeline (official `Qwen3TTSTokenizerV2Decoder`, same parameter names): split RVQ decode -> causal
pre_conv -> sliding-window pre_transformer -> 2 x (ConvTranspose x2 + causal ConvNeXt) -> causal conv ->
4 decoder blocks (rates 8, 5, 4, 3) -> SnakeBeta -> causal conv -> clamp(-1, 1). 1920 samples/frame.

Streaming: every op is causal, so a request's chunks decoded in order with carried state equal one full
forward. The state of every request lives in preallocated tensors indexed by slot (`init_slots`);
`decode_chunks` gathers the slots of a batch, decodes all chunks in ONE padded pass and scatters the
new state back.

Batching chunks of different lengths: pad + per-row lengths, not group-by-length. All ops are causal,
so right padding never reaches valid samples; the only length-dependent step is picking each row's
last inputs as history (`take_window`, a gather). One pass per batch keeps the number of kernel launches
independent of how many distinct chunk sizes a ramp schedule produces (1, 2, 4, 8, 10... would give
up to 5 passes per batch with grouping), at the cost of computing the padded tail of short rows.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from ..base import CheckpointError, CodecItem, check_codec_batch
from ..codecs.streaming_conv import CausalConv, CausalTransConv, State
from ..config_fields import get_float, get_int, rope_theta
from ..device_memory import pool_zeros
from .codec_layers import ConvNeXtBlock, DecoderBlock, SnakeBeta
from .codec_transformer import PreTransformer, TransformerDims
from .weights_check import load_checked


@dataclass(frozen=True)
class CodecDecoderConfig:
    """The fields of speech_tokenizer/config.json `decoder_config` the decoder needs."""

    codebook_size: int = 2048
    codebook_dim: int = 512
    hidden_size: int = 512
    latent_dim: int = 1024
    num_heads: int = 16
    num_kv_heads: int = 16
    head_dim: int = 64
    intermediate_size: int = 1024
    num_layers: int = 8
    window: int = 72
    rope_theta: float = 10000.0
    rms_eps: float = 1e-5
    attention_bias: bool = False
    num_quantizers: int = 16
    num_semantic: int = 1
    upsample_rates: tuple[int, ...] = (8, 5, 4, 3)
    upsampling_ratios: tuple[int, ...] = (2, 2)
    decoder_dim: int = 1536

    @classmethod
    def from_dict(cls, d: dict[str, Any], where: str = "speech_tokenizer/config.json decoder_config"
                  ) -> CodecDecoderConfig:
        """As transformers 4.5x or 5.x writes it (rope_theta or rope_parameters; absent or null -> the
        default); a value of the wrong kind -> CheckpointError naming the key and the file."""

        def i(key: str, default: int) -> int:
            return get_int(d, key, default, where)

        def ints(key: str, default: tuple[int, ...]) -> tuple[int, ...]:
            return tuple(get_int({key: x}, key, None, where) for x in (d.get(key) or default))

        heads, hidden = i("num_attention_heads", 16), i("hidden_size", 1024)
        return cls(
            codebook_size=i("codebook_size", 2048),
            codebook_dim=i("codebook_dim", 512),
            hidden_size=hidden,
            latent_dim=i("latent_dim", 1024),
            num_heads=heads,
            num_kv_heads=i("num_key_value_heads", 16),
            head_dim=i("head_dim", hidden // heads),
            intermediate_size=i("intermediate_size", 3072),
            num_layers=i("num_hidden_layers", 8),
            window=i("sliding_window", 72),
            rope_theta=rope_theta(d, 10000.0, where),
            rms_eps=get_float(d, "rms_norm_eps", 1e-5, where),
            attention_bias=bool(d.get("attention_bias") or False),
            num_quantizers=i("num_quantizers", 16),
            num_semantic=1,  # the decoder hard-codes 1
            upsample_rates=ints("upsample_rates", (8, 5, 4, 3)),
            upsampling_ratios=ints("upsampling_ratios", (2, 2)),
            decoder_dim=i("decoder_dim", 1536),
        )

    @property
    def samples_per_frame(self) -> int:
        return math.prod(self.upsample_rates) * math.prod(self.upsampling_ratios)


# --- split residual VQ (decode only) ----------------------------------------------------------------
class Codebook(nn.Module):
    def __init__(self, size: int, dim: int) -> None:
        super().__init__()
        self.cluster_usage = nn.Parameter(torch.ones(size))
        self.embedding_sum = nn.Parameter(torch.zeros(size, dim))

    def decode(self, codes: torch.Tensor) -> torch.Tensor:
        """codes [B, T] -> [B, dim, T]. Gather then divide: bitwise equal to dividing the table first."""
        emb = self.embedding_sum[codes] / self.cluster_usage.clamp(min=1e-5)[codes][..., None]
        return emb.transpose(1, 2)


class _VQ(nn.Module):  # holds `_codebook` so the official key `vq.layers.N._codebook.*` matches
    def __init__(self, size: int, dim: int) -> None:
        super().__init__()
        self._codebook = Codebook(size, dim)


class _VQLayers(nn.Module):
    def __init__(self, n: int, size: int, dim: int) -> None:
        super().__init__()
        self.layers = nn.ModuleList([_VQ(size, dim) for _ in range(n)])


class ResidualVQ(nn.Module):
    """n codebooks of dim D summed in order, then a 1x1 conv D -> out. `input_proj` is only used by the
    encoder side but ships in the checkpoint, so it is kept for strict loading."""

    def __init__(self, n: int, size: int, dim: int, io_dim: int) -> None:
        super().__init__()
        self.input_proj = nn.Conv1d(io_dim, dim, 1, bias=False)
        self.output_proj = nn.Conv1d(dim, io_dim, 1, bias=False)
        self.vq = _VQLayers(n, size, dim)

    def decode(self, codes: torch.Tensor) -> torch.Tensor:
        """codes [B, n, T] -> [B, io_dim, T]; sequential sum like the official loop."""
        q = self.vq.layers[0]._codebook.decode(codes[:, 0])
        for i in range(1, codes.shape[1]):
            q = q + self.vq.layers[i]._codebook.decode(codes[:, i])
        return self.output_proj(q)


class SplitRVQ(nn.Module):
    def __init__(self, cfg: CodecDecoderConfig) -> None:
        super().__init__()
        dim = cfg.codebook_dim // 2
        self.n_semantic = cfg.num_semantic
        self.rvq_first = ResidualVQ(cfg.num_semantic, cfg.codebook_size, dim, cfg.codebook_dim)
        self.rvq_rest = ResidualVQ(
            cfg.num_quantizers - cfg.num_semantic, cfg.codebook_size, dim, cfg.codebook_dim
        )

    def decode(self, codes: torch.Tensor) -> torch.Tensor:
        s = self.n_semantic
        return self.rvq_first.decode(codes[:, :s]) + self.rvq_rest.decode(codes[:, s:])


# --- the decoder ----------------------------------------------------------------------------------
class CodecDecoder(nn.Module):
    """Official layout: quantizer, pre_conv, pre_transformer, upsample[i] = [TransConv, ConvNeXt],
    decoder = [CausalConv, DecoderBlock x4, SnakeBeta, CausalConv]."""

    def __init__(self, cfg: CodecDecoderConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.quantizer = SplitRVQ(cfg)
        self.pre_conv = CausalConv(cfg.codebook_dim, cfg.latent_dim, 3)
        self.pre_transformer = PreTransformer(
            TransformerDims(
                latent_dim=cfg.latent_dim,
                hidden_size=cfg.hidden_size,
                intermediate_size=cfg.intermediate_size,
                num_layers=cfg.num_layers,
                num_heads=cfg.num_heads,
                num_kv_heads=cfg.num_kv_heads,
                head_dim=cfg.head_dim,
                window=cfg.window,
                rope_theta=cfg.rope_theta,
                rms_eps=cfg.rms_eps,
                attention_bias=cfg.attention_bias,
            )
        )
        self.upsample = nn.ModuleList(
            [
                nn.ModuleList(
                    [CausalTransConv(cfg.latent_dim, cfg.latent_dim, r, r), ConvNeXtBlock(cfg.latent_dim)]
                )
                for r in cfg.upsampling_ratios
            ]
        )
        dims = [cfg.decoder_dim // 2**i for i in range(len(cfg.upsample_rates) + 1)]
        self.decoder = nn.ModuleList(
            [CausalConv(cfg.latent_dim, cfg.decoder_dim, 7)]
            + [DecoderBlock(dims[i], dims[i + 1], r) for i, r in enumerate(cfg.upsample_rates)]
            + [SnakeBeta(dims[-1]), CausalConv(dims[-1], 1, 7)]
        )
        for name, m in self.named_modules():
            if isinstance(m, CausalConv | CausalTransConv):
                m.state_key = name

    def state_shapes(self) -> dict[str, tuple[int, ...]]:
        """Per-slot shape of every piece of streaming state (int64 for `*.pos`, else float)."""
        shapes: dict[str, tuple[int, ...]] = {}
        for m in self.modules():
            if isinstance(m, CausalConv | CausalTransConv | PreTransformer):
                shapes.update(m.state_shapes())
        return shapes

    def forward(self, codes: torch.Tensor) -> torch.Tensor:
        """codes [B, 16, T] int64 -> wav [B, 1, T * samples_per_frame], one full forward."""
        return self.unclamped(codes).clamp(-1, 1)

    def unclamped(self, codes: torch.Tensor) -> torch.Tensor:
        h = self.pre_conv(self.quantizer.decode(codes))
        h = self.pre_transformer(h.transpose(1, 2)).transpose(1, 2)
        for trans, block in self.upsample:
            h = block(trans(h))
        for m in self.decoder:
            h = m(h)
        return h

    def stream(self, codes: torch.Tensor, lengths: torch.Tensor, st: State) -> tuple[torch.Tensor, State]:
        """Right-padded chunks codes [B, 16, L], lengths [B] frames, gathered state -> (wav, new state)."""
        new: State = {}
        h = self.pre_conv.stream(self.quantizer.decode(codes), lengths, st, new)
        h = self.pre_transformer.stream(h.transpose(1, 2), lengths, st, new).transpose(1, 2)
        for trans, block in self.upsample:
            h = trans.stream(h, lengths, st, new)
            lengths = lengths * trans.stride
            h = block.stream(h, lengths, st, new)
        first, *blocks, act, last = self.decoder
        h = first.stream(h, lengths, st, new)
        for blk in blocks:
            h = blk.stream(h, lengths, st, new)
            lengths = lengths * blk.rate
        h = last.stream(act(h), lengths, st, new)
        return h.clamp(-1, 1), new


class Qwen3TTSCodec(nn.Module):
    """The 12 Hz decoder plus its streaming slot table. Keys load from `decoder.*` of
    speech_tokenizer/model.safetensors (`self.decoder` is the official `decoder` submodule)."""

    def __init__(self, cfg: CodecDecoderConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.decoder = CodecDecoder(cfg)
        self.samples_per_frame = cfg.samples_per_frame
        self.slots: State = {}
        self.num_slots = 0

    # --- loading ----------------------------------------------------------------------------------
    @classmethod
    def from_checkpoint(
        cls, path: str | Path, device: str | torch.device = "cpu", dtype: torch.dtype = torch.float32
    ) -> Qwen3TTSCodec:
        """`path` is the model dir (holding speech_tokenizer/) or the speech_tokenizer dir itself."""
        st_dir = speech_tokenizer_dir(path)
        cfg = CodecDecoderConfig.from_dict(read_tokenizer_config(st_dir)["decoder_config"],
                                           f"{st_dir / 'config.json'} decoder_config")
        with torch.device("meta"):
            codec = cls(cfg)
        load_checked(
            codec.decoder, st_dir / "model.safetensors", prefix="decoder.", device=device, dtype=dtype
        )
        return codec.eval()

    # --- offline ----------------------------------------------------------------------------------
    @torch.inference_mode()
    def full_forward(self, codes: torch.Tensor) -> torch.Tensor:
        self._check_codes(codes.shape[1], codes)
        return self.decoder(codes.to(self._device))

    # --- streaming --------------------------------------------------------------------------------
    def init_slots(self, n: int) -> None:
        """Preallocate the state of `n` concurrent requests (zeros = a fresh request)."""
        if n < 1:
            raise ValueError(f"the codec slot table needs at least 1 slot, got {n}")
        dtype = next(self.parameters()).dtype
        self.slots = {
            k: pool_zeros((n, *shape), torch.int64 if k.endswith(".pos") else dtype, self._device)
            for k, shape in self.decoder.state_shapes().items()
        }
        self.num_slots = n

    def slot_bytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in self.slots.values()) // max(self.num_slots, 1)

    @torch.inference_mode()
    def decode_chunks(self, items: list[CodecItem]) -> list[np.ndarray]:
        """Decode each item's chunk ([n, 16] codes) to float32 PCM [n * 1920], continuing its slot."""
        if not items:
            return []
        slots = check_codec_batch(items, self.num_slots)
        lengths = [self._check_chunk(it) for it in items]
        n_max = max(lengths)
        codes = np.zeros((len(items), self.cfg.num_quantizers, n_max), dtype=np.int64)
        for b, it in enumerate(items):
            codes[b, :, : lengths[b]] = np.asarray(it.codes).T
        dev = self._device
        idx = torch.tensor(slots, device=dev)
        fresh = torch.tensor([it.first for it in items], device=dev)
        st = {}
        for k, table in self.slots.items():
            g = table.index_select(0, idx)
            # A first chunk starts from zeros whatever the slot held before (slot reuse).
            st[k] = torch.where(fresh.view(-1, *([1] * (g.dim() - 1))), torch.zeros_like(g), g)
        wav, new = self.decoder.stream(torch.from_numpy(codes).to(dev), torch.tensor(lengths, device=dev), st)
        for k, v in new.items():
            self.slots[k].index_copy_(0, idx, v)
        out = wav[:, 0].float().cpu().numpy()
        spf = self.samples_per_frame
        return [out[b, : n * spf].copy() for b, n in enumerate(lengths)]

    # --- helpers ----------------------------------------------------------------------------------
    @property
    def _device(self) -> torch.device:
        return next(self.parameters()).device

    def _check_chunk(self, item: CodecItem) -> int:
        c = np.asarray(item.codes)
        if c.ndim != 2 or c.shape[1] != self.cfg.num_quantizers or c.shape[0] < 1:
            raise ValueError(
                f"a codec chunk must be [n >= 1, {self.cfg.num_quantizers}] codes, "
                f"got shape {c.shape} (slot {item.slot})"
            )
        self._check_codes(c.shape[1], c)
        return int(c.shape[0])

    def _check_codes(self, groups: int, codes: np.ndarray | torch.Tensor) -> None:
        if groups != self.cfg.num_quantizers:
            raise ValueError(f"expected {self.cfg.num_quantizers} codebooks, got {groups}")
        lo, hi = int(codes.min()), int(codes.max())
        if lo < 0 or hi >= self.cfg.codebook_size:
            raise ValueError(f"codec codes must lie in [0, {self.cfg.codebook_size}), got [{lo}, {hi}]")


def speech_tokenizer_dir(path: str | Path) -> Path:
    p = Path(path)
    if (p / "speech_tokenizer" / "config.json").exists():
        return p / "speech_tokenizer"
    if (p / "config.json").exists() and (p / "model.safetensors").exists():
        return p
    raise CheckpointError(
        f"no speech tokenizer found at {p}: expected {p}/speech_tokenizer/config.json "
        "and model.safetensors (the official Qwen3-TTS layout)"
    )


def read_tokenizer_config(st_dir: Path) -> dict[str, Any]:
    path = st_dir / "config.json"
    try:
        cfg = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise CheckpointError(f"cannot read the speech tokenizer config {path}: {e}") from e
    if "decoder_config" not in cfg:
        raise CheckpointError(f"{path} has no 'decoder_config': not a Qwen3-TTS 12 Hz speech tokenizer")
    return cfg

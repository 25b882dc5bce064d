"""HuBERT (transformers `HubertModel`, post-norm variant) as the X-Codec-design encoders' semantic model
(the Higgs audio tokenizer's, X-Codec's) runs it: inference only, no attention mask, every hidden state
returned (the tokenizers average them).

Structure (config names, transformers' defaults = hubert-base): a conv feature encoder (7 convs, the first
with a per-channel GroupNorm, GELU after each), LayerNorm + Linear projection, a grouped positional conv
(weight-normalised over its kernel axis, one trailing sample dropped for an even kernel, GELU) added to the
input, LayerNorm, then post-norm transformer layers (attention, add, LayerNorm; FFN, add, LayerNorm).
Hidden states: the layers' input, then each layer's output.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from ...base import CheckpointError


@dataclass(frozen=True)
class HubertConfig:
    hidden_size: int = 768
    num_hidden_layers: int = 12
    num_attention_heads: int = 12
    intermediate_size: int = 3072
    layer_norm_eps: float = 1e-5
    conv_dim: tuple[int, ...] = (512,) * 7
    conv_stride: tuple[int, ...] = (5, 2, 2, 2, 2, 2, 2)
    conv_kernel: tuple[int, ...] = (10, 3, 3, 3, 3, 2, 2)
    conv_bias: bool = False
    num_conv_pos_embeddings: int = 128
    num_conv_pos_embedding_groups: int = 16

    @classmethod
    def from_dict(cls, d: dict[str, Any], where: str) -> HubertConfig:
        """The tokenizer's `semantic_model_config`; variants this port does not implement are refused."""
        unsupported = {
            "feat_extract_norm": "group",
            "feat_extract_activation": "gelu",
            "hidden_act": "gelu",
            "do_stable_layer_norm": False,
            "conv_pos_batch_norm": False,
            "feat_proj_layer_norm": True,
        }
        for k, want in unsupported.items():
            if k in d and d[k] != want:
                raise CheckpointError(
                    f"{where}: semantic_model_config.{k} = {d[k]!r} is not supported (only {want!r})"
                )
        base = cls()
        try:
            cfg = cls(
                hidden_size=int(d.get("hidden_size", base.hidden_size)),
                num_hidden_layers=int(d.get("num_hidden_layers", base.num_hidden_layers)),
                num_attention_heads=int(d.get("num_attention_heads", base.num_attention_heads)),
                intermediate_size=int(d.get("intermediate_size", base.intermediate_size)),
                layer_norm_eps=float(d.get("layer_norm_eps", base.layer_norm_eps)),
                conv_dim=tuple(int(x) for x in d.get("conv_dim", base.conv_dim)),
                conv_stride=tuple(int(x) for x in d.get("conv_stride", base.conv_stride)),
                conv_kernel=tuple(int(x) for x in d.get("conv_kernel", base.conv_kernel)),
                conv_bias=bool(d.get("conv_bias", base.conv_bias)),
                num_conv_pos_embeddings=int(d.get("num_conv_pos_embeddings", base.num_conv_pos_embeddings)),
                num_conv_pos_embedding_groups=int(
                    d.get("num_conv_pos_embedding_groups", base.num_conv_pos_embedding_groups)
                ),
            )
        except (TypeError, ValueError) as e:
            raise CheckpointError(f"{where}: invalid semantic_model_config ({e})") from None
        if not len(cfg.conv_dim) == len(cfg.conv_stride) == len(cfg.conv_kernel):
            raise CheckpointError(
                f"{where}: semantic_model_config conv_dim, conv_stride and conv_kernel must be equally long"
            )
        if cfg.hidden_size % cfg.num_attention_heads:
            raise CheckpointError(
                f"{where}: semantic_model_config hidden_size {cfg.hidden_size} must divide by "
                f"num_attention_heads {cfg.num_attention_heads}"
            )
        return cfg


class _Conv(nn.Module):
    def __init__(self, cin: int, cout: int, kernel: int, bias: bool) -> None:
        super().__init__()
        self.conv = nn.Conv1d(cin, cout, kernel, bias=bias)


class FeatureEncoder(nn.Module):
    def __init__(self, cfg: HubertConfig) -> None:
        super().__init__()
        dims = (1, *cfg.conv_dim)
        self.conv_layers = nn.ModuleList(
            _Conv(dims[i], dims[i + 1], k, cfg.conv_bias) for i, k in enumerate(cfg.conv_kernel)
        )
        self.conv_layers[0].layer_norm = nn.GroupNorm(cfg.conv_dim[0], cfg.conv_dim[0], affine=True)
        self.strides = cfg.conv_stride

    def forward(self, wav: torch.Tensor) -> torch.Tensor:
        """wav [B, T] -> [B, conv_dim[-1], frames]."""
        x = wav[:, None]
        for i, (layer, s) in enumerate(zip(self.conv_layers, self.strides, strict=True)):
            x = F.conv1d(x, layer.conv.weight, layer.conv.bias, stride=s)
            if i == 0:
                x = layer.layer_norm(x)
            x = F.gelu(x)
        return x


class FeatureProjection(nn.Module):
    def __init__(self, cfg: HubertConfig) -> None:
        super().__init__()
        self.layer_norm = nn.LayerNorm(cfg.conv_dim[-1], eps=cfg.layer_norm_eps)
        self.projection = nn.Linear(cfg.conv_dim[-1], cfg.hidden_size)


class PositionalConv(nn.Module):
    """The grouped positional conv; its weight-norm (g over the kernel axis) is folded at load time."""

    def __init__(self, cfg: HubertConfig) -> None:
        super().__init__()
        k, h, g = cfg.num_conv_pos_embeddings, cfg.hidden_size, cfg.num_conv_pos_embedding_groups
        self.conv = nn.Conv1d(h, h, k, padding=k // 2, groups=g)
        self.drop_last = k % 2 == 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x [B, T, H] -> [B, T, H]."""
        y = self.conv(x.transpose(1, 2))
        if self.drop_last:
            y = y[:, :, :-1]
        return F.gelu(y).transpose(1, 2)


class Attention(nn.Module):
    def __init__(self, cfg: HubertConfig) -> None:
        super().__init__()
        h = cfg.hidden_size
        self.heads, self.head_dim = cfg.num_attention_heads, h // cfg.num_attention_heads
        self.k_proj, self.v_proj = nn.Linear(h, h), nn.Linear(h, h)
        self.q_proj, self.out_proj = nn.Linear(h, h), nn.Linear(h, h)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, _ = x.shape

        def heads(t: torch.Tensor) -> torch.Tensor:
            return t.view(B, T, -1, self.head_dim).transpose(1, 2)

        q, k, v = heads(self.q_proj(x)), heads(self.k_proj(x)), heads(self.v_proj(x))
        y = F.scaled_dot_product_attention(q, k, v, scale=self.head_dim**-0.5)
        return self.out_proj(y.transpose(1, 2).reshape(B, T, -1))


class FeedForward(nn.Module):
    def __init__(self, cfg: HubertConfig) -> None:
        super().__init__()
        self.intermediate_dense = nn.Linear(cfg.hidden_size, cfg.intermediate_size)
        self.output_dense = nn.Linear(cfg.intermediate_size, cfg.hidden_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.output_dense(F.gelu(self.intermediate_dense(x)))


class Layer(nn.Module):
    def __init__(self, cfg: HubertConfig) -> None:
        super().__init__()
        self.attention = Attention(cfg)
        self.layer_norm = nn.LayerNorm(cfg.hidden_size, eps=cfg.layer_norm_eps)
        self.feed_forward = FeedForward(cfg)
        self.final_layer_norm = nn.LayerNorm(cfg.hidden_size, eps=cfg.layer_norm_eps)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.layer_norm(x + self.attention(x))
        return self.final_layer_norm(x + self.feed_forward(x))


class Encoder(nn.Module):
    def __init__(self, cfg: HubertConfig) -> None:
        super().__init__()
        self.pos_conv_embed = PositionalConv(cfg)
        self.layer_norm = nn.LayerNorm(cfg.hidden_size, eps=cfg.layer_norm_eps)
        self.layers = nn.ModuleList(Layer(cfg) for _ in range(cfg.num_hidden_layers))


class Hubert(nn.Module):
    """Checkpoint names as transformers' HubertModel (`feature_extractor.*`, `feature_projection.*`,
    `encoder.*`)."""

    def __init__(self, cfg: HubertConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.feature_extractor = FeatureEncoder(cfg)
        self.feature_projection = FeatureProjection(cfg)
        self.encoder = Encoder(cfg)

    def hidden_states(self, wav: torch.Tensor) -> list[torch.Tensor]:
        """wav [B, T] at 16 kHz -> num_hidden_layers + 1 states [B, frames, hidden]."""
        x = self.feature_extractor(wav).transpose(1, 2)
        fp = self.feature_projection
        x = fp.projection(fp.layer_norm(x))
        enc = self.encoder
        x = enc.layer_norm(x + enc.pos_conv_embed(x))
        out = [x]
        for layer in enc.layers:
            x = layer(x)
            out.append(x)
        return out


def fold_kernel_weight_norm(g: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """weight_norm(dim=2): weight = g * v / ||v||, the norm over output and input channels per kernel tap
    (torch's own weight-norm op, the one its parametrization evaluates)."""
    return torch._weight_norm(v, g, 2)

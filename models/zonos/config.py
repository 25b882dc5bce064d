"""Zonos' config.json (the released layout: `backbone`, `prefix_conditioner`, token ids), parsed strictly.

Only the transformer backbone runs here: a hybrid checkpoint (non-empty `ssm_cfg`, Zyphra/Zonos-v0.1-hybrid)
needs mamba-ssm's CUDA kernels, which this project does not carry, so it is refused in one sentence before
any weight is read.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..errors import CheckpointError

CODEBOOKS = 9  # DAC 44.1 kHz: the nine heads and embeddings
CODE_VOCAB = 1026  # 1024 codes + EOS (1024) + the masked/delay token (1025)
HEAD_VOCAB = 1025  # the heads predict codes and EOS; the padded column is never chosen
CONDITIONER_TYPES = (
    "EspeakPhonemeConditioner",
    "PassthroughConditioner",
    "FourierConditioner",
    "IntegerConditioner",
)


@dataclass(frozen=True)
class Backbone:
    d_model: int
    n_layer: int
    num_heads: int
    num_heads_kv: int
    mlp: int  # attn_mlp_d_intermediate
    norm_epsilon: float

    @property
    def head_dim(self) -> int:
        return self.d_model // self.num_heads


@dataclass(frozen=True)
class Conditioner:
    """One prefix conditioner, as config.json lists it (order = order of its tokens in the prefix)."""

    type: str
    name: str
    cond_dim: int | None
    projection: str
    learned_uncond: bool
    input_dim: int
    min_val: float
    max_val: float


@dataclass(frozen=True)
class ZonosConfig:
    backbone: Backbone
    conditioners: tuple[Conditioner, ...]
    projection: str  # the prefix conditioner's own projection
    eos_token_id: int
    masked_token_id: int
    pad_vocab_to_multiple_of: int

    def conditioner(self, name: str) -> Conditioner | None:
        return next((c for c in self.conditioners if c.name == name), None)


def _need(d: dict, key: str, where: str) -> Any:
    if key not in d:
        raise CheckpointError(f"{where} lacks {key!r}; is this a Zonos checkpoint?")
    return d[key]


def parse_config(raw: dict, where: str) -> ZonosConfig:
    bb = _need(raw, "backbone", where)
    if bb.get("ssm_cfg"):
        raise CheckpointError(
            f"{where} is a Zonos hybrid (Mamba2) checkpoint, which needs mamba-ssm's CUDA kernels that "
            "voxcli "
            "does not include; use the transformer variant Zyphra/Zonos-v0.1-transformer"
        )
    attn = _need(bb, "attn_cfg", f"{where} backbone")
    backbone = Backbone(
        d_model=int(_need(bb, "d_model", where)),
        n_layer=int(_need(bb, "n_layer", where)),
        num_heads=int(_need(attn, "num_heads", where)),
        num_heads_kv=int(_need(attn, "num_heads_kv", where)),
        mlp=int(_need(bb, "attn_mlp_d_intermediate", where)),
        norm_epsilon=float(bb.get("norm_epsilon", 1e-5)),
    )
    if backbone.d_model % backbone.num_heads or backbone.num_heads % backbone.num_heads_kv:
        raise CheckpointError(f"{where}: d_model, num_heads and num_heads_kv do not divide evenly")
    pc = _need(raw, "prefix_conditioner", where)
    conds = []
    for c in _need(pc, "conditioners", where):
        kind = _need(c, "type", where)
        if kind not in CONDITIONER_TYPES:
            raise CheckpointError(f"{where}: unknown conditioner type {kind!r}")
        conds.append(
            Conditioner(
                type=kind,
                name=_need(c, "name", where),
                cond_dim=c.get("cond_dim"),
                projection=c.get("projection", "none"),
                learned_uncond=c.get("uncond_type", "none") == "learned",
                input_dim=int(c.get("input_dim", 1)),
                min_val=float(c.get("min_val", 0.0 if kind != "IntegerConditioner" else 0)),
                max_val=float(c.get("max_val", 1.0 if kind != "IntegerConditioner" else 512)),
            )
        )
    if not any(c.type == "EspeakPhonemeConditioner" for c in conds):
        raise CheckpointError(f"{where}: the prefix conditioner has no espeak (text) conditioner")
    return ZonosConfig(
        backbone=backbone,
        conditioners=tuple(conds),
        projection=pc.get("projection", "none"),
        eos_token_id=int(raw.get("eos_token_id", 1024)),
        masked_token_id=int(raw.get("masked_token_id", 1025)),
        pad_vocab_to_multiple_of=int(raw.get("pad_vocab_to_multiple_of", 8)),
    )

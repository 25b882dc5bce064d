"""Where a checkpoint keeps Mimi's tensors: a layout maps the codec's own parameter names (transformers'
`MimiModel` names, what `MimiCodec.state_dict()` lists) to the checkpoint's entries.

A layout is a function from a checkpoint's tensor table (`checkpoint.read_header` entries) to the entries
under the codec's names, so `fill_module` reads each tensor straight into its parameter whatever the file
calls it. Two are in use:

* `transformers_layout(prefix)`: transformers' names under a prefix (`codec_model.` in CSM's
  transformers-*.safetensors, `encoder.` for Qwen3-TTS's speech tokenizer, "" in kyutai/mimi's
  model.safetensors as transformers converts it).
* `moshi_layout`: moshi's own names (Kyutai TTS / Moshi checkpoints: `encoder.model.N.conv.conv.*`, fused
  `self_attn.in_proj_weight`, `quantizer.rvq_first.vq.layers.N._codebook.embedding_sum` ...); a fused
  q/k/v tensor is row-major, so its thirds are byte ranges of one entry (`TensorEntry` slices) and need no
  copy. moshi's RoPE pairs adjacent channels, so its loader also calls `deinterleave_rope` (load_codec's
  `after`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import torch
from torch import nn

from ...base import CheckpointError
from ...checkpoint import TensorEntry

Layout = Callable[[dict[str, TensorEntry]], dict[str, TensorEntry]]


def transformers_layout(prefix: str) -> Layout:
    def entries(table: dict[str, TensorEntry]) -> dict[str, TensorEntry]:
        out = {k[len(prefix) :]: e for k, e in table.items() if k.startswith(prefix)}
        if not out:
            raise CheckpointError(f"the checkpoint holds no Mimi codec tensors (none named {prefix}*)")
        return out

    return entries


def _rows(entry: TensorEntry, start: int, count: int) -> TensorEntry:
    """Rows [start, start + count) of a row-major 2-D entry: a byte range of the same file, no copy."""
    per_row = entry.nbytes // entry.shape[0]
    return replace(entry, shape=(count, *entry.shape[1:]), offset=entry.offset + start * per_row,
                   nbytes=count * per_row)


# moshi's layer names -> transformers' (the parts after `<side>_transformer.transformer.layers.N.`)
_MOSHI_LAYER = {
    "norm1.weight": "input_layernorm.weight",
    "norm1.bias": "input_layernorm.bias",
    "norm2.weight": "post_attention_layernorm.weight",
    "norm2.bias": "post_attention_layernorm.bias",
    "linear1.weight": "mlp.fc1.weight",
    "linear2.weight": "mlp.fc2.weight",
    "layer_scale_1.scale": "self_attn_layer_scale.scale",
    "layer_scale_2.scale": "mlp_layer_scale.scale",
    "self_attn.out_proj.weight": "self_attn.o_proj.weight",
    "self_attn.out_projs.0.weight": "self_attn.o_proj.weight",
}
_MOSHI_RVQ = {
    "rvq_first": "semantic_residual_vector_quantizer",
    "rvq_rest": "acoustic_residual_vector_quantizer",
}


def _moshi_name(name: str) -> str | None:
    """One moshi Mimi tensor name -> transformers' (None: a fused q/k/v, split by the caller)."""
    parts = name.split(".")
    if parts[0] in ("encoder", "decoder") and parts[1] == "model":
        # encoder.model.N.conv.conv.w / decoder.model.N.convtr.convtr.w / ...block.M.conv.conv.w
        rest = [p for p in parts[3:] if p not in ("conv", "convtr")]
        return ".".join([parts[0], "layers", parts[2], *rest[:-1], "conv", rest[-1]])
    if parts[0] in ("encoder_transformer", "decoder_transformer"):
        tail = ".".join(parts[4:])
        if tail in ("self_attn.in_proj_weight", "self_attn.in_projs.0.weight"):
            return None
        return f"{parts[0]}.layers.{parts[3]}.{_MOSHI_LAYER[tail]}"
    if parts[0] == "downsample":
        return "downsample.conv." + parts[-1]
    if parts[0] == "upsample":
        return "upsample.conv." + parts[-1]
    if parts[0] == "quantizer":
        side = _MOSHI_RVQ[parts[1]]
        if parts[2] in ("input_proj", "output_proj"):
            return f"quantizer.{side}.{parts[2]}.{parts[3]}"
        # quantizer.rvq_first.vq.layers.N._codebook.{embedding_sum, cluster_usage, _initialized}
        leaf = {"embedding_sum": "embed_sum", "cluster_usage": "cluster_usage", "_initialized": "initialized"}
        return f"quantizer.{side}.layers.{parts[4]}.codebook.{leaf[parts[6]]}"
    raise KeyError(name)


def moshi_layout(table: dict[str, TensorEntry]) -> dict[str, TensorEntry]:
    """moshi's own Mimi names (Kyutai TTS's `tokenizer-*.safetensors`): convs `encoder.model.N.conv.conv.*`,
    transformer layers under `*_transformer.transformer.layers.N.` with q/k/v fused in `in_proj_weight`
    (its thirds are row ranges), the split RVQ under `rvq_first` / `rvq_rest`. Queries and keys are in
    moshi's interleaved RoPE order: `deinterleave_rope` turns them into the half-split order after loading."""
    out: dict[str, TensorEntry] = {}
    try:
        for name, e in table.items():
            new = _moshi_name(name)
            if new is not None:
                out[new] = e
                continue
            side, layer = name.split(".")[0], name.split(".")[3]
            third = e.shape[0] // 3
            for i, proj in enumerate(("q_proj", "k_proj", "v_proj")):
                out[f"{side}.layers.{layer}.self_attn.{proj}.weight"] = _rows(e, i * third, third)
    except (KeyError, IndexError):
        raise CheckpointError(
            f"the Mimi checkpoint holds a tensor moshi's Mimi does not name: {name}"
        ) from None
    if not out:
        raise CheckpointError("the checkpoint holds no Mimi codec tensors")
    return out


def deinterleave_rope(codec: nn.Module, head_dim: int) -> None:
    """moshi rotates (x[2i], x[2i+1]) pairs, transformers (x[i], x[i + D/2]): reorder the rows of every
    q_proj / k_proj head from pair-major to half-split so the shared attention computes moshi's."""
    order = torch.cat([torch.arange(0, head_dim, 2), torch.arange(1, head_dim, 2)])
    with torch.no_grad():
        for name, p in codec.named_parameters():
            if name.endswith(("self_attn.q_proj.weight", "self_attn.k_proj.weight")):
                heads = p.shape[0] // head_dim
                w = p.view(heads, head_dim, -1)[:, order].reshape(p.shape)
                p.copy_(w)

"""The LM safetensors of a Kyutai TTS release (`moshi_name`) as KyutaiLM's tensor table: attention is stored
stacked per module (`self_attn.in_proj_weight` [sets * 3 * dim, dim], `out_proj.weight` [sets * dim, dim],
as moshi's load hook expects); each weight set's rows are a byte range of that entry, so the split
(`in_projs.N.weight`, `out_projs.N.weight`) copies nothing."""

from __future__ import annotations

from pathlib import Path

from ..checkpoint import TensorEntry, read_header
from ..codecs.mimi.layouts import _rows
from .config import KyutaiConfig

_STACKED = {"in_proj_weight": "in_projs", "out_proj.weight": "out_projs"}


def lm_entries(root: Path, cfg: KyutaiConfig) -> dict[str, TensorEntry]:
    table = read_header(root / cfg.moshi_name)
    out: dict[str, TensorEntry] = {}
    for name, e in table.items():
        for stacked, split in _STACKED.items():
            if name.endswith("." + stacked):
                head = name[: -len(stacked) - 1]
                sets = cfg.weight_sets if head.startswith("depformer.") else 1
                n = e.shape[0] // sets
                for i in range(sets):
                    out[f"{head}.{split}.{i}.weight"] = _rows(e, i * n, n)
                break
        else:
            out[name] = e
    return out

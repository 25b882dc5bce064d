"""The LM layer library every family stands on: the paged-KV batch and the one paged-attention forward,
rotary position variants, sinusoidal positions, the SwiGLU MLPs, the RMSNorms, a configurable attention
module and the pre-norm decoder block (paged for the backbone, dense per frame for a depth decoder).

Family-neutral: nothing here imports a family, so a family imports only this and its own modules.

Names load on first use (PEP 562): a config reader importing `models.layers.config` (no torch) keeps
`vox models` and `vox voices` free of torch, as tests/test_model_registry.py checks.
"""

from __future__ import annotations

import importlib
from typing import Any

# name -> the submodule that defines it
_WHERE = {
    "Attention": "attention",
    "BlockConfig": "config", "Rope": "config", "parse_rope": "config",
    "DecoderLayer": "block", "LlamaDims": "block", "Qwen2Dims": "block", "llama_block": "block",
    "qwen2_block": "block",
    "FusedSwiGLU": "mlp", "SwiGLU": "mlp",
    "RMSNorm": "norms", "RMSNormF32": "norms",
    "PagedBatch": "paged", "PageSlots": "paged", "attend": "paged", "paged_attention": "paged",
    "sin_embedding": "positions",
    "Rotary": "rope", "apply_rope": "rope", "apply_rope_interleaved": "rope", "apply_rope_moshi": "rope",
    "inv_frequencies": "rope", "interleaved_tables": "rope",
    "DecoderStack": "stack", "run_layers_dense": "stack", "run_layers_paged": "stack",
    "DenseCache": "dense_cache",
}
__all__ = sorted(_WHERE)


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{_WHERE[name]}"), name)
    globals()[name] = value
    return value

"""The LM layer library every family stands on: the paged-KV batch and the one paged-attention forward,
rotary position variants, the SwiGLU MLP, RMSNorm, a configurable attention module and the pre-norm
decoder block (paged for the backbone, dense per frame for a depth decoder).

Family-neutral: nothing here imports a family, so a family imports only this and its own modules.
"""

from __future__ import annotations

from .attention import Attention
from .block import BlockConfig, DecoderLayer, LlamaDims, Qwen2Dims, llama_block, qwen2_block
from .mlp import SwiGLU
from .norms import RMSNorm
from .paged import PagedBatch, PageSlots, attend, paged_attention
from .rope import Rotary, apply_rope, apply_rope_interleaved, inv_frequencies
from .rope_config import Rope, parse_rope
from .stack import DecoderStack, run_layers_paged

__all__ = [
    "Attention",
    "BlockConfig",
    "DecoderLayer",
    "DecoderStack",
    "LlamaDims",
    "PageSlots",
    "PagedBatch",
    "Qwen2Dims",
    "RMSNorm",
    "Rope",
    "Rotary",
    "SwiGLU",
    "apply_rope",
    "apply_rope_interleaved",
    "attend",
    "inv_frequencies",
    "llama_block",
    "paged_attention",
    "parse_rope",
    "qwen2_block",
    "run_layers_paged",
]

"""Where a checkpoint keeps Mimi's tensors: a layout maps the codec's own parameter names (transformers'
`MimiModel` names, what `MimiCodec.state_dict()` lists) to the checkpoint's entries.

A layout is a function from a checkpoint's tensor table (`checkpoint.read_header` entries) to the entries
under the codec's names, so `fill_module` reads each tensor straight into its parameter whatever the file
calls it. Two are in use or planned:

* `transformers_layout(prefix)`: transformers' names under a prefix (`codec_model.` in CSM's
  transformers-*.safetensors, `encoder.` for Qwen3-TTS's speech tokenizer, "" in kyutai/mimi's
  model.safetensors as transformers converts it).
* moshi's own names (Kyutai TTS / Moshi checkpoints: `encoder.model.N.conv.conv.*`, fused
  `self_attn.in_proj_weight`, `quantizer.rvq_first.vq.layers.N._codebook.embedding_sum` ...): a second
  function of this shape; a fused q/k/v tensor is row-major, so its thirds are byte ranges of one entry
  (`TensorEntry` slices) and need no copy.
"""

from __future__ import annotations

from collections.abc import Callable

from ..base import CheckpointError
from ..checkpoint import TensorEntry

Layout = Callable[[dict[str, TensorEntry]], dict[str, TensorEntry]]


def transformers_layout(prefix: str) -> Layout:
    def entries(table: dict[str, TensorEntry]) -> dict[str, TensorEntry]:
        out = {k[len(prefix) :]: e for k, e in table.items() if k.startswith(prefix)}
        if not out:
            raise CheckpointError(f"the checkpoint holds no Mimi codec tensors (none named {prefix}*)")
        return out

    return entries

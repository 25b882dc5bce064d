"""model.pt (`{"module": state_dict}`, ESPnet's checkpoint) into the ParallelLM, strictly.

The state dict also carries the IOs' own modules under `multimodal_io_dict.` (a codec model assigned to a
DiscreteAudioIO is a registered submodule); the LM ignores them. With `tie_word_embeddings` ESPnet ties
lm_head to the embedding, and a saved state dict may hold only one of the two.
"""

from __future__ import annotations

from pathlib import Path

import torch

from ..base import CheckpointError
from ..checkpoint import check_state_dict
from .backbone import ParallelLM
from .config import SpeechLMConfig

IO_PREFIX = "multimodal_io_dict."


def read_module(path: Path) -> dict[str, torch.Tensor]:
    if not path.exists():
        raise CheckpointError(f"{path} is missing; the checkpoint is incomplete")
    try:
        ckpt = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    except Exception as e:  # noqa: BLE001 - a corrupt or foreign file: say which
        why = f"{type(e).__name__}: {e}"
        raise CheckpointError(f"{path} is not a readable torch checkpoint ({why})") from None
    if not isinstance(ckpt, dict) or "module" not in ckpt or not isinstance(ckpt["module"], dict):
        raise CheckpointError(f"{path} does not hold {{'module': state_dict}} (ESPnet's checkpoint format)")
    return ckpt["module"]


def load_lm(cfg: SpeechLMConfig, device: torch.device, dtype: torch.dtype) -> ParallelLM:
    lay = cfg.layout
    with torch.device("meta"):
        lm = ParallelLM(cfg.backbone, lay.vocab_size, lay.num_stream)
    path = cfg.root / "model.pt"
    sd = read_module(path)
    if cfg.tie_word_embeddings and "lm_head.weight" not in sd and "model.embed_tokens.weight" in sd:
        sd = dict(sd, **{"lm_head.weight": sd["model.embed_tokens.weight"]})
    check_state_dict(lm, sd, path, ignore_prefixes=(IO_PREFIX,))
    lm = lm.to(dtype).to_empty(device=device)  # never a float32 copy of a bf16 checkpoint (1.7 B: 6.8 GB)
    lm.vocab_weight = lm.vocab_weight.float()  # FP32 in the checkpoint, as ESPnet registers it
    with torch.no_grad():
        for k, p in lm.state_dict().items():
            p.copy_(sd[k].to(device=device, dtype=p.dtype))
    return lm.eval()

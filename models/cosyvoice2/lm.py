"""Qwen2LM's network (CosyVoice 2's LM): CosyVoice 3's paged Qwen2 backbone (upstream's CosyVoice3LM
derives from Qwen2LM) with Qwen2LM's own ends, named as in `llm.pt`: `llm_embedding` (2 rows: sos 0,
task_id 1), `speech_embedding` and a biased `llm_decoder`, both over speech_token_size + 3 ids (6561 is
the EOS; any id >= 6561 stops)."""

from __future__ import annotations

import torch
from torch import nn

from ..cosyvoice3.config import LMConfig
from ..cosyvoice3.lm import CosyVoice3LMWeights

EXTRA_IDS = 3  # eos, task_id slot and fill token after the 6561 speech tokens


class CosyVoice2LMWeights(CosyVoice3LMWeights):
    def __init__(self, cfg: LMConfig) -> None:
        super().__init__(cfg)
        h = cfg.qwen.hidden_size
        rows = cfg.speech_token_size + EXTRA_IDS
        self.llm_embedding = nn.Embedding(2, h)
        self.llm_decoder = nn.Linear(h, rows, bias=True)
        self.speech_embedding = nn.Embedding(rows, h)

    def sos_task(self) -> torch.Tensor:
        """[2, H]: the embeddings around the text (upstream reads llm_embedding rows 0 and 1)."""
        return self.llm_embedding.weight[:2]

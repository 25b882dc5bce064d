"""Qwen2LM's network (CosyVoice 2's LM): the library's paged Qwen2 speech LM (models/flowlm/lm.py) with
Qwen2LM's own ends, named as in `llm.pt`: `llm_embedding` (2 rows: sos 0,
task_id 1), `speech_embedding` and a biased `llm_decoder`, both over speech_token_size + 3 ids (6561 is
the EOS; any id >= 6561 stops)."""

from __future__ import annotations

import torch
from torch import nn

from ..flowlm.config import LMConfig
from ..flowlm.lm import SpeechLMWeights

EXTRA_IDS = 3  # eos, task_id slot and fill token after the 6561 speech tokens


class CosyVoice2LMWeights(SpeechLMWeights):
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

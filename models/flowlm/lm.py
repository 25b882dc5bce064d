"""The speech-token LM of upstream's CosyVoice models: a Qwen2 decoder (upstream wraps transformers'
Qwen2ForCausalLM) over the paged KV pool, plus the speech-token embedding and decoder head. The ends
are CosyVoice3LM's (sos and task_id are rows of the speech table); a family whose LM has other ends
(CosyVoice 2's Qwen2LM) replaces them in a subclass.

Module tree and names follow `llm.pt` (`llm.model.model.layers.N...`, `llm_decoder.weight`,
`speech_embedding.weight`), so its state dict loads without renaming. The Qwen2 stack is the layer library's
(models/layers: biased q/k/v, no q/k norms).
"""

from __future__ import annotations

import torch
from torch import nn

from ..layers import DecoderStack, PagedBatch, Rope, Rotary, qwen2_block
from .config import LMConfig, Qwen2Config


class Qwen2ForCausalLM(nn.Module):
    """Only `model` is used: upstream reads the last hidden state, never `lm_head` (kept for the keys)."""

    def __init__(self, c: Qwen2Config) -> None:
        super().__init__()
        self.model = DecoderStack(qwen2_block(c), c.vocab_size)
        self.lm_head = nn.Linear(c.hidden_size, c.vocab_size, bias=False)


class Qwen2Encoder(nn.Module):
    def __init__(self, c: Qwen2Config) -> None:
        super().__init__()
        self.model = Qwen2ForCausalLM(c)


class SpeechLMWeights(nn.Module):
    """The state dict of `llm.pt`."""

    def __init__(self, cfg: LMConfig) -> None:
        super().__init__()
        self.cfg = cfg
        q = cfg.qwen
        self.llm = Qwen2Encoder(q)
        self.llm_decoder = nn.Linear(q.hidden_size, cfg.vocab, bias=False)
        self.speech_embedding = nn.Embedding(cfg.vocab, q.hidden_size)
        self.rotary = Rotary(q.head_dim, Rope(theta=q.rope_theta))

    @property
    def backbone(self) -> DecoderStack:
        return self.llm.model.model

    def text(self, ids: torch.Tensor) -> torch.Tensor:
        return self.backbone.embed_tokens(ids)

    def speech(self, ids: torch.Tensor) -> torch.Tensor:
        return self.speech_embedding(ids)

    def sos_task(self) -> torch.Tensor:
        """[2, H]: the embeddings before and after the text (CosyVoice3LM: speech rows sos and task_id)."""
        return self.speech_embedding.weight[[self.cfg.sos, self.cfg.task_id]]

    def hidden_states(
        self, x: torch.Tensor, pb: PagedBatch, k_pools: torch.Tensor, v_pools: torch.Tensor
    ) -> torch.Tensor:
        """x [B, T, H] -> final-norm hidden [B, T, H]; K/V written into the rows' pages."""
        return self.backbone.forward_hidden(x, self.rotary, pb, k_pools, v_pools)

    def logp(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.llm_decoder(hidden).float().log_softmax(dim=-1)

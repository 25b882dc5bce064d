"""What every speech-token LM + flow checkpoint in upstream's CosyVoice layout shares: the Qwen2 backbone
(`CosyVoice-BlankEN/config.json`) and the LM section's sampling and length fields. Defaults are upstream's
values, so a file that omits a field means the same here as in the reference."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from ..base import CheckpointError
from .yaml_config import pick_fields

QWEN_DIR = "CosyVoice-BlankEN"
ENDOFPROMPT_ID = 151646  # upstream's CosyVoice3LM asserts this id (the real tokenizer's <|endofprompt|>)


@dataclass(frozen=True)
class Qwen2Config:
    hidden_size: int = 896
    intermediate_size: int = 4864
    num_hidden_layers: int = 24
    num_attention_heads: int = 14
    num_key_value_heads: int = 2
    rms_norm_eps: float = 1e-6
    rope_theta: float = 1e6
    vocab_size: int = 151936
    max_position_embeddings: int = 32768
    tie_word_embeddings: bool = True

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_attention_heads


@dataclass(frozen=True)
class LMConfig:
    qwen: Qwen2Config
    speech_token_size: int = 6561
    top_p: float = 0.8
    top_k: int = 25
    win_size: int = 10
    tau_r: float = 0.1
    # inference(): min/max generated tokens per text token (upstream defaults)
    min_token_text_ratio: float = 2.0
    max_token_text_ratio: float = 20.0

    @property
    def sos(self) -> int:
        return self.speech_token_size

    @property
    def eos(self) -> int:
        return self.speech_token_size + 1

    @property
    def task_id(self) -> int:
        return self.speech_token_size + 2

    @property
    def vocab(self) -> int:  # speech embedding rows / decoder outputs: 6561 + 200
        return self.speech_token_size + 200


def parse_qwen(path: Path) -> Qwen2Config:
    try:
        d = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CheckpointError(
            f"{path} is missing; the checkpoint's {QWEN_DIR}/ folder is incomplete"
        ) from None
    except json.JSONDecodeError as e:
        raise CheckpointError(f"{path} is not valid JSON ({e})") from None
    return Qwen2Config(**pick_fields(d, Qwen2Config))


def parse_lm(root: Path, llm: dict[str, Any]) -> LMConfig:
    """The LM's config: the checkpoint's Qwen2 backbone and the yaml's `llm` section (its sampling too)."""
    sampling = llm.get("sampling") or {}
    qwen = parse_qwen(root / QWEN_DIR / "config.json")
    return LMConfig(qwen=qwen, **pick_fields({**llm, **sampling}, LMConfig))


class CheckpointConfig(Protocol):
    """What the library reads of a family's parsed checkpoint config (CosyVoice2Config, CosyVoice3Config)."""

    @property
    def lm(self) -> LMConfig: ...

    @property
    def sample_rate(self) -> int: ...

    @property
    def token_frame_rate(self) -> int: ...

    @property
    def raw(self) -> dict[str, Any]: ...

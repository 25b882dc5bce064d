"""What every speech-token LM + flow checkpoint in upstream's CosyVoice layout shares: the Qwen2 backbone
(`CosyVoice-BlankEN/config.json`) and the LM section's sampling and length fields. Defaults are upstream's
values, so a file that omits a field means the same here as in the reference."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar

from ..base import CheckpointError
from ..codecs.hift.config import HiFTConfig, parse_hift
from .yaml_config import pick_fields, read_hyperpyyaml, yaml_section

QWEN_DIR = "CosyVoice-BlankEN"
FlowT = TypeVar("FlowT")
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



@dataclass(frozen=True)
class FlowLMConfig(Generic[FlowT]):
    """A parsed checkpoint: the LM, the family's flow, the vocoder and the rates (CosyVoice2Config and
    CosyVoice3Config are this with their own flow config)."""

    lm: LMConfig
    flow: FlowT
    hift: HiFTConfig
    sample_rate: int = 24000
    token_frame_rate: int = 25
    raw: dict[str, Any] = field(default_factory=dict, repr=False)


@dataclass(frozen=True)
class Sections:
    """What every family's parser reads alike from `<root>/<yaml>`: the raw file, the LM's config, the
    flow's section (its own to parse) and the vocoder's config."""

    where: Path
    raw: dict[str, Any]
    lm: LMConfig
    flow: dict[str, Any]
    hift: HiFTConfig

    def cfm(self) -> dict[str, Any]:
        """The flow's CausalConditionalCFM fields both flows read: inference_cfg_rate, t_scheduler."""
        dec = self.flow.get("decoder") or {}
        cfm = ((dec.get("cfm_params") or {}).get("content")) or {}
        return {
            "inference_cfg_rate": float(cfm.get("inference_cfg_rate", 0.7)),
            "t_scheduler": str(cfm.get("t_scheduler", "cosine")),
        }

    def estimator(self) -> dict[str, Any]:
        return (self.flow.get("decoder") or {}).get("estimator") or {}

    def rates(self) -> dict[str, int]:
        return {
            "sample_rate": int(self.raw.get("sample_rate", 24000)),
            "token_frame_rate": int(self.raw.get("token_frame_rate", 25)),
        }


def read_sections(root: Path, yaml_name: str, family: str, classes: tuple[str, str, str]) -> Sections:
    """`<root>/<yaml_name>` checked to hold the `llm`, `flow` and `hift` sections of `classes` (class
    name suffixes), with the LM's and vocoder's configs parsed."""
    where = root / yaml_name
    raw = read_hyperpyyaml(where)
    llm_cls, flow_cls, hift_cls = classes
    llm = yaml_section(raw, "llm", where, llm_cls, family)
    flow = yaml_section(raw, "flow", where, flow_cls, family)
    hift = yaml_section(raw, "hift", where, hift_cls, family)
    return Sections(where, raw, parse_lm(root, llm), flow, parse_hift(hift))

"""Typed view of a CosyVoice 3 checkpoint: `cosyvoice3.yaml` (LM head, flow, DiT, HiFT) and
`CosyVoice-BlankEN/config.json` (the Qwen2 backbone). Defaults are upstream's CosyVoice 3 values, so a
file that omits a field means the same here as in the reference."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..base import CheckpointError
from .yaml_config import read_hyperpyyaml

YAML = "cosyvoice3.yaml"
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


@dataclass(frozen=True)
class DiTConfig:
    dim: int = 1024
    depth: int = 22
    heads: int = 16
    dim_head: int = 64
    ff_mult: int = 2
    mel_dim: int = 80
    mu_dim: int = 80
    spk_dim: int = 80
    static_chunk_size: int = 50  # mel frames per block of the block-causal (streaming) attention


@dataclass(frozen=True)
class FlowConfig:
    dit: DiTConfig
    input_size: int = 80
    output_size: int = 80
    spk_embed_dim: int = 192
    vocab_size: int = 6561
    token_mel_ratio: int = 2
    pre_lookahead_len: int = 3
    lookahead_channels: int = 1024
    inference_cfg_rate: float = 0.7
    t_scheduler: str = "cosine"
    n_timesteps: int = 10  # hard-coded in upstream's CausalMaskedDiffWithDiT.inference


@dataclass(frozen=True)
class HiFTConfig:
    in_channels: int = 80
    base_channels: int = 512
    nb_harmonics: int = 8
    sampling_rate: int = 24000
    nsf_alpha: float = 0.1
    nsf_sigma: float = 0.003
    nsf_voiced_threshold: float = 10
    upsample_rates: tuple[int, ...] = (8, 5, 3)
    upsample_kernel_sizes: tuple[int, ...] = (16, 11, 7)
    n_fft: int = 16
    hop_len: int = 4
    resblock_kernel_sizes: tuple[int, ...] = (3, 7, 11)
    resblock_dilation_sizes: tuple[tuple[int, ...], ...] = ((1, 3, 5), (1, 3, 5), (1, 3, 5))
    source_resblock_kernel_sizes: tuple[int, ...] = (7, 7, 11)
    source_resblock_dilation_sizes: tuple[tuple[int, ...], ...] = ((1, 3, 5), (1, 3, 5), (1, 3, 5))
    lrelu_slope: float = 0.1
    audio_limit: float = 0.99
    conv_pre_look_right: int = 4
    f0_in_channels: int = 80
    f0_cond_channels: int = 512
    f0_num_class: int = 1

    @property
    def upsample(self) -> int:  # samples per mel frame: prod(upsample_rates) * hop_len (480 real)
        n = self.hop_len
        for r in self.upsample_rates:
            n *= r
        return n


@dataclass(frozen=True)
class CosyVoice3Config:
    lm: LMConfig
    flow: FlowConfig
    hift: HiFTConfig
    sample_rate: int = 24000
    token_frame_rate: int = 25
    raw: dict[str, Any] = field(default_factory=dict, repr=False)


def _section(raw: dict[str, Any], key: str, where: Path, cls_suffix: str) -> dict[str, Any]:
    sec = raw.get(key)
    if not isinstance(sec, dict):
        raise CheckpointError(f"{where}: no `{key}` section; this is not a CosyVoice 3 configuration")
    got = str(sec.get("__class__", ""))
    if not got.endswith(cls_suffix):
        raise CheckpointError(
            f"{where}: `{key}` is {got or 'untyped'}, voxcli serves CosyVoice 3 ({cls_suffix})"
        )
    return sec


def _pick(d: dict[str, Any], cls: type, names: dict[str, str] | None = None) -> dict[str, Any]:
    """The fields of dataclass `cls` present in `d` (`names` maps field -> yaml key where they differ)."""
    names = names or {}
    out: dict[str, Any] = {}
    for f in cls.__dataclass_fields__:
        key = names.get(f, f)
        if key in d:
            v = d[key]
            out[f] = tuple(tuple(x) if isinstance(x, list) else x for x in v) if isinstance(v, list) else v
    return out


def parse_qwen(path: Path) -> Qwen2Config:
    try:
        d = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CheckpointError(
            f"{path} is missing; the checkpoint's {QWEN_DIR}/ folder is incomplete"
        ) from None
    except json.JSONDecodeError as e:
        raise CheckpointError(f"{path} is not valid JSON ({e})") from None
    return Qwen2Config(**_pick(d, Qwen2Config))


def parse_hift(hift: dict[str, Any]) -> HiFTConfig:
    """The `hift` section (CosyVoice 2's HiFTGenerator has the same fields)."""
    f0 = hift.get("f0_predictor") or {}
    istft = hift.get("istft_params") or {}
    return HiFTConfig(
        **_pick(hift, HiFTConfig),
        n_fft=int(istft.get("n_fft", 16)),
        hop_len=int(istft.get("hop_len", 4)),
        f0_in_channels=int(f0.get("in_channels", 80)),
        f0_cond_channels=int(f0.get("cond_channels", 512)),
        f0_num_class=int(f0.get("num_class", 1)),
    )


def parse_config(root: Path) -> CosyVoice3Config:
    where = root / YAML
    raw = read_hyperpyyaml(where)
    llm = _section(raw, "llm", where, "CosyVoice3LM")
    flow = _section(raw, "flow", where, "CausalMaskedDiffWithDiT")
    hift = _section(raw, "hift", where, "CausalHiFTGenerator")
    sampling = llm.get("sampling") or {}
    lm = LMConfig(qwen=parse_qwen(root / QWEN_DIR / "config.json"), **_pick({**llm, **sampling}, LMConfig))
    dec = flow.get("decoder") or {}
    est = dec.get("estimator") or {}
    cfm = ((dec.get("cfm_params") or {}).get("content")) or {}
    look = flow.get("pre_lookahead_layer") or {}
    fl = FlowConfig(
        dit=DiTConfig(**_pick(est, DiTConfig)),
        **_pick(flow, FlowConfig),
        lookahead_channels=int(look.get("channels", 1024)),
        inference_cfg_rate=float(cfm.get("inference_cfg_rate", 0.7)),
        t_scheduler=str(cfm.get("t_scheduler", "cosine")),
    )
    hf = parse_hift(hift)
    if fl.dit.static_chunk_size % fl.token_mel_ratio:
        raise CheckpointError(
            f"{where}: static_chunk_size {fl.dit.static_chunk_size} is not a whole number "
            f"of tokens (token_mel_ratio {fl.token_mel_ratio})"
        )
    return CosyVoice3Config(
        lm=lm,
        flow=fl,
        hift=hf,
        sample_rate=int(raw.get("sample_rate", 24000)),
        token_frame_rate=int(raw.get("token_frame_rate", 25)),
        raw=raw,
    )

"""The three checkpoint layouts Higgs Audio ships in, mapped onto one set of module names (the transformers v2
names of layers.py).

* `higgs_audio_v2` (eustlb/higgs-audio-v2-generation-3B-base): transformers' own names; loaded as is.

* `higgs_audio` (bosonai/higgs-audio-v2-generation-3B-base, the original release): a `text_config` (Llama)
plus `audio_*` fields; tensors `embed_tokens.*` (or the partially-frozen pair `embed_tokens.embedding_frozen`
+ `embedding_trainable`, concatenated), `layers.*`, `norm.*`, `audio_codebook_embeddings.weight` (8 x 1026
rows), `audio_decoder_proj.audio_lm_head.weight` (or `linear_frozen` + `linear_trainable`). The text head, the
Whisper audio tower and the training buffers are not used. Only the DualFFN adapter on every layer is the
architecture transformers' port describes (which is what the release uses); anything else is refused.

* `higgs_multimodal_qwen3` (bosonai/higgs-audio-v3-tts-4b): a Qwen3 backbone `body.layers.*`, `body.norm`,
`tied.embedding.text_embedding.weight`, the fused 8-codebook embedding
`tied.embedding.modality_embeddings.0.embedding.weight` [8 * 1026, H] whose transpose is also the audio head
(tied; an untied checkpoint carries `tied.head.modality_heads.0.weight`), and the audio tokenizer bundled
under `tied.embedding.modality_embeddings.0.model.` (the v2 tokenizer's names). No DualFFN. Layout facts from
SGLang-Omni's weight mapper (sglang_omni/models/higgs_tts) and Boson's notes on the checkpoint. One
third-party port's notes give the bundled decoder a final tanh; transformers' v2 tokenizer (which v3 bundles,
per SGLang-Omni) has none, and neither has this decoder: unverified against a real v3 checkpoint.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, TypeVar

import torch

from ..base import CheckpointError
from .config import HiggsConfig, check, parse_rope

T = TypeVar("T")  # a tensor, or its safetensors entry (models/checkpoint.TensorEntry)

V3_CODEC_PREFIX = "tied.embedding.modality_embeddings.0.model."
V3_EMBED = "tied.embedding.modality_embeddings.0.embedding.weight"
V3_HEAD = "tied.head.modality_heads.0.weight"


def _get(d: dict[str, Any], key: str, where: str, default: Any = None) -> Any:
    v = d.get(key, default)
    if v is None:
        raise CheckpointError(f"{where}: field {key!r} is missing")
    return v


def parse_boson(d: dict[str, Any], where: str, audio_delay_token_id: int) -> HiggsConfig:
    """config.json of the original release (`model_type` "higgs_audio"); it names no audio-delay token, so
    the caller passes the tokenizer's id for it."""
    t = d.get("text_config")
    if not isinstance(t, dict):
        raise CheckpointError(f"{where}: field 'text_config' (the Llama backbone's settings) is missing")
    layers = int(_get(t, "num_hidden_layers", where))
    adapter = d.get("audio_adapter_type", "stack")
    dual = d.get("audio_dual_ffn_layers") or []
    if adapter not in ("dual_ffn", "dual_ffn_fast_forward") or sorted(dual) != list(range(layers)):
        raise CheckpointError(
            f"{where}: audio_adapter_type {adapter!r} with audio_dual_ffn_layers {dual} is not supported; "
            f"voxcli runs the DualFFN adapter on every layer (audio_dual_ffn_layers = 0..{layers - 1})"
        )
    for flag in ("use_audio_out_self_attention", "use_audio_out_embed_projector", "use_rq_transformer"):
        if d.get(flag):
            raise CheckpointError(
                f"{where}: {flag} = true is not supported (the released checkpoint has false)"
            )
    if d.get("use_delay_pattern") is False:
        raise CheckpointError(
            f"{where}: use_delay_pattern = false is not supported (Higgs generates with it)"
        )
    if int(d.get("audio_decoder_proj_num_layers", 0)):
        raise CheckpointError(f"{where}: audio_decoder_proj_num_layers > 0 is not supported (released: 0)")
    hidden = int(_get(t, "hidden_size", where))
    heads = int(_get(t, "num_attention_heads", where))
    size = int(d.get("audio_codebook_size", 1024))
    cfg = HiggsConfig(
        vocab_size=int(_get(t, "vocab_size", where)),
        hidden_size=hidden,
        intermediate_size=int(_get(t, "intermediate_size", where)),
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=int(t.get("num_key_value_heads", heads)),
        head_dim=int(t.get("head_dim") or hidden // heads),
        max_position_embeddings=int(t.get("max_position_embeddings", 2048)),
        rms_norm_eps=float(t.get("rms_norm_eps", 1e-5)),
        num_codebooks=int(d.get("audio_num_codebooks", 8)),
        codebook_size=size + 2,
        audio_token_id=int(d.get("audio_out_token_idx", 128016)),
        audio_bos_token_id=int(d.get("audio_out_bos_token_id", 128013)),
        audio_delay_token_id=audio_delay_token_id,
        audio_stream_bos_id=int(d.get("audio_stream_bos_id", 1024)),
        audio_stream_eos_id=int(d.get("audio_stream_eos_id", 1025)),
        eos_token_id=int(
            t.get("eos_token_id", 128009)
            if not isinstance(t.get("eos_token_id"), list)
            else t["eos_token_id"][0]
        ),
        rope=parse_rope(t, where, {}),
        variant="boson",
    )
    check(cfg, where)
    return cfg


def boson_state(sd: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The original release's tensors under the transformers v2 names (unused parts dropped)."""
    out: dict[str, torch.Tensor] = {}
    if "embed_tokens.embedding_frozen.weight" in sd:
        out["model.embed_tokens.weight"] = torch.cat(
            [sd["embed_tokens.embedding_frozen.weight"], sd["embed_tokens.embedding_trainable.weight"]]
        )
    head = "audio_decoder_proj.audio_lm_head."
    if head + "linear_frozen.weight" in sd:
        out["audio_lm_head.weight"] = torch.cat(
            [sd[head + "linear_frozen.weight"], sd[head + "linear_trainable.weight"]]
        )
    skip = (
        "audio_decoder_proj.text_lm_head",
        "audio_tower.",
        "audio_encoder_proj.",
        "audio_codebook_weights",
        "embed_tokens.embedding_",
        head + "linear_",
    )
    for k, v in sd.items():
        if k.startswith(skip) or k.endswith("rotary_emb.inv_freq"):
            continue
        if k == "audio_codebook_embeddings.weight":
            out["model.embed_audio_tokens.embed_audio_tokens.weight"] = v
        elif k == head + "weight":
            out["audio_lm_head.weight"] = v
        elif k.startswith(("embed_tokens.", "layers.", "norm.")):
            out["model." + k] = v
        else:
            out[k] = v  # left for the strict check to name
    return out


def parse_v3(d: dict[str, Any], sd_shapes: dict[str, tuple[int, ...]], where: str) -> HiggsConfig:
    """config.json of v3 (`model_type` "higgs_multimodal_qwen3"): the Qwen3 `text_config`; the codebook count
    and per-codebook vocabulary come from `audio_encoder_config` when it states them, else from the fused
    embedding's shape [num_codebooks * codebook_size, H] with the released 8 codebooks."""
    t = d.get("text_config")
    if not isinstance(t, dict):
        raise CheckpointError(f"{where}: field 'text_config' (the Qwen3 backbone's settings) is missing")
    a = d.get("audio_encoder_config") or {}
    if V3_EMBED not in sd_shapes:
        raise CheckpointError(
            f"{where}: the checkpoint has no tensor {V3_EMBED!r} (the fused audio embedding)"
        )
    rows = sd_shapes[V3_EMBED][0]
    n = int(a.get("num_codebooks", a.get("audio_num_codebooks", 8)))
    size = int(a.get("codebook_size", a.get("vocab_size", rows // n)))
    if n * size != rows:
        raise CheckpointError(
            f"{where}: tensor {V3_EMBED!r} has {rows} rows, not num_codebooks {n} x codebook_size {size}"
        )
    hidden = int(_get(t, "hidden_size", where))
    heads = int(_get(t, "num_attention_heads", where))
    tied = bool(a.get("tie_word_embeddings", V3_HEAD not in sd_shapes))
    cfg = HiggsConfig(
        vocab_size=int(_get(t, "vocab_size", where)),
        hidden_size=hidden,
        intermediate_size=int(_get(t, "intermediate_size", where)),
        num_hidden_layers=int(_get(t, "num_hidden_layers", where)),
        num_attention_heads=heads,
        num_key_value_heads=int(t.get("num_key_value_heads", heads)),
        head_dim=int(t.get("head_dim") or hidden // heads),
        max_position_embeddings=int(t.get("max_position_embeddings", 40960)),
        rms_norm_eps=float(t.get("rms_norm_eps", 1e-6)),
        num_codebooks=n,
        codebook_size=size,
        # v3's prompt has no text placeholder stream; the delay tracker gets these as its own markers.
        audio_token_id=-1,
        audio_bos_token_id=-2,
        audio_delay_token_id=-3,
        audio_stream_bos_id=size - 2,
        audio_stream_eos_id=size - 1,
        eos_token_id=-4,
        rope=parse_rope(t, where, {"rope_theta": 1000000.0}),
        dual_ffn=False,
        qk_norm=True,
        tie_word_embeddings=tied,
        variant="v3",
    )
    if cfg.num_attention_heads % cfg.num_key_value_heads:
        raise CheckpointError(
            f"{where}: num_attention_heads {heads} must be a multiple of num_key_value_heads "
            f"{cfg.num_key_value_heads}"
        )
    return cfg


def v3_state(sd: dict[str, T], cfg: HiggsConfig) -> dict[str, T]:
    """v3's backbone tensors (or their file entries) under the module names of layers.py (the codec's are
    read separately)."""
    out: dict[str, T] = {}
    for k, v in sd.items():
        if k.startswith(V3_CODEC_PREFIX) or k.startswith("tied.head.text_head."):
            continue
        if k == "tied.embedding.text_embedding.weight":
            out["model.embed_tokens.weight"] = v
        elif k == V3_EMBED:
            out["model.embed_audio_tokens.embed_audio_tokens.weight"] = v
        elif k == V3_HEAD:
            out["audio_lm_head.weight"] = v
        elif k.startswith("body."):
            out["model." + k[len("body.") :]] = v
        else:
            out[k] = v
    return out


def with_delay_ids(cfg: HiggsConfig, audio_bos: int) -> HiggsConfig:
    """v3: the prompt's closing `<|audio|>` plays the part of v2's `<|audio_out_bos|>` for the delay setup."""
    return replace(cfg, audio_bos_token_id=audio_bos)

"""Kyutai TTS config.json (kyutai/tts-1.6b-en_fr, `model_type` "tts") as moshi's `CheckpointInfo` reads it:
the LM keys (`dim`, `num_layers`, `depformer_*`, `delays`, `conditioners`, `fuser`...), `tts_config`
(`audio_delay` seconds, `second_stream_ahead`), `model_id` (a voice file's `<sig>@<epoch>` suffix), the file
names (`moshi_name`, `mimi_name`, `tokenizer_name`, optional `mimi_config_name`). Only the released design
is accepted (one text stream, rms_norm_f32, silu gating, rope, depformer without positions, demuxed second
text stream, speaker cross-attention, control + cfg summed);
anything else is a CheckpointError naming the key.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..codecs.mimi.config import MimiConfig
from ..errors import CheckpointError

# moshi's fixed Mimi (loaders._mimi_config): what a checkpoint without `mimi_config_name` decodes with
MOSHI_MIMI = {
    "sample_rate": 24000,
    "frame_rate": 12.5,
    "seanet": {"dimension": 512, "n_filters": 64, "n_residual_layers": 1, "compress": 2, "dilation_base": 2,
               "kernel_size": 7, "residual_kernel_size": 3, "last_kernel_size": 3, "ratios": [8, 6, 5, 4],
               "pad_mode": "constant", "channels": 1},
    "quantizer": {"dimension": 256, "n_q": 32, "bins": 2048},
    "transformer": {"d_model": 512, "num_heads": 8, "num_layers": 8, "layer_scale": 0.01, "context": 250,
                    "max_period": 10000, "dim_feedforward": 2048},
}


def mimi_config(d: dict[str, Any] | None, where: str) -> MimiConfig:
    """moshi's Mimi config dict (seanet / quantizer / transformer) -> the shared codec's MimiConfig."""
    d = d or MOSHI_MIMI
    try:
        s, q, t = d["seanet"], d["quantizer"], d["transformer"]
        hidden = int(s["dimension"])
        return MimiConfig(
            sampling_rate=int(d["sample_rate"]),
            frame_rate=float(d["frame_rate"]),
            audio_channels=int(s.get("channels", 1)),
            hidden_size=hidden,
            num_filters=int(s["n_filters"]),
            num_residual_layers=int(s["n_residual_layers"]),
            upsampling_ratios=tuple(int(r) for r in s["ratios"]),
            kernel_size=int(s["kernel_size"]),
            last_kernel_size=int(s["last_kernel_size"]),
            residual_kernel_size=int(s["residual_kernel_size"]),
            dilation_growth_rate=int(s["dilation_base"]),
            compress=int(s["compress"]),
            codebook_size=int(q["bins"]),
            codebook_dim=int(q["dimension"]),
            num_quantizers=int(q["n_q"]),
            vq_hidden_dim=int(q["dimension"]),
            num_layers=int(t["num_layers"]),
            intermediate_size=int(t["dim_feedforward"]),
            num_heads=int(t["num_heads"]),
            num_kv_heads=int(t["num_heads"]),
            head_dim=int(t["d_model"]) // int(t["num_heads"]),
            rope_theta=float(t["max_period"]),
            layer_scale_initial_scale=float(t["layer_scale"]),
            pad_mode=str(s.get("pad_mode", "constant")),
            sliding_window=int(t["context"]),
            upsample_groups=hidden,
        )
    except (KeyError, TypeError, ValueError) as e:
        raise CheckpointError(f"{where}: not a moshi Mimi config ({e!r})") from None


@dataclass(frozen=True)
class KyutaiConfig:
    dim: int
    num_heads: int
    num_layers: int
    ffn_hidden: int  # moshi's ActivationGating width for hidden_scale * dim
    context: int
    max_period: float
    text_card: int
    card: int
    n_q: int
    delays: tuple[int, ...]
    dep_dim: int
    dep_heads: int
    dep_layers: int
    dep_ffn_hidden: int
    dep_low_rank: int | None
    schedule: tuple[int, ...]  # codebook -> depformer weight set
    padding_id: int
    audio_delay_steps: int
    second_stream_ahead: int
    sig: str
    epoch: int
    speaker_dim: int
    cfg_values: tuple[str, ...]
    cross_pos_scale: float
    temp: float
    moshi_name: str
    mimi_name: str
    tokenizer_name: str
    mimi: MimiConfig

    @property
    def voice_suffix(self) -> str:
        return f".{self.sig}@{self.epoch}.safetensors"

    @property
    def weight_sets(self) -> int:
        return max(self.schedule) + 1


def gating_hidden(dim: int, dim_feedforward: int) -> int:
    """moshi's ActivationGating inner width."""
    return (21 * dim) // 8 if dim_feedforward == 4 * dim else (2 * dim_feedforward) // 3


def _need(d: dict[str, Any], key: str, value: Any, where: str) -> None:
    if d.get(key, value) != value:
        raise CheckpointError(
            f"{where}: {key} must be {value!r} (the released Kyutai TTS design), got {d[key]!r}"
        )


def parse_config(d: dict[str, Any], root: Path) -> KyutaiConfig:
    where = str(root / "config.json")
    if d.get("model_type") != "tts":
        raise CheckpointError(f"{where}: model_type must be 'tts' (a Kyutai TTS checkpoint)")
    for key, value in (("norm", "rms_norm_f32"), ("gating", "silu"), ("positional_embedding", "rope"),
                       ("depformer_pos_emb", "none"), ("depformer_multi_linear", True),
                       ("depformer_weights_per_step", True), ("demux_second_stream", True),
                       ("cross_attention", True), ("layer_scale", None), ("causal", True)):
        _need(d, key, value, where)
    try:
        dim, n_q = int(d["dim"]), int(d["n_q"])
        if int(d["dep_q"]) != n_q:
            raise CheckpointError(f"{where}: dep_q must equal n_q (every codebook from the depformer)")
        delays = tuple(int(x) for x in d["delays"])
        if len(delays) != n_q + 1 or delays[0] != 0:
            raise CheckpointError(f"{where}: delays must list n_q + 1 delays, the text's first and 0")
        dep_dim = int(d["depformer_dim"])
        dep_ff = d.get("depformer_dim_feedforward") or int(float(d["hidden_scale"]) * dep_dim)
        schedule = tuple(int(x) for x in (d.get("depformer_weights_per_step_schedule") or range(n_q)))
        if len(schedule) != n_q:
            raise CheckpointError(f"{where}: depformer_weights_per_step_schedule must have n_q entries")
        conds, fuser = d["conditioners"], d["fuser"]
        if sorted(fuser.get("sum", [])) != ["cfg", "control"] or fuser.get("cross") != ["speaker_wavs"]:
            raise CheckpointError(f"{where}: fuser must sum control + cfg and cross-attend speaker_wavs")
        tts = d.get("tts_config") or {}
        mimi_raw = None
        if d.get("mimi_config_name"):
            import json

            mimi_raw = json.loads((root / d["mimi_config_name"]).read_text())
        mimi = mimi_config(mimi_raw, str(root / (d.get("mimi_config_name") or "config.json")))
        model_id = d.get("model_id") or {}
        return KyutaiConfig(
            dim=dim,
            num_heads=int(d["num_heads"]),
            num_layers=int(d["num_layers"]),
            ffn_hidden=gating_hidden(dim, int(float(d["hidden_scale"]) * dim)),
            context=int(d["context"]),
            max_period=float(d.get("max_period", 10000)),
            text_card=int(d["text_card"]),
            card=int(d["card"]),
            n_q=n_q,
            delays=delays,
            dep_dim=dep_dim,
            dep_heads=int(d["depformer_num_heads"]),
            dep_layers=int(d["depformer_num_layers"]),
            dep_ffn_hidden=gating_hidden(dep_dim, int(dep_ff)),
            dep_low_rank=d.get("depformer_low_rank_embeddings"),
            schedule=schedule,
            padding_id=int(d.get("existing_text_padding_id", 3)),
            audio_delay_steps=int(float(tts["audio_delay"]) * mimi.frame_rate),
            second_stream_ahead=int(tts.get("second_stream_ahead", 0)),
            sig=str(model_id.get("sig", "")),
            epoch=int(model_id.get("epoch", 0)),
            speaker_dim=int(conds["speaker_wavs"]["tensor"]["dim"]),
            cfg_values=tuple(conds["cfg"]["lut"]["possible_values"]),
            cross_pos_scale=float(fuser.get("cross_attention_pos_emb_scale", 1.0))
            if fuser.get("cross_attention_pos_emb") else 0.0,
            temp=float((d.get("lm_gen_config") or {}).get("temp", 0.6)),
            moshi_name=str(d.get("moshi_name", "model.safetensors")),
            mimi_name=str(d["mimi_name"]),
            tokenizer_name=str(d["tokenizer_name"]),
            mimi=mimi,
        )
    except (KeyError, TypeError, ValueError) as e:
        raise CheckpointError(f"{where}: missing or malformed key ({e!r})") from None

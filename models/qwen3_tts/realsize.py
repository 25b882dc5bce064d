"""Real-size Qwen3-TTS random checkpoints (0.6B / 1.7B dimensions) for GPU benchmarks without a
download: the dimensions the tiny builder (`tiny.build_tiny(size="1.7b")`) uses for these
names and the talker state drawn parameter by parameter in bfloat16 (no full float32 copy is ever held).
"""

from __future__ import annotations

from typing import Any

import torch

from .config import parse_config
from .random_init import HEAD_GAIN, owners, random_value
from .sizes import real_config
from .talker import Qwen3TTSWeights

LABELS = {"0.6b": "0.6B", "1.7b": "1.7B"}


# The real architectures, read off `real_config` (the one place their dimensions are written):
# the predictor is 1024 wide in both, so the 1.7B talker (2048) gets the 2048->1024 projection by
# itself; `proj` is a tiny-only switch.
def _dims(label: str) -> dict[str, Any]:
    cfg = real_config(label)
    t = cfg["talker_config"]
    p = t["code_predictor_config"]
    return dict(
        codebook=p["vocab_size"],
        hidden=t["hidden_size"],
        inter=t["intermediate_size"],
        layers=t["num_hidden_layers"],
        heads=t["num_attention_heads"],
        kv=t["num_key_value_heads"],
        head_dim=t["head_dim"],
        text_hidden=t["text_hidden_size"],
        text_vocab=t["text_vocab_size"],
        p_hidden=p["hidden_size"],
        p_inter=p["intermediate_size"],
        p_layers=p["num_hidden_layers"],
        p_heads=p["num_attention_heads"],
        p_kv=p["num_key_value_heads"],
        p_head_dim=p["head_dim"],
        mrope=list(t["rope_scaling"]["mrope_section"]),
        enc_dim=t["hidden_size"],
        real=True,
        model_size=cfg["tts_model_size"],
    )


def real_size_dims(size: str) -> dict[str, Any]:
    """The builder's dimension table for "0.6b" / "1.7b"."""
    return _dims(LABELS[size])


@torch.no_grad()
def talker_state_streamed(
    cfg_dict: dict[str, Any], seed: int, dtype: torch.dtype
) -> dict[str, torch.Tensor]:
    """The real-size talker state in `dtype`, drawn parameter by parameter with the same rules as
    `tiny.py`'s talker state (the module lives on the meta device: one float32 tensor exists at a time)."""
    cfg = parse_config(cfg_dict)
    with torch.device("meta"):
        w = Qwen3TTSWeights(cfg.talker)
    params = dict(w.named_parameters())
    if set(params) != set(w.state_dict()):
        raise RuntimeError("the talker has buffers or tied weights in its state dict; the streamed "
                           "builder only knows parameters; extend talker_state_streamed")
    found = owners(w)
    gen = torch.Generator().manual_seed(seed)
    heads = {"talker.codec_head.weight"} | {
        f"talker.code_predictor.lm_head.{i}.weight" for i in range(len(w.talker.code_predictor.lm_head))
    }
    sd: dict[str, torch.Tensor] = {}
    for name, p in params.items():
        m, pname = found[name]
        v = random_value(m, pname, p.shape, gen)
        if name in heads:
            v.mul_(HEAD_GAIN)
        if name == "talker.codec_head.weight":
            v[cfg.talker.codec_eos_id] *= -1e-3  # EOS never wins (no calibration at real size)
        sd[name] = v.to(dtype).contiguous()
        del v
    return sd

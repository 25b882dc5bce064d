"""Random-weight Zonos checkpoints in the released layout (config.json + model.safetensors, with the DAC at
`codec/` so nothing is downloaded), at the test size or the published one (`--size real`:
Zyphra/Zonos-v0.1-transformer's dimensions). Our own builder: the parity tests build theirs with upstream's
classes (tests/oracle/run_zonos.py) and load it here; this one serves the demo, benchmarks and real-size runs.
Its audio is not speech. `speakers/` gets two random saved embeddings (the checkpoint's named voices), and
`speaker_embedding/` a random speaker model in the released files' layout (for --ref-audio): two blocks a
stage at width 4 (tiny: the embedding stays well inside the engine's 10 s preparation limit on a loaded
machine) or ResNet293's depths at the released width 64 (real)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors.torch import save_file

SEED = 0
DAC_REAL = {"encoder_hidden_size": 64, "decoder_hidden_size": 1536}

# The conditioners of the released transformer checkpoint, in its order (the reference's
# CONDITIONING_README).
CONDITIONERS = [
    {"type": "EspeakPhonemeConditioner", "name": "espeak"},
    {
        "type": "PassthroughConditioner",
        "name": "speaker",
        "cond_dim": 128,
        "projection": "linear",
        "uncond_type": "learned",
    },
    {"type": "FourierConditioner", "name": "emotion", "input_dim": 8, "uncond_type": "learned"},
    {"type": "FourierConditioner", "name": "fmax", "min_val": 0, "max_val": 24000, "uncond_type": "learned"},
    {
        "type": "FourierConditioner",
        "name": "pitch_std",
        "min_val": 0,
        "max_val": 400,
        "uncond_type": "learned",
    },
    {
        "type": "FourierConditioner",
        "name": "speaking_rate",
        "min_val": 0,
        "max_val": 40,
        "uncond_type": "learned",
    },
    {
        "type": "IntegerConditioner",
        "name": "language_id",
        "min_val": -1,
        "max_val": 126,
        "uncond_type": "learned",
    },
]


def config(d_model: int, n_layer: int, heads: int, kv_heads: int, mlp: int) -> dict[str, Any]:
    return {
        "backbone": {
            "d_model": d_model,
            "d_intermediate": 0,
            "attn_mlp_d_intermediate": mlp,
            "n_layer": n_layer,
            "ssm_cfg": {},
            "attn_layer_idx": [],
            "attn_cfg": {
                "causal": True,
                "num_heads": heads,
                "num_heads_kv": kv_heads,
                "rotary_emb_dim": d_model // heads,
                "qkv_proj_bias": False,
                "out_proj_bias": False,
            },
            "rms_norm": False,
            "residual_in_fp32": False,
            "norm_epsilon": 1e-5,
        },
        "prefix_conditioner": {"conditioners": copy.deepcopy(CONDITIONERS), "projection": "none"},
        "eos_token_id": 1024,
        "masked_token_id": 1025,
        "pad_vocab_to_multiple_of": 8,
    }


# "real": the published transformer (d_model 2048, 26 layers, 16 query / 4 KV heads, MLP 8192; ~1.6B
# parameters: the hybrid's config.json gives the widths, its model card the size).
SIZES: dict[str, dict[str, Any]] = {
    "tiny": config(64, 2, 4, 2, 128),
    "real": config(2048, 26, 16, 4, 8192),
}


SPEAKER_WIDTH = {"tiny": 4, "real": 64}
SPEAKER_DEPTHS = {"tiny": (2, 2, 2, 2), "real": (10, 20, 64, 3)}  # real: ResNet293


def build_speaker_model(
    out: Path, width: int, depths: tuple[int, ...] = SPEAKER_DEPTHS["real"], seed: int = SEED
) -> Path:
    """The two files of Zyphra/Zonos-v0.1-speaker-embedding (embedder state dict, LDA) with random weights;
    batch-norm statistics drawn too, so that eval-mode normalisation matters."""
    from .speaker_model import EMBEDDER_FILE, LDA_FILE, SpeakerEmbedder

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(seed + 1)
    model = SpeakerEmbedder(width, depths, embed_dim=256, lda_dim=128)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, torch.nn.modules.batchnorm._BatchNorm):
                m.running_mean.normal_(0, 0.1)
                m.running_var.uniform_(0.5, 1.5)
                m.weight.uniform_(0.8, 1.2)
                m.bias.normal_(0, 0.1)
    state = model.state_dict()
    torch.save({k: v for k, v in state.items() if not k.startswith("lda.")}, out / EMBEDDER_FILE)
    torch.save({k[4:]: v for k, v in state.items() if k.startswith("lda.")}, out / LDA_FILE)
    return out


def build_tiny(out: Path, size: str = "tiny", seed: int = SEED, codec: bool = True) -> Path:
    from ..codecs.dac.tiny import build_tiny_dac
    from .config import parse_config
    from .layers import ZonosWeights

    if size not in SIZES:
        raise ValueError(f"unknown Zonos size {size!r}; one of {', '.join(SIZES)}")
    cfg_dict = SIZES[size]
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(seed)
    weights = ZonosWeights(parse_config(cfg_dict, "tiny"))
    with torch.no_grad():
        for name, p in weights.named_parameters():
            if name.endswith("uncond_vector"):
                p.normal_()
        for name, b in weights.named_buffers():
            if name.endswith(".weight"):  # Fourier features: the reference draws them N(0, 1) at init
                b.normal_()
    # the published size is stored in bfloat16 (3.2 GB, as the released file); the loader casts to its dtype
    store = torch.bfloat16 if size == "real" else torch.float32
    state = {k: v.detach().to(store).contiguous() for k, v in weights.state_dict().items()}
    del weights
    save_file(state, str(out / "model.safetensors"))
    (out / "config.json").write_text(json.dumps(cfg_dict, indent=2) + "\n")
    if codec:
        # real: descript/dac_44khz's own widths (DacCodecConfig's defaults), so the codec costs what it costs
        build_tiny_dac(out / "codec", seed=seed, **(DAC_REAL if size == "real" else {}))
    build_speaker_model(out / "speaker_embedding", SPEAKER_WIDTH[size], SPEAKER_DEPTHS[size], seed)
    rng = np.random.RandomState(seed)
    (out / "speakers").mkdir(exist_ok=True)
    for voice in ("aurora", "basalt"):
        np.save(out / "speakers" / f"{voice}.npy", rng.randn(128).astype(np.float32))
    return out

"""Random VibeVoice checkpoints in the released transformers layout (layout.py), drawn with plain torch: no
transformers, so the project's own interpreter builds the demo, the benchmark's weights and the real size.

Tensors are drawn one at a time in name order from one seeded generator (float32, then cast to the
checkpoint's dtype) and written shard by shard (`model-0000N-of-0000M.safetensors` +
`model.safetensors.index.json`, as `save_pretrained` shards), so a real-size build holds about one shard,
not the model. Draws: norms 1, layer scales the config's `layer_scale_init_value`, the codec's weights
N(0, its `initializer_range`), everything else N(0, 0.02); the latent's scale and bias 1.7 and -0.05 (so
both count, as in hf_build.py).

How the requests end:
- tiny: calibrated like hf_build.py's tiny, but with this package's own program (ends.py): the decoder's
  output conv scaled so the calibration audio peaks at 0.5, then the LM head's rows of the diffusion token
  and eos set so that seeded generation of CALIBRATION_TEXT ends by itself after CALIBRATION_FRAMES frames.
- bench / real: the LM always picks the diffusion token, so a request plays until its frame cap (what a
  throughput run wants; transformers' generate on the same weights then runs exactly max_new_tokens
  steps too). Residual dimension 0 carries a constant MARK: every embedding row holds it there, no layer
  writes that dimension (o_proj and down_proj row 0 are 0), the two connectors' outputs hold MARK / 2
  each; the (tied) row of the diffusion token holds MARK + LEAD there, so its score leads the other three
  choices by LEAD times the normed dimension 0, which dominates the final norm, in the conditional and
  the guidance pass alike.
"""

from __future__ import annotations

import math
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch

from ..dtypes import torch_dtype
from .layout import SIZES, config_dict, tensor_shapes, write_side_files
from .shards import write_weights

SEED = 0
MARK, LEAD = 30.0, 4.0
CODEC_PREFIXES = ("model.audio_tower.", "model.semantic_tokenizer_encoder.")


def _draw(name: str, shape: tuple[int, ...], g: torch.Generator, cfg: dict[str, Any]) -> torch.Tensor:
    codec = cfg["audio_config"]
    leaf = name.rsplit(".", 2)
    if name == "model.latent_scaling_factor":
        return torch.tensor(1.7)
    if name == "model.latent_bias_factor":
        return torch.tensor(-0.05)
    if name.endswith(("gamma", "ffn_gamma")):
        return torch.full(shape, float(codec["layer_scale_init_value"]))
    if "norm" in leaf[-2] or name.endswith(".act.weight"):  # RMS norms (the connectors' `act` is one)
        return torch.ones(shape)
    std = float(codec["initializer_range"]) if name.startswith(CODEC_PREFIXES) else 0.02
    return torch.randn(shape, generator=g) * std


def _mark(name: str, t: torch.Tensor, cfg: dict[str, Any]) -> torch.Tensor:
    """The bench / real edits that make the diffusion token win every step (module docstring)."""
    if name == "model.language_model.embed_tokens.weight":
        t[:, 0] = MARK
        t[cfg["audio_token_id"], 0] = MARK + LEAD
    elif name.endswith(("self_attn.o_proj.weight", "mlp.down_proj.weight")) and "language_model" in name:
        t[0] = 0.0
    elif name in ("model.multi_modal_projector.linear_2.weight", "model.semantic_connector.linear_2.weight"):
        t[0] = 0.0
    elif name in ("model.multi_modal_projector.linear_2.bias", "model.semantic_connector.linear_2.bias"):
        t[0] = MARK / 2
    return t


def draw_tensors(cfg: dict[str, Any], seed: int, marked: bool) -> Iterator[tuple[str, torch.Tensor]]:
    g = torch.Generator().manual_seed(seed)
    for name, shape in tensor_shapes(cfg).items():
        t = _draw(name, shape, g, cfg)
        yield name, (_mark(name, t, cfg) if marked else t)


def parameter_count(size: str) -> int:
    return sum(math.prod(s) for s in tensor_shapes(config_dict(size)).values())


def build(out: Path, size: str = "tiny", seed: int = SEED, max_new_tokens: int = 200,
          dtype: str | None = None) -> Path:
    """Write a complete checkpoint at `out` (built beside it and renamed into place: a folder that exists
    and has config.json is whole). Default dtype: bfloat16 at real size (as released), else float32."""
    if size not in SIZES:
        raise ValueError(f"size must be one of {', '.join(SIZES)}, got {size!r}")
    dtype = dtype or ("bfloat16" if size == "real" else "float32")
    weights_dtype = torch_dtype(dtype, ("float32", "bfloat16"))
    out = Path(out)
    if out.exists() and any(out.iterdir()):
        raise FileExistsError(f"{out} exists and is not empty; give a new folder")
    work = out.parent / f".{out.name}.partial-{os.getpid()}"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    try:
        cfg = config_dict(size, dtype)
        write_side_files(work, cfg, max_new_tokens)
        if size == "tiny":
            from .ends import calibrated_tensors

            tensors = calibrated_tensors(work, dict(draw_tensors(cfg, seed, marked=False)))
            write_weights(work, iter(sorted(tensors.items())), weights_dtype)
        else:
            write_weights(work, draw_tensors(cfg, seed, marked=True), weights_dtype)
        if out.exists():
            out.rmdir()
        work.rename(out)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    return out

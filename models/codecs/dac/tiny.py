"""A tiny random-weight DAC codec in the exact `DacModel.save_pretrained` layout (config.json with the
DacConfig fields, model.safetensors with transformers' key names), built without transformers so the
offline demo can make one at run time. Its audio is not speech: the weights are random.

The default sizes keep the real codec's timing and code space (44.1 kHz, hop 512 from ratios 2/4/8/8,
9 codebooks of 1024) and shrink only the widths, so a tiny Dia emits frames of real duration.
"""

from __future__ import annotations

import json
from dataclasses import fields
from pathlib import Path

import torch
from safetensors.torch import save_file

from .config import DacCodecConfig
from .layers import Conv, ConvTranspose, DacNet, ResidualUnit, Snake1d

TINY_SIZES: dict[str, object] = {
    "encoder_hidden_size": 4,
    "downsampling_ratios": (2, 4, 8, 8),
    "decoder_hidden_size": 32,
    "n_codebooks": 9,
    "codebook_size": 1024,
    "codebook_dim": 8,
    "sampling_rate": 44100,
}

RESIDUAL_GAIN = 0.25
OUTPUT_GAIN = 0.1


def build_tiny_dac(out: Path, seed: int = 0, **sizes: object) -> Path:
    """Write config.json + model.safetensors to `out` (created). `sizes` overrides TINY_SIZES (any
    DacConfig architecture field). Deterministic for a given seed and sizes."""
    known = {f.name for f in fields(DacCodecConfig)} - {"upsampling"}
    unknown = sorted(set(sizes) - known)
    if unknown:
        raise TypeError(f"build_tiny_dac got unknown size(s) {unknown}; known: {sorted(known)}")
    kw = {**TINY_SIZES, **sizes}
    kw["downsampling_ratios"] = tuple(kw["downsampling_ratios"])  # type: ignore[arg-type]
    cfg = DacCodecConfig(**kw)  # type: ignore[arg-type]
    net = DacNet(cfg)
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for m in net.modules():
            _init(m, gen)
        # Each residual unit adds its branch to its input; damp the branches so twelve of them in a row
        # do not blow the signal up, and scale the output conv so tanh sees values around +-0.5.
        for m in net.modules():
            if isinstance(m, ResidualUnit):
                m.conv2.weight.mul_(RESIDUAL_GAIN)
        net.decoder.conv2.weight.mul_(OUTPUT_GAIN)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    state = {k: v.detach().contiguous() for k, v in net.state_dict().items()}
    save_file(state, str(out / "model.safetensors"), metadata={"format": "pt"})
    (out / "config.json").write_text(json.dumps(cfg.to_dict(), indent=2) + "\n")
    return out


def _init(m: torch.nn.Module, gen: torch.Generator) -> None:
    """Scales that keep a random decoder alive (unit-variance-ish activations, tanh not saturated):
    weights ~ N(0, 1/fan_in), small biases, Snake alphas around 1, unit-normal codebooks."""
    if isinstance(m, Conv | ConvTranspose):
        w = m.weight
        fan_in = w.shape[1] * w.shape[2] if isinstance(m, Conv) else w.shape[0] * 2
        w.copy_(torch.randn(w.shape, generator=gen) / fan_in**0.5)
        m.bias.copy_(0.05 * torch.randn(m.bias.shape, generator=gen))
    elif isinstance(m, Snake1d):
        m.alpha.copy_(0.5 + torch.rand(m.alpha.shape, generator=gen))
    elif isinstance(m, torch.nn.Embedding):
        m.weight.copy_(torch.randn(m.weight.shape, generator=gen))

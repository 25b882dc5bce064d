"""Random weights for Qwen3-TTS modules at O(1) scale, one draw per parameter from one generator in
named_parameters order (so a checkpoint is the same on every run): the tiny builder (tiny.py) randomizes
whole modules, the real-size builder (realsize.py) draws parameter by parameter on the meta device."""

from __future__ import annotations

import math

import torch

from ..layers import RMSNorm

HEAD_GAIN = 8.0  # the talker's and predictor's heads x8: clear greedy margins


def owners(module: torch.nn.Module) -> dict[str, tuple[torch.nn.Module, str]]:
    """Parameter name -> (owning module, local name)."""
    found = {}
    for mname, m in module.named_modules():
        for pname, _ in m.named_parameters(recurse=False):
            found[f"{mname}.{pname}" if mname else pname] = (m, pname)
    return found


def random_value(m: torch.nn.Module, pname: str, shape: torch.Size, gen: torch.Generator) -> torch.Tensor:
    """A float32 O(1)-scale value for parameter `pname` of module `m` (one draw from `gen`)."""
    if isinstance(m, torch.nn.Linear) and pname == "weight":
        return torch.randn(shape, generator=gen) / math.sqrt(shape[1])
    if pname == "bias":
        return 0.05 * torch.randn(shape, generator=gen)
    if isinstance(m, torch.nn.Embedding):
        return torch.randn(shape, generator=gen)
    if isinstance(m, RMSNorm):
        return 1.0 + 0.1 * torch.randn(shape, generator=gen)
    return 0.1 * torch.randn(shape, generator=gen)


@torch.no_grad()
def randomize(module: torch.nn.Module, gen: torch.Generator) -> None:
    """Overwrite every parameter at O(1) scale, in named_parameters order (deterministic)."""
    found = owners(module)
    for name, p in module.named_parameters():
        m, pname = found[name]
        p.copy_(random_value(m, pname, p.shape, gen).to(p.dtype))

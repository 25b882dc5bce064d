"""A depth decoder's K/V cache for one frame: a few positions (CSM 33, Qwen3-TTS 17, Kyutai 32), every row
of the batch at the same position, dropped when the frame ends. So it is plain tensors grown by
concatenation, not pages: no mask beyond causality, nothing to free, and a new frame is a new cache."""

from __future__ import annotations

import torch


class DenseCache:
    """Per layer the keys and values so far, grown along `time_dim` (1 for the library's layout
    [B, T, kv_heads, head_dim], 2 for moshi's [B, heads, T, head_dim])."""

    def __init__(self, layers: int, time_dim: int = 1) -> None:
        self.time_dim = time_dim
        self._keys: list[torch.Tensor | None] = [None] * layers
        self._values: list[torch.Tensor | None] = [None] * layers

    @property
    def length(self) -> int:
        """Positions the first layer holds: the position the next input starts at."""
        k = self._keys[0]
        return 0 if k is None else k.shape[self.time_dim]

    def extend(self, layer: int, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Append one step's k, v of `layer` (one or more positions); returns all the layer's positions."""
        held_k, held_v = self._keys[layer], self._values[layer]
        if held_k is not None and held_v is not None:
            k, v = torch.cat([held_k, k], dim=self.time_dim), torch.cat([held_v, v], dim=self.time_dim)
        self._keys[layer], self._values[layer] = k, v
        return k, v

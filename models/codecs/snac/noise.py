"""The noise SNAC's decoder adds (`NoiseBlock`: x + randn * linear(x)), drawn reproducibly per request.

SNAC itself draws it from the process-wide RNG inside every forward, so its output depends on whatever else
drew from that RNG before: not reproducible, and not streamable (a chunk's noise would depend on how the
utterance was cut). Two seeded draws replace it, one per streaming mode of models/orpheus/codec.py:

* `PositionNoise` (the "whole" mode): the value at time step p of noise block i depends only on (seed, i, p):
  block i's timeline is cut into pages of PAGE steps and page k is `randn(PAGE)` from a generator seeded with
  (seed, i, k). A chunk decoded over any window of frames therefore sees exactly the noise the whole
  utterance's single forward sees at the same steps, which is what makes streaming equal the whole decode.
  Its values are i.i.d. standard normal like SNAC's, but not the same numbers as a global-RNG draw.
* `SequentialNoise` (the "canopy" mode): one generator seeded with the request's seed, drawing
  `randn(1, 1, T_i)` for block 0, 1, 2, 3 of each four-frame window in the order canopyai/Orpheus-TTS's
  decoder runs them. After `torch.manual_seed(seed)` the reference's global-RNG draws are these very numbers
  (the CPU generator fills a tensor in order), so this mode reproduces the reference bit for bit.
"""

from __future__ import annotations

import torch

PAGE = 4096  # noise steps per page of PositionNoise
_MIX = 0x9E3779B97F4A7C15


def page_seed(seed: int, block: int, page: int) -> int:
    """A 63-bit generator seed for page `page` of noise block `block` (a fixed integer mix, no hashing of
    Python objects, so it is the same in every process)."""
    return (seed * _MIX + (block + 1) * 0x100000001B3 + page * 0xC2B2AE3D27D4EB4F) % (1 << 63)


class PositionNoise:
    def __init__(self, seed: int) -> None:
        self.seed = seed
        self._pages: dict[tuple[int, int], torch.Tensor] = {}

    def _page(self, block: int, page: int) -> torch.Tensor:
        key = (block, page)
        if key not in self._pages:
            if len(self._pages) > 64:  # a request walks forward: old pages are never read again
                self._pages.clear()
            g = torch.Generator().manual_seed(page_seed(self.seed, block, page))
            self._pages[key] = torch.randn(PAGE, generator=g)
        return self._pages[key]

    def window(self, block: int, start: int, length: int) -> torch.Tensor:
        """Block `block`'s noise at steps [start, start + length), fp32 on the CPU, shape [length]."""
        first, last = start // PAGE, (start + length - 1) // PAGE
        pages = torch.cat([self._page(block, k) for k in range(first, last + 1)])
        off = start - first * PAGE
        return pages[off : off + length]


class SequentialNoise:
    """Draws in the reference's order from one generator; `state`/`restore` make a failed codec pass
    re-runnable (models/base.py)."""

    def __init__(self, seed: int) -> None:
        self.gen = torch.Generator().manual_seed(seed)

    def draw(self, lengths: list[int]) -> list[torch.Tensor]:
        """One window's noise: randn(1, 1, T_i) for each block i in turn."""
        return [torch.randn((1, 1, n), generator=self.gen) for n in lengths]

    def state(self) -> torch.Tensor:
        return self.gen.get_state()

    def restore(self, state: torch.Tensor) -> None:
        self.gen.set_state(state)

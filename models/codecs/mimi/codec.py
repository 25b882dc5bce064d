"""The Mimi codec (Kyutai's; CSM's codec, Qwen3-TTS's tokenizer encoder), shared by the families that use it:
the encode half (encoder.py) and the decode half (decoder.py) under transformers' `MimiModel` names, with a
streaming slot table for the engine's codec lanes.

Streaming: the state of every request lives in preallocated tensors indexed by slot (`init_slots`);
`decode_chunks` gathers the slots of a batch, decodes all its chunks in ONE right-padded pass (every op is
causal: padding never reaches valid samples) and scatters the new state back only after the whole batch
decoded, so a raise leaves the slot table untouched (the re-run rule of models/base.py).
"""

from __future__ import annotations

import numpy as np
import torch

from ...base import CodecItem, check_codec_batch
from ...device_memory import pool_zeros
from ..streaming_conv import CausalConv, CausalTransConv, State
from .config import MimiConfig
from .decoder import GroupedTransConv, SEANetDecoder
from .encoder import MimiEncoder
from .transformer import StreamingTransformer


class MimiCodec(MimiEncoder):
    """`MimiModel`: encoder, encoder_transformer, downsample, quantizer, upsample, decoder_transformer,
    decoder."""

    def __init__(self, cfg: MimiConfig, num_codebooks: int | None = None) -> None:
        super().__init__(cfg, window=cfg.sliding_window)
        self.num_codebooks = num_codebooks or cfg.num_quantizers  # codes per frame the decoder takes
        s = cfg.latent_stride
        self.upsample = GroupedTransConv(cfg.hidden_size, 2 * s, s, cfg.upsample_groups)
        self.decoder_transformer = StreamingTransformer(cfg, "decoder_transformer")
        self.decoder = SEANetDecoder(cfg)
        for name, m in self.named_modules():
            if isinstance(m, CausalConv | CausalTransConv):
                m.state_key = name
        self.slots: State = {}
        self.num_slots = 0

    @property
    def samples_per_frame(self) -> int:
        return self.cfg.samples_per_frame

    def state_shapes(self) -> dict[str, tuple[int, ...]]:
        """Per-slot shape of every piece of decode state (int64 for `*.pos`, else float)."""
        shapes: dict[str, tuple[int, ...]] = dict(self.decoder_transformer.state_shapes())
        for m in [self.upsample, *self.decoder.modules()]:
            if isinstance(m, CausalConv | CausalTransConv):
                shapes.update(m.state_shapes())
        return shapes

    # --- offline ------------------------------------------------------------------------------------
    @torch.inference_mode()
    def decode(self, codes: torch.Tensor) -> torch.Tensor:
        """codes [B, K, T] int64 -> wav [B, 1, T * samples_per_frame], one full forward."""
        self._check_codes(codes)
        h = self.upsample(self.quantizer.decode(codes.to(self._device)))
        h = self.decoder_transformer(h.transpose(1, 2)).transpose(1, 2)
        return self.decoder(h)

    def encode(self, wav: np.ndarray, sample_rate: int) -> np.ndarray:
        """Mono float PCM at the codec's rate -> codes [ceil(n / 1920), num_codebooks] int64."""
        return self.encode_with_gaps(wav, sample_rate, self.num_codebooks)[0]

    # --- streaming ----------------------------------------------------------------------------------
    def init_slots(self, n: int) -> None:
        """Preallocate the state of `n` concurrent requests (zeros = a fresh request)."""
        if n < 1:
            raise ValueError(f"the codec slot table needs at least 1 slot, got {n}")
        dtype = next(self.parameters()).dtype
        self.slots = {
            k: pool_zeros((n, *shape), torch.int64 if k.endswith(".pos") else dtype, self._device)
            for k, shape in self.state_shapes().items()
        }
        self.num_slots = n

    def slot_bytes(self) -> int:
        """One slot's state in bytes (before the table exists: from the shapes in the weights' dtype)."""
        item = next(self.parameters()).element_size()
        return sum(
            int(np.prod(s)) * (8 if k.endswith(".pos") else item) for k, s in self.state_shapes().items()
        )

    @torch.inference_mode()
    def decode_chunks(self, items: list[CodecItem]) -> list[np.ndarray]:
        """Each item's chunk ([n, K] codes) -> float32 PCM [n * 1920], continuing its slot. A last chunk may
        hold no frame (the request's final step played none): it decodes to no samples."""
        if not items:
            return []
        check_codec_batch(items, self.num_slots)
        lengths = [self._check_chunk(it) for it in items]
        out: list[np.ndarray] = [np.zeros(0, dtype=np.float32) for _ in items]
        live = [b for b, n in enumerate(lengths) if n]
        if not live:
            return out
        codes = np.zeros((len(live), self.num_codebooks, max(lengths)), dtype=np.int64)
        for i, b in enumerate(live):
            codes[i, :, : lengths[b]] = np.asarray(items[b].codes).T
        dev = self._device
        idx = torch.tensor([items[b].slot for b in live], device=dev)
        fresh = torch.tensor([items[b].first for b in live], device=dev)
        st: State = {}
        for k, table in self.slots.items():
            g = table.index_select(0, idx)
            # a first chunk starts from zeros whatever the slot held before (slot reuse)
            st[k] = torch.where(fresh.view(-1, *([1] * (g.dim() - 1))), torch.zeros_like(g), g)
        n_live = torch.tensor([lengths[b] for b in live], device=dev)
        wav, new = self._stream(torch.from_numpy(codes).to(dev), n_live, st)
        for k, v in new.items():
            self.slots[k].index_copy_(0, idx, v)
        pcm = wav[:, 0].float().cpu().numpy()
        spf = self.samples_per_frame
        for i, b in enumerate(live):
            out[b] = pcm[i, : lengths[b] * spf].copy()
        return out

    def _stream(self, codes: torch.Tensor, lengths: torch.Tensor, st: State) -> tuple[torch.Tensor, State]:
        new: State = {}
        h = self.upsample.stream(self.quantizer.decode(codes), lengths, st, new)
        lengths = lengths * self.upsample.stride
        h = self.decoder_transformer.stream(h.transpose(1, 2), lengths, st, new).transpose(1, 2)
        return self.decoder.stream(h, lengths, st, new), new

    # --- helpers ------------------------------------------------------------------------------------
    @property
    def _device(self) -> torch.device:
        return next(self.parameters()).device

    def _check_chunk(self, item: CodecItem) -> int:
        c = np.asarray(item.codes)
        if c.ndim != 2 or c.shape[1] != self.num_codebooks or (c.shape[0] < 1 and not item.last):
            raise ValueError(
                f"a codec chunk must be [n >= 1, {self.num_codebooks}] codes (none only for a last chunk), "
                f"got shape {c.shape} (slot {item.slot})"
            )
        if c.shape[0]:
            self._check_codes(c.T[None])
        return int(c.shape[0])

    def _check_codes(self, codes: np.ndarray | torch.Tensor) -> None:
        if codes.shape[1] != self.num_codebooks:
            raise ValueError(f"expected {self.num_codebooks} codebooks, got {codes.shape[1]}")
        lo, hi = int(codes.min()), int(codes.max())
        if lo < 0 or hi >= self.cfg.codebook_size:
            raise ValueError(f"Mimi codes must lie in [0, {self.cfg.codebook_size}), got [{lo}, {hi}]")


def load_codec(
    cfg: MimiConfig,
    table: dict,
    layout,
    where: str,
    device: str | torch.device,
    dtype: torch.dtype,
    num_codebooks: int | None = None,
    after=None,
) -> MimiCodec:
    """A `MimiCodec` filled from a checkpoint's tensor table through `layout` (layouts.py), strictly (every
    parameter present with its shape, NaN/inf refused), each tensor read straight into its parameter."""
    from ...checkpoint import fill_module

    with torch.device("meta"):
        codec = MimiCodec(cfg, num_codebooks)
    fill_module(codec, layout(table), where, device, dtype, check_finite=True)
    if after is not None:  # a layout's fix-up of the loaded weights (layouts.deinterleave_rope)
        after(codec)
    return codec.eval()

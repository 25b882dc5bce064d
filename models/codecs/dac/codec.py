"""The DAC 44.1 kHz codec (Dia's and Zonos' codec; Higgs' and X-Codec's decoders stream through its
layers): codes [T, 9] <-> mono PCM, with exact streaming decode through a per-request slot table.

Loading reads a `DacModel.save_pretrained` folder (config.json + model.safetensors; plain weights, or
weight-norm pairs `weight_g`/`weight_v` or `parametrizations.weight.original0/1`, folded at load).

Streaming (`decode`) equals `decode_offline` of all frames: see layers.py. The decoder is non-causal,
so each chunk's last `lookahead_samples` samples wait for later frames and come out with the next chunk
(or, on the request's last chunk, against the same zero padding the offline forward uses). Per item the
output is therefore NOT `n * hop` samples: a first chunk yields `n * hop - lookahead` samples (none if
that is <= 0), later chunks `n * hop`, and the last chunk `n * hop + lookahead`; the request's total is
exactly `frames * hop`.

Look-ahead of descript/dac_44khz (hop 512 at 44.1 kHz), from the padding of each layer referred to the
output rate: conv1 3 frames = 1536 samples; blocks (strides 8, 8, 4, 2): (4 + 39) * 64 = 2752,
(4 + 39) * 8 = 344, (2 + 39) * 2 = 82, 1 + 39 = 40; conv2 3. Total 4757 samples = 9.29 frames =
107.9 ms: the first audible sample of a request needs 10 decoded frames (a first chunk of 10 frames
emits 363 samples, 8.2 ms), i.e. streaming adds ~9.3 frames (108 ms of generation) to TTFA compared with
a causal codec. The hold-back is that plain sum of paddings; the true receptive field is a few dozen
samples shorter (measured 33-42 on a tiny codec with the same ratios: the transposed convolutions' half-
block offsets), so it wastes under 1 ms. A chunk's PCM starts at `chunk_span(...)[0]`, not at
`start_frame * hop`.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import torch
from safetensors import SafetensorError, safe_open

from ...base import CheckpointError, CodecItem, InputError, check_codec_batch
from ...device_memory import pool_zeros
from ...dtypes import torch_dtype
from ...weights import assign_weights, read_source, refuse_extra, source_keys
from .config import DacCodecConfig
from .layers import END_UNKNOWN, DacNet, Stream

DAC_HUB_ID = "descript/dac_44khz"


class DacCodec:
    """Descript Audio Codec: `decode` streams per-request chunks batched across requests (state per slot),
    `decode_offline` is one full forward, `encode` turns a clip into codes as DacModel.encode does."""

    def __init__(self, net: DacNet) -> None:
        cfg = net.cfg
        self.net = net.eval()
        self.cfg = cfg
        self.sample_rate: int = cfg.sampling_rate
        self.hop_length: int = cfg.hop_length
        self.codebooks: int = cfg.n_codebooks
        self.codebook_size: int = cfg.codebook_size
        self.frame_rate: float = cfg.frame_rate  # 86.13 frames/s for 44.1 kHz, hop 512
        self.lookahead_samples: int = net.decoder.lookahead_samples()
        # Zero frames appended behind a last chunk so its held-back tail comes out.
        self.lookahead_frames: int = math.ceil(self.lookahead_samples / self.hop_length)
        self.slots: dict[str, torch.Tensor] = {}
        self.num_slots = 0
        self._frames: list[int] = []  # frames decoded so far per slot
        self._open: list[bool] = []  # a request is mid-stream on the slot

    # --- loading ----------------------------------------------------------------------------------
    @classmethod
    def load(cls, root: Path, device: str = "cpu", dtype: str = "float32") -> DacCodec:
        root = Path(root)
        dt = torch_dtype(dtype)  # the family's codec part (its spec's DTYPE_POLICY)
        if not root.is_dir():
            raise CheckpointError(f"DAC codec folder {root} does not exist")
        cfg = DacCodecConfig.read(root / "config.json")
        with torch.device("meta"):
            net = DacNet(cfg)
        state = read_dac_weights(net, root / "model.safetensors")
        return cls(assign_weights(net, state, device, dt))

    @property
    def device(self) -> torch.device:
        return self.net.decoder.conv1.weight.device

    @property
    def dtype(self) -> torch.dtype:
        return self.net.decoder.conv1.weight.dtype

    # --- offline ----------------------------------------------------------------------------------
    @torch.inference_mode()
    def decode_offline(self, codes: np.ndarray) -> np.ndarray:
        """codes [T, codebooks] -> float32 PCM [T * hop], the reference's single forward."""
        c = self._check_codes(codes, "codes")
        t = torch.from_numpy(c.T.copy()).to(self.device)[None]
        wav = self.net.decoder(self.net.quantizer.decode(t))
        return wav[0, 0].float().cpu().numpy()

    @torch.inference_mode()
    def encode(self, pcm: np.ndarray, sample_rate: int) -> np.ndarray:
        """Mono PCM at the codec rate -> codes [ceil(n / hop), codebooks] int64. Like Dia's processor, the
        clip is zero-padded to a whole number of hops, then encoded as DacModel.encode does."""
        if sample_rate != self.sample_rate:
            raise InputError(
                f"the reference audio is {sample_rate} Hz but the DAC codec needs {self.sample_rate} Hz; "
                "resample the clip first"
            )
        x = np.asarray(pcm)
        if x.ndim != 1:
            raise InputError(f"the reference audio must be mono (one channel), got shape {x.shape}")
        if x.size == 0:
            raise InputError("the reference audio is empty; give a clip of speech")
        if not np.isfinite(x).all():
            raise InputError("the reference audio holds NaN or infinite samples; give a valid clip")
        n = math.ceil(x.size / self.hop_length) * self.hop_length
        padded = np.zeros(n, dtype=np.float32)
        padded[: x.size] = x
        wav = torch.from_numpy(padded).to(device=self.device, dtype=self.dtype)[None, None]
        codes = self.net.quantizer.encode(self.net.encoder(wav))
        return codes[0].T.cpu().numpy().astype(np.int64)

    # --- streaming --------------------------------------------------------------------------------
    def init_slots(self, num_slots: int) -> None:
        """Preallocate the streaming state of `num_slots` concurrent requests."""
        if num_slots < 1:
            raise ValueError(f"the codec slot table needs at least 1 slot, got {num_slots}")
        self.slots = {
            k: pool_zeros((num_slots, *shape), self.dtype, self.device)
            for k, shape in self.net.decoder_state_shapes().items()
        }
        self.num_slots = num_slots
        self._frames = [0] * num_slots
        self._open = [False] * num_slots

    def slot_bytes(self) -> int:
        return sum(t[0].numel() * t.element_size() for t in self.slots.values())

    def release_slot(self, slot: int) -> None:
        """The request on `slot` ended (finished, cancelled or failed); its next chunk must be a first."""
        self._check_slot(slot)
        self._open[slot] = False
        self._frames[slot] = 0

    @torch.inference_mode()
    def decode(self, items: list[CodecItem]) -> list[np.ndarray]:
        """One padded pass over the chunks of several requests; float32 PCM per item (see module doc for
        how many samples each chunk yields)."""
        if not items:
            return []
        slots = check_codec_batch(items, self.num_slots)
        chunks = []
        for it in items:
            if not it.first and not self._open[it.slot]:
                raise ValueError(f"codec slot {it.slot} has no request in progress: its chunk must be first")
            chunks.append(self._check_codes(it.codes, f"chunk of slot {it.slot}"))
        n = [c.shape[0] for c in chunks]
        start = [0 if it.first else self._frames[it.slot] for it in items]
        extra = self.lookahead_frames
        width = max(k + (extra if it.last else 0) for k, it in zip(n, items, strict=True))
        codes = np.zeros((len(items), self.codebooks, width), dtype=np.int64)
        for b, c in enumerate(chunks):
            codes[b, :, : n[b]] = c.T

        dev = self.device
        idx = torch.tensor(slots, device=dev)
        fresh = torch.tensor([it.first for it in items], device=dev)
        old = {}
        for k, table in self.slots.items():
            g = table.index_select(0, idx)
            # A first chunk starts from zeros (= the left zero padding) whatever the slot held (reuse).
            old[k] = torch.where(fresh[:, None, None], torch.zeros((), dtype=g.dtype, device=dev), g)
        st = Stream(
            start=torch.tensor(start, device=dev),
            end=torch.tensor(
                [s + k if it.last else END_UNKNOWN for s, k, it in zip(start, n, items, strict=True)],
                device=dev,
            ),
            steps=torch.tensor(n, device=dev),
            old=old,
        )
        wav, pos = self.net.decoder.stream(self.net.quantizer.decode(torch.from_numpy(codes).to(dev)), st)
        assert pos.rate == self.hop_length and pos.delay == self.lookahead_samples, pos
        for k, v in st.new.items():
            self.slots[k].index_copy_(0, idx, v)
        out = wav[:, 0].float().cpu().numpy()
        hop, delay = self.hop_length, self.lookahead_samples
        pcm = []
        for b, it in enumerate(items):
            # Stream sample i is true sample start*hop + i - delay.
            lo, hi = self.chunk_span(start[b], n[b], it.last)
            base = start[b] * hop - delay
            pcm.append(out[b, lo - base : hi - base].copy())
            self._frames[it.slot] = start[b] + n[b]
            self._open[it.slot] = not it.last
        return pcm

    def chunk_span(self, start_frame: int, frames: int, last: bool) -> tuple[int, int]:
        """The request's samples [lo, hi) that `decode` returns for a chunk of `frames` frames after
        `start_frame` frames: what the frames seen so far settle, all the rest on the last chunk. Use
        `lo / sample_rate` as the chunk's start time (it is not `start_frame * hop`)."""
        hop, delay = self.hop_length, self.lookahead_samples
        lo = max(0, start_frame * hop - delay)
        hi = (start_frame + frames) * hop if last else max(0, (start_frame + frames) * hop - delay)
        return lo, hi

    # --- checks -----------------------------------------------------------------------------------
    def _check_slot(self, slot: int) -> None:
        if not 0 <= slot < self.num_slots:
            raise ValueError(f"codec slot {slot} is outside the table of {self.num_slots} slots")

    def _check_codes(self, codes: np.ndarray, what: str) -> np.ndarray:
        c = np.asarray(codes)
        if c.ndim != 2 or c.shape[1] != self.codebooks or c.shape[0] < 1:
            raise ValueError(f"{what} must be [n >= 1, {self.codebooks}] codes, got shape {c.shape}")
        if not np.issubdtype(c.dtype, np.integer):
            raise ValueError(f"{what} must hold integer codes, got {c.dtype}")
        lo, hi = int(c.min()), int(c.max())
        if lo < 0 or hi >= self.codebook_size:
            raise ValueError(f"{what}: DAC codes must lie in [0, {self.codebook_size}), got [{lo}, {hi}]")
        return c.astype(np.int64, copy=False)


def read_dac_weights(net: DacNet, file: Path) -> dict[str, torch.Tensor]:
    """The tensors of `file` keyed like `net.state_dict()`, checked strictly (every key present with its
    shape, nothing extra, no NaN/inf); weight-norm pairs are folded into `weight`. Errors name key + file."""
    if not file.exists():
        raise CheckpointError(f"missing weights file {file} (a DAC codec folder needs model.safetensors)")
    expected = {k: tuple(v.shape) for k, v in net.state_dict().items()}
    try:
        with safe_open(str(file), framework="pt", device="cpu") as f:
            shapes = {k: tuple(f.get_slice(k).get_shape()) for k in f.keys()}
            plan: dict[str, tuple[str, ...]] = {}
            for k, shape in expected.items():
                plan[k] = source_keys(k, shape, shapes, file)
            used = {s for srcs in plan.values() for s in srcs}
            extra = sorted(set(shapes) - used)
            refuse_extra(extra, file)
            out = {k: read_source(f.get_tensor, srcs, file) for k, srcs in plan.items()}
    except SafetensorError as e:
        raise CheckpointError(f"cannot read {file} (corrupt or truncated safetensors file?): {e}") from e
    return out

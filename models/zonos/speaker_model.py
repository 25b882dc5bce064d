"""Zonos' speaker model: a 128-d speaker embedding from a clip, as the reference makes it
(zonos/speaker_cloning.py `SpeakerEmbeddingLDA`, then `Zonos.make_speaker_embedding`).

* Files: the hub repo `Zyphra/Zonos-v0.1-speaker-embedding` holds `ResNet293_SimAM_ASP_base.pt` (the
  embedder's state dict, torch.save) and `ResNet293_SimAM_ASP_base_LDA-128.pt` (a 256 -> 128 linear map).
  We read them from a `speaker_embedding/` folder beside the checkpoint (tests, the demo) or the local hub
  cache, as the DAC is found.
* Network (names follow the released state dict): a 2-D ResNet over the [80 mel, time] log fbank
  (speaker_features.py): a 3x3 stem, four stages of SimAM basic blocks (two 3x3 convs with batch norm, the
  SimAM energy gate, a 1x1 projection shortcut where the shape changes; stride 2 from the second stage on),
  then attentive statistics pooling over time (1x1 convs -> softmax weights per channel; weighted mean and
  standard deviation), a linear bottleneck to 256 and the LDA to 128. The stage depths (10, 20, 64, 3 in
  the release: 'ResNet293') and the base width (64) are read from the state dict's keys and shapes, so a
  small random file in the same layout runs the same code.
* Output: the reference returns the LDA output cast to bfloat16 (`make_speaker_embedding`); we round it the
  same way and hand the prefix conditioner its float value.
"""

from __future__ import annotations

import hashlib
import re
from collections import OrderedDict
from pathlib import Path

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from ..base import CheckpointError
from ..locate import cached_snapshot, offline_note
from .speaker_features import N_MELS, check_clip, clip_input, log_fbank

HUB_ID = "Zyphra/Zonos-v0.1-speaker-embedding"
EMBEDDER_FILE = "ResNet293_SimAM_ASP_base.pt"
LDA_FILE = "ResNet293_SimAM_ASP_base_LDA-128.pt"
LOCAL_DIR = "speaker_embedding"
SIMAM_LAMBDA = 1e-4
BN_EPS = 1e-5


def resolve_speaker_model(root: Path) -> Path:
    """The folder holding the two speaker-model files, or one sentence saying how to get them."""
    local = Path(root) / LOCAL_DIR
    if (local / EMBEDDER_FILE).is_file():
        return local
    snap = cached_snapshot(HUB_ID)
    if snap is not None and (Path(snap) / EMBEDDER_FILE).is_file():
        return Path(snap)
    raise CheckpointError(
        f"Zonos' speaker model {HUB_ID!r} (for --ref-audio) is not in the local Hugging Face cache"
        f"{offline_note()}; download it with `vox models pull {HUB_ID}`, put its two .pt files in {local}, "
        "or use a saved speaker embedding as the voice"
    )


class SimAMBlock(nn.Module):
    """Two 3x3 convs with batch norm, the parameter-free SimAM gate, a residual (projected if reshaped)."""

    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout, eps=BN_EPS)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout, eps=BN_EPS)
        self.downsample = nn.Sequential()
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(
                nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout, eps=BN_EPS)
            )

    @staticmethod
    def simam(x: torch.Tensor) -> torch.Tensor:
        # each unit's energy against its channel's spatial statistics (unbiased variance), as a sigmoid gate
        n = x.shape[2] * x.shape[3] - 1
        d = (x - x.mean(dim=[2, 3], keepdim=True)).pow(2)
        v = d.sum(dim=[2, 3], keepdim=True) / n
        return x * torch.sigmoid(d / (4 * (v + SIMAM_LAMBDA)) + 0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.relu(self.bn1(self.conv1(x)))
        y = self.simam(self.bn2(self.conv2(y)))
        return F.relu(y + self.downsample(x))


class ResNetFront(nn.Module):
    def __init__(self, width: int, depths: tuple[int, ...]) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(1, width, 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width, eps=BN_EPS)
        cin = width
        for i, depth in enumerate(depths):
            cout = width * 2**i
            stride = 1 if i == 0 else 2  # the first block of every later stage halves both axes
            blocks = [SimAMBlock(cin, cout, stride)] + [SimAMBlock(cout, cout, 1) for _ in range(depth - 1)]
            self.add_module(f"layer{i + 1}", nn.Sequential(*blocks))
            cin = cout
        self.n_stages = len(depths)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.relu(self.bn1(self.conv1(x)))
        for i in range(self.n_stages):
            x = getattr(self, f"layer{i + 1}")(x)
        return x


class AttentiveStatsPool(nn.Module):
    def __init__(self, channels: int) -> None:
        super().__init__()
        self.attention = nn.Sequential(
            nn.Conv1d(channels, 128, 1),
            nn.ReLU(),
            nn.BatchNorm1d(128, eps=BN_EPS),
            nn.Conv1d(128, channels, 1),
            nn.Softmax(dim=2),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.reshape(x.shape[0], -1, x.shape[-1])  # [B, channels x mel rows, frames]
        w = self.attention(x)
        mu = (x * w).sum(dim=2)
        sd = torch.sqrt(((x * x * w).sum(dim=2) - mu * mu).clamp(min=1e-5))
        return torch.cat([mu, sd], dim=1)


class SpeakerEmbedder(nn.Module):
    """Log fbank [B, 80, frames] -> 256-d embedding -> 128-d LDA projection."""

    def __init__(self, width: int, depths: tuple[int, ...], embed_dim: int, lda_dim: int) -> None:
        super().__init__()
        self.front = ResNetFront(width, depths)
        rows = N_MELS // 2 ** (len(depths) - 1)  # the mel axis after the strided stages
        channels = width * 2 ** (len(depths) - 1) * rows
        self.pooling = AttentiveStatsPool(channels)
        self.bottleneck = nn.Linear(2 * channels, embed_dim)
        self.lda = nn.Linear(embed_dim, lda_dim)

    def forward(self, feats: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        emb = self.bottleneck(self.pooling(self.front(feats[:, None])))
        return emb, self.lda(emb.float())


def _shape_of(state: dict[str, torch.Tensor]) -> tuple[int, tuple[int, ...], int]:
    """Base width, blocks per stage and embedding size, read from the embedder's state dict."""
    if "front.conv1.weight" not in state or "bottleneck.weight" not in state:
        raise CheckpointError(f"{EMBEDDER_FILE} is not a ResNet speaker embedder's state dict")
    width = int(state["front.conv1.weight"].shape[0])
    counts: dict[int, int] = {}
    for key in state:
        m = re.match(r"front\.layer(\d+)\.(\d+)\.conv1\.weight$", key)
        if m:
            stage, block = int(m.group(1)), int(m.group(2))
            counts[stage] = max(counts.get(stage, 0), block + 1)
    if not counts or sorted(counts) != list(range(1, len(counts) + 1)):
        raise CheckpointError(f"{EMBEDDER_FILE} holds no consecutive front.layerN stages")
    return width, tuple(counts[s] for s in sorted(counts)), int(state["bottleneck.weight"].shape[0])


def load_speaker_model(folder: Path, device: torch.device) -> SpeakerEmbedder:
    """Both released files -> the embedder, float32 in eval mode (the reference runs it in float32)."""
    folder = Path(folder)
    try:
        state = torch.load(folder / EMBEDDER_FILE, weights_only=True, mmap=True, map_location="cpu")
        lda = torch.load(folder / LDA_FILE, weights_only=True, map_location="cpu")
    except (OSError, RuntimeError) as e:
        raise CheckpointError(f"cannot read Zonos' speaker model in {folder}: {e}") from None
    width, depths, embed_dim = _shape_of(state)
    lda_dim = int(lda["weight"].shape[0])
    with torch.device("meta"):
        model = SpeakerEmbedder(width, depths, embed_dim, lda_dim)
    merged = {k: v for k, v in state.items() if not k.startswith("featCal.")}
    merged.update({f"lda.{k}": v for k, v in lda.items()})
    try:
        model.load_state_dict(merged, strict=True, assign=True)
    except RuntimeError as e:
        raise CheckpointError(f"Zonos' speaker model in {folder} does not match its layout: {e}") from None
    return model.to(device=device, dtype=torch.float32).eval().requires_grad_(False)


@torch.inference_mode()
def embed_clip(model: SpeakerEmbedder, wav: np.ndarray, rate: int) -> tuple[np.ndarray, np.ndarray]:
    """A mono clip -> (256-d embedding, 128-d LDA embedding), float32, before any bfloat16 rounding."""
    check_clip(wav, rate)
    dev = next(model.parameters()).device
    feats = log_fbank(clip_input(wav, rate).to(dev))
    emb, lda = model(feats)
    return emb[0].float().cpu().numpy(), lda[0].float().cpu().numpy()


def conditioning_embedding(lda: np.ndarray) -> np.ndarray:
    """The reference's `make_speaker_embedding` output (bfloat16) as float32: what the prefix sees."""
    return torch.from_numpy(lda).to(torch.bfloat16).float().numpy()


class SpeakerClips:
    """The speaker model loaded on first use, and the last few clips' embeddings keyed by their samples."""

    def __init__(self, root: Path, device: torch.device, size: int = 8) -> None:
        self.root, self.device, self.size = Path(root), device, size
        self.model: SpeakerEmbedder | None = None
        self.items: OrderedDict[str, np.ndarray] = OrderedDict()

    def check_files(self) -> None:
        if self.model is None:
            resolve_speaker_model(self.root)

    def embedding(self, wav: np.ndarray, rate: int) -> np.ndarray:
        x = np.ascontiguousarray(wav, dtype=np.float32)
        key = hashlib.sha1(x.tobytes() + f"/{rate}".encode()).hexdigest()
        hit = self.items.get(key)
        if hit is None:
            if self.model is None:
                self.model = load_speaker_model(resolve_speaker_model(self.root), self.device)
            hit = conditioning_embedding(embed_clip(self.model, x, rate)[1])
            self.items[key] = hit
            while len(self.items) > self.size:
                self.items.popitem(last=False)
        self.items.move_to_end(key)
        return hit

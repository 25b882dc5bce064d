"""Tiny random stand-ins for a checkpoint's `speech_tokenizer_v3.onnx` and `campplus.onnx`, exported from
small torch modules with the real files' interface, so voice cloning runs end to end in tests (onnxruntime in
both voxcli and the oracle):

    speech_tokenizer_v3.onnx   feats [1, 128, T] float32, feats_length [1] int32 -> indices [1, ceil(T/4)]
                               int64 (25 Hz tokens from the 100 Hz log-mel: two stride-2 convolutions;
                               frames at or past feats_length are zeroed; argmax over 6561 ids)
    campplus.onnx              feature [1, T, 80] float32 -> embedding [1, 192] float32 (the names of
                               3D-Speaker's CAM++ export; upstream feeds both models by position)

The audio they "understand" is random; the features they read are upstream's. Needs `onnx` (the export).
"""

from __future__ import annotations

import warnings
from pathlib import Path

import torch
from torch import nn

from .onnx_models import CAMPPLUS, SPEECH_TOKENIZER

SPEECH_VOCAB = 6561
EMBED_DIM = 192


class TinySpeechTokenizer(nn.Module):
    def __init__(self, width: int = 32) -> None:
        super().__init__()
        self.conv1 = nn.Conv1d(128, width, 3, stride=2, padding=1)
        self.conv2 = nn.Conv1d(width, width, 3, stride=2, padding=1)
        self.head = nn.Linear(width, SPEECH_VOCAB)

    def forward(self, feats: torch.Tensor, feats_length: torch.Tensor) -> torch.Tensor:
        keep = torch.arange(feats.shape[2])[None, None, :] < feats_length[:, None, None]
        h = torch.nn.functional.gelu(self.conv1(feats * keep.to(feats.dtype)))
        h = torch.nn.functional.gelu(self.conv2(h))
        return self.head(h.transpose(1, 2)).argmax(-1)


class TinyCampPlus(nn.Module):
    def __init__(self, width: int = 32) -> None:
        super().__init__()
        self.proj = nn.Linear(80, width)
        self.out = nn.Linear(2 * width, EMBED_DIM)

    def forward(self, feature: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.proj(feature))
        return self.out(torch.cat([h.mean(dim=1), h.std(dim=1)], dim=-1))


def _randomize(module: nn.Module, gen: torch.Generator) -> nn.Module:
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn(p.shape, generator=gen) * (0.5 if p.dim() > 1 else 0.1))
    return module.eval()


def write_tiny_onnx(root: str | Path, seed: int = 4321, tokenizer: str = SPEECH_TOKENIZER) -> None:
    """Write both files into checkpoint folder `root` (deterministic for a seed); `tokenizer`: the speech
    tokenizer's file name (CosyVoice 2's checkpoints name theirs speech_tokenizer_v2.onnx)."""
    root = Path(root)
    gen = torch.Generator().manual_seed(seed)
    tok, spk = _randomize(TinySpeechTokenizer(), gen), _randomize(TinyCampPlus(), gen)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the TorchScript exporter's deprecation notice
        torch.onnx.export(
            tok,
            (torch.randn(1, 128, 64), torch.tensor([64], dtype=torch.int32)),
            str(root / tokenizer),
            input_names=["feats", "feats_length"],
            output_names=["indices"],
            dynamic_axes={"feats": {2: "frames"}, "indices": {1: "tokens"}},
            dynamo=False,
        )
        torch.onnx.export(
            spk,
            (torch.randn(1, 64, 80),),
            str(root / CAMPPLUS),
            input_names=["feature"],
            output_names=["embedding"],
            dynamic_axes={"feature": {1: "frames"}},
            dynamo=False,
        )

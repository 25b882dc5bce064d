"""The construction-time noise of upstream's flow and vocoder, reproduced by replaying its RNG.

Upstream builds the modules from cosyvoice3.yaml in file order (llm, flow, hift). CausalConditionalCFM's
constructor seeds the global RNG with 0 and draws the flow's noise `randn(1, 80, 15000)`; what is built
after it draws from the same stream until the vocoder's SineGen2 draws `rand(1, 9)` (unused at inference)
and its source-noise buffer `rand(1, 300 * 24000, 9)`. In between: the flow's own `input_embedding` and
`spk_embed_affine_layer`, then the f0 predictor (five convolutions and a linear layer), all with torch's
default initialisers. Building modules of the same shapes in the same order reproduces the stream
exactly, so the buffers are the reference's bit for bit. The caller's RNG state is left untouched.
"""

from __future__ import annotations

from functools import lru_cache

import torch
from torch import nn

from .config import CosyVoice3Config

SOURCE_SECONDS = 300  # SineGen2's buffer: 300 s at 24 kHz


@lru_cache(maxsize=2)
def _replay(
    vocab: int,
    input_size: int,
    spk_dim: int,
    out_size: int,
    f0_in: int,
    f0_ch: int,
    f0_cls: int,
    mel_dim: int,
    sample_rate: int,
    harmonics: int,
) -> tuple[torch.Tensor, torch.Tensor]:
    with torch.random.fork_rng(devices=[]), torch.device("cpu"):
        torch.manual_seed(0)
        flow_noise = torch.randn([1, mel_dim, 50 * 300])[0]
        nn.Embedding(vocab, input_size)
        nn.Linear(spk_dim, out_size)
        nn.Conv1d(f0_in, f0_ch, 4)
        for _ in range(4):
            nn.Conv1d(f0_ch, f0_ch, 3)
        nn.Linear(f0_ch, f0_cls)
        torch.rand(1, harmonics + 1)
        sine = torch.rand(1, SOURCE_SECONDS * sample_rate, harmonics + 1)[0]
    return flow_noise, sine


def construction_noise(cfg: CosyVoice3Config) -> tuple[torch.Tensor, torch.Tensor]:
    """(flow noise [80, 15000], vocoder source noise [7.2M samples, harmonics + 1]), float32 on the CPU.
    Cached per shape: the source buffer is 260 MB and takes about a second to draw."""
    f, h = cfg.flow, cfg.hift
    return _replay(
        f.vocab_size,
        f.input_size,
        f.spk_embed_dim,
        f.output_size,
        h.f0_in_channels,
        h.f0_cond_channels,
        h.f0_num_class,
        f.dit.mel_dim,
        h.sampling_rate,
        h.nb_harmonics,
    )

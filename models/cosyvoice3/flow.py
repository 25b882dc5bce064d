"""CosyVoice 3's flow (upstream CausalMaskedDiffWithDiT + CausalConditionalCFM) with flow.pt's names:
speech tokens -> 3-token look-ahead layer -> x2 frame repeat (mu) -> 10 cosine-scheduled Euler steps of
the DiT with classifier-free guidance 0.7 inside, from a fixed noise buffer (upstream draws it at
construction: `torch.manual_seed(0); torch.randn(1, 80, 15000)`; frame t always takes column t).

`FlowRun` is one request's decode position: the DiT caches of every Euler step and CFG row for the
frames done so far (block-causal mode only), so a chunk costs its new frames only.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import nn

from ..flowlm.flow_matching import guided, speaker_condition, time_span
from .config import FlowConfig
from .dit import DiT, DiTCache


class PreLookahead(nn.Module):
    def __init__(self, in_channels: int, channels: int, lookahead: int) -> None:
        super().__init__()
        self.lookahead = lookahead
        self.conv1 = nn.Conv1d(in_channels, channels, kernel_size=lookahead + 1)
        self.conv2 = nn.Conv1d(channels, in_channels, kernel_size=3)

    def forward(self, x: torch.Tensor, context: torch.Tensor | None) -> torch.Tensor:
        """x [B, N, C]; context [B, lookahead, C] = the tokens after x (None: zeros, the utterance end)."""
        y = x.transpose(1, 2)
        if context is None:
            y = F.pad(y, (0, self.lookahead))
        else:
            y = torch.cat([y, context.transpose(1, 2)], dim=2)
        y = F.leaky_relu(self.conv1(y))
        y = self.conv2(F.pad(y, (2, 0)))
        return y.transpose(1, 2) + x


class CFMWrapper(nn.Module):
    def __init__(self, cfg: FlowConfig) -> None:
        super().__init__()
        self.estimator = DiT(cfg.dit)


class FlowWeights(nn.Module):
    """The state dict of flow.pt."""

    def __init__(self, cfg: FlowConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.input_embedding = nn.Embedding(cfg.vocab_size, cfg.input_size)
        self.spk_embed_affine_layer = nn.Linear(cfg.spk_embed_dim, cfg.output_size)
        self.pre_lookahead_layer = PreLookahead(cfg.input_size, cfg.lookahead_channels, cfg.pre_lookahead_len)
        self.decoder = CFMWrapper(cfg)


@dataclass
class FlowRun:
    """One request's flow state: its conditioning and, in block-causal mode, the DiT caches of the
    frames decoded so far ([Euler step][CFG row])."""

    spk: torch.Tensor  # [80] speaker projection
    prompt_tokens: torch.Tensor  # [P] int64
    prompt_feat: torch.Tensor  # [2P', 80]
    caches: list[list[DiTCache]] = field(default_factory=list)
    frames: int = 0  # mel frames (prompt included) whose caches are kept


class Flow:
    def __init__(self, weights: FlowWeights, noise: torch.Tensor) -> None:
        self.w = weights
        self.cfg = weights.cfg
        self.noise = noise  # [80, 15000]

    def new_run(
        self, prompt_tokens: torch.Tensor, prompt_feat: torch.Tensor, embedding: torch.Tensor
    ) -> FlowRun:
        dev = self.noise.device
        spk = speaker_condition(self.w.spk_embed_affine_layer, embedding, dev, self.noise.dtype)
        return FlowRun(spk, prompt_tokens.to(dev).long().reshape(-1), prompt_feat.to(dev, self.noise.dtype))

    def mu(self, run: FlowRun, tokens: torch.Tensor, finalize: bool) -> torch.Tensor:
        """mu [2 * n, 80] for all tokens (prompt first); `finalize=False`: the last `pre_lookahead_len`
        tokens only look ahead (no frames of their own)."""
        allt = torch.cat([run.prompt_tokens, tokens.to(run.prompt_tokens.device).long()])
        emb = self.w.input_embedding(allt.clamp(min=0))[None]
        L = self.cfg.pre_lookahead_len
        if finalize:
            h = self.w.pre_lookahead_layer(emb, None)
        else:
            h = self.w.pre_lookahead_layer(emb[:, :-L], emb[:, -L:])
        return h[0].repeat_interleave(self.cfg.token_mel_ratio, dim=0)

    def solve(
        self, runs: list[FlowRun], mus: list[torch.Tensor], starts: list[int], streaming: bool, keep: bool
    ) -> list[torch.Tensor]:
        """Mel [n_b, 80] of frames starts[b]..len(mus[b]) for each row, all rows in one batch (x2 for CFG).
        Rows with `keep` extend their caches (block-causal mode; `starts[b]` must be run.frames)."""
        dev, dtype = self.noise.device, self.noise.dtype
        cfg = self.cfg
        B = len(runs)
        lengths = [int(m.shape[0]) - s for m, s in zip(mus, starts, strict=True)]
        T = max(lengths)
        D = cfg.dit.mel_dim
        x = torch.zeros(B, T, D, device=dev, dtype=dtype)
        mu = torch.zeros(2 * B, T, D, device=dev, dtype=dtype)
        cond = torch.zeros(2 * B, T, D, device=dev, dtype=dtype)
        spks = torch.zeros(2 * B, cfg.output_size, device=dev, dtype=dtype)
        for b, (r, m, s, n) in enumerate(zip(runs, mus, starts, lengths, strict=True)):
            x[b, :n] = self.noise[:, s : s + n].T
            mu[2 * b, :n] = m[s:]
            p = r.prompt_feat.shape[0]
            if s < p:
                cond[2 * b, : min(p - s, n)] = r.prompt_feat[s : s + n]
            spks[2 * b] = r.spk
        span = time_span(cfg.n_timesteps, cfg.t_scheduler, dtype).to(dev)
        t, dt = span[0:1], span[1] - span[0]
        est = self.w.decoder.estimator
        lens2 = [n for n in lengths for _ in range(2)]
        for step in range(1, len(span)):
            if keep:
                caches = [r.caches[step - 1][k] for r in runs for k in range(2)]
            else:
                caches = [est.empty_cache(dev, dtype)] * (2 * B)
            v, kept = est(
                x.repeat_interleave(2, dim=0), mu, cond, spks, t.expand(2 * B), lens2, caches, streaming, keep
            )
            if kept is not None:
                for b, r in enumerate(runs):
                    r.caches[step - 1] = kept[2 * b : 2 * b + 2]
            v = v.view(B, 2, T, D)
            v = guided(v[:, 0], v[:, 1], cfg.inference_cfg_rate)
            x = x + dt * v
            t = t + dt
            if step < len(span) - 1:
                dt = span[step + 1] - t
        if keep:
            for r, m in zip(runs, mus, strict=True):
                r.frames = int(m.shape[0])
        return [x[b, :n] for b, n in enumerate(lengths)]

    def init_caches(self, run: FlowRun) -> None:
        est = self.w.decoder.estimator
        run.caches = [
            [est.empty_cache(self.noise.device, self.noise.dtype) for _ in range(2)]
            for _ in range(self.cfg.n_timesteps)
        ]
        run.frames = 0

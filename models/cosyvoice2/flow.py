"""CosyVoice 2's flow (upstream CausalMaskedDiffWithXvec + CausalConditionalCFM) with flow.pt's names:
speech tokens (prompt first) -> embedding -> UpsampleConformerEncoder (2 mel frames per token) -> Linear
to 80 (mu) -> 10 cosine-scheduled Euler steps of the UNet estimator with classifier-free guidance 0.7
(2 rows: conditioned, and zeros for mu, speaker and prompt mel), from upstream's construction-time noise
(`torch.manual_seed(0); torch.randn(1, 80, 15000)`, frame t always takes column t).

`FlowRun` keeps a request's encoder cache and one estimator cache per Euler step (both CFG rows), so a
streamed chunk (block-causal) costs its new frames; `full` is the whole utterance with full attention
(upstream's stream=False pass and its last streamed chunk).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import nn

from ..flowlm.flow_matching import guided, speaker_condition, time_span
from .config import FlowConfig
from .encoder import LOOKAHEAD, EncoderCache, UpsampleConformerEncoder
from .estimator import Estimator, EstimatorCache

NOISE_FRAMES = 50 * 300  # CausalConditionalCFM: torch.randn([1, 80, 50 * 300]) after seeding 0


class CFM(nn.Module):
    def __init__(self, cfg: FlowConfig) -> None:
        super().__init__()
        self.estimator = Estimator(cfg.decoder)


class FlowWeights(nn.Module):
    """The state dict of flow.pt."""

    def __init__(self, cfg: FlowConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.input_embedding = nn.Embedding(cfg.vocab_size, cfg.input_size)
        self.spk_embed_affine_layer = nn.Linear(cfg.spk_embed_dim, cfg.output_size)
        self.encoder = UpsampleConformerEncoder(cfg.encoder, cfg.input_size)
        self.encoder_proj = nn.Linear(cfg.encoder.output_size, cfg.output_size)
        self.decoder = CFM(cfg)


def flow_noise() -> torch.Tensor:
    g = torch.Generator().manual_seed(0)
    return torch.randn(1, 80, NOISE_FRAMES, generator=g)[0]


@dataclass
class FlowRun:
    """One request's flow state (streamed chunks)."""

    spk: torch.Tensor  # [80]
    prompt_tokens: torch.Tensor  # [P]
    prompt_feat: torch.Tensor  # [2P, 80]
    enc: EncoderCache
    steps: list[EstimatorCache] = field(default_factory=list)
    frames: int = 0  # mel frames (prompt included) done


class Flow:
    def __init__(self, weights: FlowWeights, noise: torch.Tensor) -> None:
        self.w, self.cfg, self.noise = weights, weights.cfg, noise  # noise [80, 15000]

    def new_run(
        self, prompt_tokens: torch.Tensor, prompt_feat: torch.Tensor, embedding: torch.Tensor
    ) -> FlowRun:
        dev, dt = self.noise.device, self.noise.dtype
        spk = speaker_condition(self.w.spk_embed_affine_layer, embedding, dev, dt)
        return FlowRun(spk, prompt_tokens.to(dev).long().reshape(-1), prompt_feat.to(dev, dt),
                       self.w.encoder.empty_cache(dev, dt), [{} for _ in range(self.cfg.n_timesteps)])

    def _embed(self, run: FlowRun, tokens: list[int]) -> torch.Tensor:
        ids = torch.cat([run.prompt_tokens, torch.tensor(tokens, dtype=torch.long, device=self.noise.device)])
        return self.w.input_embedding(ids.clamp(min=0))

    def chunk(self, run: FlowRun, tokens: list[int]) -> torch.Tensor:
        """Streamed (block-causal) mel [2n, 80] of the tokens after those done, `tokens` = every generated
        token so far, the last 3 being look-ahead only."""
        emb = self._embed(run, tokens)
        s, e = run.enc.tokens, emb.shape[0] - LOOKAHEAD
        left = min(2, s)
        h = self.w.encoder(emb[s - left: e], left, emb[e:], run.enc, streaming=True)
        return self._solve(run, self.w.encoder_proj(h), run.steps, streaming=True)

    def full(self, run: FlowRun, tokens: list[int]) -> torch.Tensor:
        """Mel [2N, 80] of every generated token, full attention, no look-ahead (upstream's finalize)."""
        emb = self._embed(run, tokens)
        enc = self.w.encoder.empty_cache(self.noise.device, self.noise.dtype)
        mu = self.w.encoder_proj(self.w.encoder(emb, 0, None, enc, streaming=False))
        enc.kv = []  # the encoder's keys/values are not read again either
        steps: list[EstimatorCache] = [{} for _ in range(self.cfg.n_timesteps)]
        fresh = FlowRun(run.spk, run.prompt_tokens, run.prompt_feat, enc, steps)
        # nothing follows a full pass: each Euler step's caches are dropped once the step is done, so the
        # pass holds one step's keys/values (not all ten) beside its activations
        return self._solve(fresh, mu, fresh.steps, streaming=False, keep=False)

    def _solve(
        self, run: FlowRun, mu: torch.Tensor, caches: list[EstimatorCache], streaming: bool, keep: bool = True
    ) -> torch.Tensor:
        """Euler steps over frames run.frames.. (mu [n, 80]) -> mel [n', 80] of the generated ones; `keep`:
        leave each step's caches for the next chunk (streaming), else drop them after the step."""
        cfg = self.cfg
        dev, dt = self.noise.device, self.noise.dtype
        s, n = run.frames, mu.shape[0]
        p = run.prompt_feat.shape[0]
        x = self.noise[:, s: s + n][None]
        mu2 = torch.zeros(2, 80, n, device=dev, dtype=dt)
        mu2[0] = mu.T
        cond = torch.zeros(2, 80, n, device=dev, dtype=dt)
        if s < p:
            cond[0, :, : min(p - s, n)] = run.prompt_feat[s: s + n].T
        spks = torch.zeros(2, 80, device=dev, dtype=dt)
        spks[0] = run.spk
        span = time_span(cfg.n_timesteps, cfg.t_scheduler, dt, dev)
        t, dtt = span[0], span[1] - span[0]
        est = self.w.decoder.estimator
        for step in range(1, len(span)):
            v = est(x.expand(2, -1, -1), mu2, t.expand(2), spks, cond, caches[step - 1], s, streaming)
            if not keep:
                caches[step - 1].clear()
            v = guided(v[:1], v[1:], cfg.inference_cfg_rate)
            x = x + dtt * v
            t = t + dtt
            if step < len(span) - 1:
                dtt = span[step + 1] - t
        run.frames = s + n
        first = max(0, p - s)
        return x[0, :, first:].T

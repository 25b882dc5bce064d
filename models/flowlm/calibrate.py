"""Make a random tiny checkpoint stop naturally: greedy decoding of one text with the first saved speaker
ends after exactly n tokens (for the parity tests, which need a natural stop after >= 60 tokens).

Every stop row of the LM head (ids >= 6561) is zeroed first (random logits of the 6561 speech ids always
beat 0, so decoding never stops); then the EOS row (6562; upstream's min_len masks only 6561) becomes
alpha * u, u the direction of step n's hidden state away from the earlier ones, with alpha chosen so EOS
wins at step n and loses at every step before it. The tokens before n are unchanged (only stop rows moved).
"""

from __future__ import annotations

from pathlib import Path

import torch

from ..base import Row, SamplingParams, SynthesisRequest


def _greedy_hidden(program, text: str, steps: int) -> list[torch.Tensor]:
    req = SynthesisRequest(text=text, sampling=SamplingParams(greedy=True), fixed_frames=steps)
    prompt = program.prepare(req)
    page = 16
    n = -(-(prompt.length + steps + 1) // page)
    program.init_kv(num_pages=n, page_size=page)
    row = Row(request_id=0, prompt=prompt, pages=list(range(n)))
    program.trace_hidden = []
    out = program.prefill([row])[0]
    while not out.done:
        out = program.decode([row])[0]
    hidden, program.trace_hidden = program.trace_hidden, None
    return hidden


def calibrate_eos(
    root: Path, text: str, n: int, program_cls: type, margin: float = 0.05
) -> int:
    """Rewrite root/llm.pt so greedy `text` stops after n tokens (or the first feasible n' in n..n+40);
    returns n'. `program_cls`: the family's program that loads root (a head with a bias, as CosyVoice
    2's, has its stop entries zeroed too)."""
    path = root / "llm.pt"
    sd = torch.load(path, weights_only=True)
    w = sd["llm_decoder.weight"]
    stop = 6561
    w[stop:] = 0
    if "llm_decoder.bias" in sd:
        sd["llm_decoder.bias"][stop:] = 0
    torch.save(sd, path)
    program = program_cls.load(str(root))
    hidden = torch.stack(_greedy_hidden(program, text, n + 41)).double()
    logits = hidden @ w.double().T
    if "llm_decoder.bias" in sd:
        logits = logits + sd["llm_decoder.bias"].double()
    best = logits[:, :stop].max(dim=1).values
    for target in range(n, n + 41):
        u = hidden[target] - hidden[:target].mean(0)
        u = u / u.norm()
        s = hidden @ u
        if s[target] <= 0:
            continue
        alpha = (best[target] + margin) / s[target]
        before = alpha * s[:target]
        if bool((before < best[:target] - margin).all()):
            w[stop + 1] = (alpha * u).to(w.dtype)
            torch.save(sd, path)
            return target
    raise RuntimeError(f"no greedy stop at {n}..{n + 40} tokens is reachable for {text!r}")

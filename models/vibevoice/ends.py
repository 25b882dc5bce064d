"""Calibrate a tiny random VibeVoice so that seeded generation of CALIBRATION_TEXT ends by itself after
CALIBRATION_FRAMES frames, with this package's own program (no transformers): the rule of hf_build.py's
`calibrate_ends`, recorded on our program instead of transformers' generate (the two agree to float
rounding, tests/test_vibevoice_parity.py; the calibration's margin is 1 on a scale where they differ by
~1e-6).

1. Loudness: generate CALIBRATION_FRAMES frames with the diffusion token forced, scale the decoder's
   output conv so the audio peaks at 0.5 (random convs are loud).
2. Ends: force CALIBRATION_FRAMES + 1 steps again and record, per step, the conditional hidden state h
   and the token guidance's u. The LM head is the tiny's own (untied), so its rows do not change what the
   LM reads: while the diffusion token is picked, the trajectory does not depend on them. With z = g h -
   (g - 1) u (what the guided argmax reads), d = the least-norm solution of z_t . d = +1 for the first
   CALIBRATION_FRAMES steps and -1 at the next; the rows become diffusion = +d/2, eos = -d/2, audio_bos =
   audio_eos = 0.
3. Check: a free seeded run ends with eos after exactly CALIBRATION_FRAMES frames.
"""

from __future__ import annotations

from pathlib import Path

import torch

from .hf_build import CALIBRATION_FRAMES, CALIBRATION_SEED, CALIBRATION_TEXT
from .shards import write_weights

PEAK = 0.5
HEAD_CONV = "model.audio_tower.decoder.head.conv."


def _program(root: Path, tensors: dict[str, torch.Tensor]):
    from .program import VibeVoiceProgram

    write_weights(root, iter(sorted(tensors.items())), torch.float32)
    return VibeVoiceProgram.load(str(root), dtype="float32")


def _forced(prog, steps: int, seen: list[tuple[torch.Tensor, torch.Tensor]] | None = None):
    """generate_with, the diffusion token picked at every step (recording h and u when asked)."""
    from .reference import generate_with

    token = prog.cfg.audio_token_id

    def pick(h, hu, guid):
        if seen is not None:
            seen.append((h[0].double(), hu[0].double()))
        return [token] * h.shape[0]

    prog._tokens = pick  # this instance only: the calibration's forced decoding
    return generate_with(prog, CALIBRATION_TEXT, CALIBRATION_SEED, max_frames=steps)


def calibrated_tensors(root: Path, tensors: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """`tensors` (a tiny checkpoint's, float32) with the loudness and the ends set; `root` holds the
    checkpoint's side files and is used to load the program (its weights file is rewritten). Runs on one
    thread: the tiny's ops are too small to share, and on a busy host two threads made it 25x slower."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return _calibrate(root, tensors)
    finally:
        torch.set_num_threads(threads)


def _calibrate(root: Path, tensors: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    n = CALIBRATION_FRAMES
    _, audio = _forced(_program(root, tensors), n)
    peak = float(abs(audio).max())
    if not peak > 0:
        raise RuntimeError("the tiny decoder's calibration audio is silent: cannot set its loudness")
    for part in ("weight", "bias"):
        tensors[HEAD_CONV + part] = tensors[HEAD_CONV + part] * (PEAK / peak)
    prog = _program(root, tensors)
    seen: list[tuple[torch.Tensor, torch.Tensor]] = []
    _forced(prog, n + 1, seen)
    if len(seen) != n + 1:
        raise RuntimeError(f"recorded {len(seen)} steps, expected {n + 1}")
    g = prog.gen.guidance_scale
    z = torch.stack([g * h - (g - 1) * u for h, u in seen])
    y = torch.ones(n + 1, dtype=torch.float64)
    y[-1] = -1.0
    d = torch.linalg.lstsq(z, y[:, None]).solution[:, 0]
    if (torch.sign(z @ d) != y).any():
        raise RuntimeError("the recorded trajectory cannot be separated: widen the tiny LM")
    c = prog.cfg
    head = tensors["lm_head.weight"].clone()
    head[c.audio_token_id] = (d / 2).float()
    head[c.eos_token_id] = (-d / 2).float()
    head[c.audio_bos_token_id] = 0.0
    head[c.audio_eos_token_id] = 0.0
    tensors["lm_head.weight"] = head
    from .reference import generate_with

    tokens, _ = generate_with(_program(root, tensors), CALIBRATION_TEXT, CALIBRATION_SEED, max_frames=n + 10)
    frames = sum(t == c.audio_token_id for t in tokens)
    if frames != n or tokens[-1] != c.eos_token_id:
        raise RuntimeError(f"calibration check: {frames} frames (last token {tokens[-1]}), expected {n} "
                           f"then eos")
    return tensors

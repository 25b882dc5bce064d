"""Cost profiles for VibeVoice-1.5B on the simulated GPUs, from arithmetic on its published sizes
(family.py VIBEVOICE_15B) with the priors of models/sim_priors.py (BW_EFF 0.8, FLOP_EFF 0.5, 2.5 us per
kernel). Nothing is fitted: no published serving capacity exists for VibeVoice. Two settings:
  * "pessimistic" (`--gpu h100`, the default): the per-row cost x ROW_INEFFICIENCY (6.2, Qwen3-TTS's fitted
    per-row cost on H100 over its own arithmetic, carried over as the other families' profiles do) and the
    codec convolutions at half the FLOP prior;
  * "optimistic" (`--gpu h100-optimistic`): the arithmetic at the priors as is.

The design being priced (models/vibevoice/program.py): the codec is inside the LM loop, so one decode step
of a row is a whole generate iteration and the codec lane only unpacks PCM (~0 cost). A step of b rows:
  * the LM (Qwen2.5-1.5B: 28 layers, 1536 wide, 12/2 heads of 128, MLP 8960) over 3 sequences per row:
    the conditional one, the token guidance's and the diffusion negative (CFG 1.3: both guidance passes
    every frame), its weights read once per step; the LM head only for the 4 tokens that can be picked;
  * the diffusion head (4 adaLN SwiGLU layers, 1536 wide, MLP 4608, ~123 M params) x SOLVER_STEPS (10)
    solver steps, each over 2 rows per request (the CFG pair): its weights read 10 times per step (they
    stay out of L2 at 246 MB bf16), its FLOPs 2 x 10 x 2 x params per row;
  * the acoustic decoder (sigma-VAE, 32 filters, ratios 8,5,5,4,2,2 up to 3200 samples, depths 8,3,3,3,3,3,3
    from the top) and the semantic encoder (the same stack downward, 128-d out) on one frame per row:
    their weights read once per step, their conv FLOPs per row (models/sim_codecs.py `vae_codec_frame`).
    decode_ms(b) = (LM + 10 x head + decoder + encoder weights) bf16 / (BW x BW_EFF) + kernels x LAUNCH_US
                 + b x row_ms     (3 x KV of CTX positions + FLOPs: 3 x LM + 20 x head + codec convs)
Requests are width-1 rows in the sim (SimSpec.cfg_scale None): the two guidance sequences are priced inside
row_ms instead, as they always run (guidance 1.3 is the release's default).
A request's average context: PROMPT (60 tokens: the system line and ~25 of text) + half its frames
(LibriTTS test-clean at 15 chars/s: ~6.5 s = 49 frames at 7.5 Hz): CTX = 85 positions on the conditional
sequence, 25 on each guidance sequence.

Write both profiles of a GPU (no fit to run):

    .venv/bin/python -m voxcli.bench.calibration --family vibevoice   # recipes/gpus/h100-*vibevoice-1.5b.toml
"""

from __future__ import annotations

from ..sim_codecs import diffusion_head_params, vae_codec_frame, vae_codec_kernels
from ..sim_cost import DATASHEET, DECODE, CostShape
from ..sim_shapes import InLoopCodec, KvRead, Prefill, Stack

PROMPT_TOKENS = 60
CTX_POSITIONS = PROMPT_TOKENS + 25
GUIDE_POSITIONS = 25
SOLVER_STEPS = 10
HEAD_KERNELS = 4 * 8 + 8  # per solver step: 4 adaLN layers (~8 kernels each), the final layer and the update

COST = CostShape(
    model="vibevoice-1.5b",
    label="vibevoice",
    stacks=(
        # weights read once, kernels and FLOPs for 3 sequence groups; the LM head only for 4 tokens
        Stack("lm", head=(4,), launches=3, row_passes=3),
        # SOLVER_STEPS passes, each over the CFG pair's 2 rows
        Stack("head", reads=SOLVER_STEPS, shape=diffusion_head_params, pass_kernels=HEAD_KERNELS,
              row_passes=2 * SOLVER_STEPS),
    ),
    row_reads=(KvRead("kv", "lm", CTX_POSITIONS + 2 * GUIDE_POSITIONS),),
    extra_kernels=4,
    prefill=Prefill(PROMPT_TOKENS, launches=False, weights="first"),
    # the codec lane only unpacks 3200 samples a frame: a copy
    codec=InLoopCodec("codec", vae_codec_frame, vae_codec_kernels, lane_c0_ms=0.005, lane_frame_ms=0.0005),
    frames_ref=10,
    values={"solver_steps": SOLVER_STEPS, "head_rows": 2 * SOLVER_STEPS},
    per_setting={"how": {
        "pessimistic": "arithmetic row x {row_inefficiency:.1f} (Qwen's H100 fit), codec convs at half the "
        "FLOP prior; nothing fitted",
        "optimistic": "the arithmetic per-row cost, nothing fitted",
    }},
    head=(
        "Written by `python -m voxcli.bench.calibration --family vibevoice`: VibeVoice-1.5B on {gpu}, "
        "setting {setting!r}",
        "row_ms {how}. Derivation and assumptions in models/vibevoice/sim.py's docstring.",
        DATASHEET,
        "a step reads {step_weight_bytes/1e9:.3f} GB of weights (LM {params_lm/1e9:.3f} G params, "
        "{solver_steps} head passes of {params_head/1e6:.1f} M, codec {codec_params/1e6:.1f} M); "
        "{kernels} kernels x {launch_us} us",
        DECODE + ": 3 LM sequences, {head_rows} head rows, {codec_flops/1e9:.2f} GFLOP of codec convs per "
        "frame)",
        "codec lane: unpacking the PCM the LM step decoded (no second decode)",
    ),
)
CALIBRATION = COST.calibration(__doc__ or "")

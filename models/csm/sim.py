"""Cost profiles for CSM-1B (sesame/csm-1b) on the simulated GPUs, from arithmetic on its published sizes
(models/csm/family.py CSM_1B: the sizes of its config.json) with the priors of models/sim_priors.py
(BW_EFF 0.8, FLOP_EFF 0.5, 2.5 us per kernel, the paper's SM-scaling and codec-SM facts). Nothing is fitted:
no published serving capacity exists for CSM to fit to. Two settings ship side by side:
  * "pessimistic" (`--gpu h100`, the default): the per-row cost x ROW_INEFFICIENCY (6.2, the factor
    Qwen3-TTS's fitted per-row cost on H100 exceeds its own arithmetic, carried over as Dia's and Higgs'
    profiles do) and the codec's convolutions at half the FLOP prior;
  * "optimistic" (`--gpu h100-optimistic`): the arithmetic at the priors as is.

A decode step emits one frame per row: the backbone (Llama-3.2-1B: 16 layers, 2048 wide, 32/8 heads of 64,
MLP 8192, audio head 2051) reads one position, then the depth decoder (4 layers, 1024 wide, 8/2 heads of
128, MLP 8192; its inputs projected from 2048) runs 31 passes, one per codebook 1..31, each over its own
<= 33-position cache:
    decode_ms(b) = (backbone weights + 31 x depth weights) bf16 / (BW * BW_EFF)     3.41 ms on H100
                 + kernels x LAUNCH_US   16 x 7 + 3 + 31 x (4 x 7 + 3 + 2 sampling), all in one graph
                 + b x row_ms           KV of CTX backbone positions + 2 FLOP per parameter read (the
                                        depth decoder's 31 passes included) + the depth caches
    prefill_ms   = one step + PROMPT tokens x 2 x backbone params / (FLOPS * FLOP_EFF)
Assumption: the depth decoder's weights are read from memory once per pass (its 115 M parameters, 230 MB in
bf16, do not stay in the 50 MB L2), which makes it ~79% of the step's weight traffic: the step floor is
3.6x the backbone's alone. A request's average context: PROMPT (30 text tokens: the template and ~25 of
text) + half of its frames (LibriTTS test-clean at 15 chars/s: ~6.5 s, 81 frames): CTX = 70 positions.

Codec per 1920-sample frame (Mimi's decode: the 32 codebooks summed and projected, the depthwise upsample to
25 Hz, an 8-layer 512-wide transformer at 25 Hz with a 250-position window, the SEANet decoder at ratios
8, 6, 5, 4 from 1024 channels down to 64): its conv and matmul FLOPs at FLOP_EFF (half of it pessimistic)
plus its activation traffic at BW_EFF; per call ~ 8 x 7 + 40 kernels x LAUNCH_US:
    codec_ms(b, s) = c0 x (132/s)^m + b x 10 frames x frame_ms x (132/s)^k          (Dia's structure)

Write both profiles of a GPU (no fit to run):

    .venv/bin/python -m voxcli.bench.calibration --family csm             # recipes/gpus/h100-*csm-1b.toml
"""

from __future__ import annotations

from ..sim_cost import CODEC, DATASHEET, DECODE, HOW_UNFITTED, CostShape
from ..sim_shapes import Codec, KvRead, Prefill, Stack
from ..sim_stages import mimi_frame_cost, mimi_kernels

PROMPT_TOKENS = 30
CTX_POSITIONS = PROMPT_TOKENS + 40

COST = CostShape(
    model="csm-1b",
    label="csm",
    stacks=(
        Stack("backbone", head=("vocab",), sampling=2),
        Stack("depth", head=("vocab",), reads="passes", in_proj="backbone_hidden", sampling=2),
    ),
    row_reads=(KvRead("kv", "backbone", CTX_POSITIONS), KvRead("depth", "depth", lead=2)),
    prefill=Prefill(PROMPT_TOKENS, launches=False),
    codec=Codec("codec", mimi_frame_cost, mimi_kernels),
    frames_ref=10,
    values={"ctx": CTX_POSITIONS},
    per_setting={"how": HOW_UNFITTED},
    head=(
        "Written by `python -m voxcli.bench.calibration --family csm`: CSM-1B on {gpu}, setting {setting!r}",
        "row_ms {how}. Derivation and assumptions in models/csm/sim.py's docstring.",
        DATASHEET,
        "a step reads {step_params/1e9:.3f} G params (backbone {params_backbone/1e9:.3f} G + 31 depth passes "
        "of {params_depth/1e9:.3f} G); {kernels} kernels x {launch_us} us",
        DECODE + " at ctx {ctx})",
        CODEC,
    ),
)
CALIBRATION = COST.calibration(__doc__ or "")

"""Cost profiles for Kyutai TTS 1.6B (kyutai/tts-1.6b-en_fr) on the simulated GPUs, from arithmetic on its
published sizes (models/kyutai_tts/family.py KYUTAI_TTS_1_6B: its config.json) with the priors of
models/sim_priors.py (BW_EFF 0.8, FLOP_EFF 0.5, 2.5 us per kernel, the paper's SM-scaling and codec-SM
facts). Nothing is fitted: no published serving capacity exists for it. Two settings ship side by side:
  * "pessimistic" (`--gpu h100`, the default): the per-row cost x ROW_INEFFICIENCY (6.2, the factor
    Qwen3-TTS's fitted per-row cost on H100 exceeds its own arithmetic, as CSM's and Dia's profiles carry
    over) and the codec's convolutions at half the FLOP prior;
  * "optimistic" (`--gpu h100-optimistic`): the arithmetic at the priors as is.

A decode step is one position per row and emits one frame (after the 18-step lead: the 16-step audio delay
and the acoustic codebooks' 2): the main transformer (16 layers, 2048 wide, 16 heads of 128, SiLU-gated MLP
of 5632, a cross-attention per layer over the voice's 625 conditioning positions, the text head over 8000),
then the depformer's 32 passes (4 layers, 1024 wide, a weight set per pass from the 11 of the schedule, its
input projection and one codebook head each), each over its own <= 32-position cache:
    decode_ms(b) = (main weights + 32 x depformer pass weights) bf16 / (BW * BW_EFF)
                 + kernels x LAUNCH_US   all in one graph
                 + b x row_ms          self-attention KV of CTX positions (window 500) + the cross-attention
                                       K/V of the row's voice (625 x 16 layers x 2 x 2048, read per row: a
                                       voice shared by rows is not deduplicated) + 2 FLOP per parameter read
    prefill_ms   = one step (a request's prompt is one position: its text arrives as it is consumed)
Assumptions: each depformer weight set (42 M parameters, 84 MB in bf16) is read from memory once per pass
(it does not stay in the 50 MB L2), so the depformer is ~60% of a step's weight traffic; CFG is distilled
(one pass per row, no doubled batch); a request's average context is half its frames plus the lead (an
~6.5 s utterance: 81 frames + 18 lead -> CTX 60 positions).

Codec per 1920-sample frame: Mimi's decoder, as CSM's (the same released Mimi; moshi's weight names).

Write both profiles of a GPU (no fit to run):

    .venv/bin/python -m voxcli.bench.calibration --family kyutai_tts  # recipes/gpus/h100-*kyutai-tts-*
"""

from __future__ import annotations

from ..sim_cost import CODEC, DATASHEET, DECODE, HOW_UNFITTED, CostShape
from ..sim_shapes import Codec, KvRead, Prefill, Stack
from ..sim_stages import mimi_frame_cost, mimi_kernels

CTX_POSITIONS = 60
CROSS_POSITIONS = 625  # 5 voice slots x 125 (moshi TTSModel.max_speakers)

COST = CostShape(
    model="kyutai-tts-1.6b",
    label="kyutai-tts",
    stacks=(
        # fused qkv + out (no grouped KV), cross q + out (4 more kernels a layer), the text head
        Stack("main", head=("text_vocab",), cross=True, layer_kernels=4, sampling=2),
        Stack("depth", head=("vocab",), reads="passes", in_proj="main_hidden", sampling=2),
    ),
    row_reads=(
        KvRead("kv", "main", CTX_POSITIONS),
        KvRead("cross", "main", CROSS_POSITIONS, width=("cross_heads", "cross_head_dim")),
        KvRead("depth", "depth", lead=1),
    ),
    prefill=Prefill(1, launches=False),  # a request's prompt is one position: its text arrives as consumed
    codec=Codec("codec", mimi_frame_cost, mimi_kernels),  # the released Mimi decoder, as CSM's
    frames_ref=10,
    values={"ctx": CTX_POSITIONS},
    per_setting={"how": HOW_UNFITTED},
    head=(
        "Written by `python -m voxcli.bench.calibration --family kyutai_tts`: Kyutai TTS 1.6B on {gpu}, "
        "setting {setting!r}",
        "row_ms {how}. Derivation and assumptions in models/kyutai_tts/sim.py's docstring.",
        DATASHEET,
        "a step reads {step_params/1e9:.3f} G params (main {params_main/1e9:.3f} G + 32 depformer passes of "
        "{params_depth/1e9:.3f} G); {kernels} kernels x {launch_us} us",
        DECODE + " at ctx {ctx})",
        CODEC,
    ),
)
CALIBRATION = COST.calibration(__doc__ or "")

"""Cost profiles for the simulated GPUs (Qwen3-TTS 1.7B), derived from micro facts only.

Nothing here is fitted to a capacity except ONE parameter per calibration; everything else comes from
published per-call latencies, the SM-scaling fact, datasheet bandwidth/FLOPs and FLOP/byte arithmetic on
the model's dimensions. `run` (models/qwen3_tts/sim_fit.py, `python -m voxcli.bench.calibration
--family qwen3_tts`) fits that one parameter against ONE published capacity
point and then predicts the others with the simulator. Two calibrations differ only in the backbone step
(LM lane: talker step + 15 depth-transformer passes + 16 samplings, whole device):

v1, "step-floor" (fitted: `step_floor_ms`, against sync2 @ 90% = 38 req/s):

    decode_ms(b) = step_floor_ms                                  # latency floor: ~770 sequential
                                                                  # kernels + 16 samplings (FITTED)
                 + weight_bytes / (BW * BW_EFF)                   # every weight read once per step
                 + b * ctx * kv_bytes_per_token / (BW * BW_EFF)   # talker KV reads per row
                 + b * flops_per_row / (FLOPS * FLOP_EFF)         # 2 FLOP per parameter per row

v2, "per-row" (fitted: `row_ms`, the marginal cost of one more row in a step, against full @ 90% =
48 req/s on H100). The floor is arithmetic instead of fitted:

    decode_ms(b) = weight_bytes / (BW * BW_EFF)                   # 1.98 ms on H100
                 + kernels_per_step * LAUNCH_US                   # 769 kernels x 2.5 us = 1.92 ms
                 + b * row_ms                                     # FITTED (H100); other GPUs scale it
                                                                  # by their arithmetic per-row cost
    kernels_per_step = 28 talker layers x 7 + 3  +  15 passes x (5 layers x 7 + 3) = 199 + 570 = 769,
    7 kernels per fused layer (norm+QKV GEMM, RoPE+KV append, attention, O-proj+residual, norm+gate/up
    GEMM, SiLU*mul, down+residual) and 3 per model/pass (embedding/projection, norm+head, sampling);
    LAUNCH_US = 2.5 us is the gap plus ramp/drain of one small kernel replayed from a CUDA graph on
    Hopper (a prior, like BW_EFF). v2 tests the diagnosis that v1's per-row cost (KV + FLOPs at 50% of
    peak: 0.0135 ms/row on H100) is several times too cheap, so that v1's backbone is never the
    bottleneck of the split design.

The SM scaling, the codec and the interference prior are the shared ones (models/sim_priors.py).

same step floor (same kernel count, similar clocks); v2 the same per-kernel overhead and a per-row cost
scaled like the arithmetic one (the fitted inefficiency carries over). Both take the codec's per-SM speed
equal to H100's (no codec micro facts exist for them): stated assumptions, checked against the paper's
B200 result where possible.

116/16 (issue 17; paper 34 req/s): at 60 s per rate the honest sim serves 27 (optimistic: 28), 1.05x the
16-SM codec's own bound (25.6 req/s from the §2.3 latencies above), where the paper's 34 is 1.33x it: the
real device had the whole-GPU urgent lane decode a quarter of the chunks. The sim's urgent lane has the
room (8 chunks in 5.7 ms on the whole device) but gets few of them: a background batch of 32 chunks takes
143 ms on 16 SMs, longer than the urgent margin (100 ms), so the chunks it launches whose deadlines are
100-143 ms away finish late (stalls) instead of turning urgent. Not a cost-table effect: the background
lane's batch choice (scheduler.py `_background_batch`, leaving to the urgent lane what a batch would make
late) is what would change it; not tuned here, since nothing published gives the paper's batch rule.

B200's codec (issue 17), two settings side by side:
  b200              optimistic: the codec's per-SM speed is H100's (`codec_per_sm` 1.0; a Blackwell SM
                    is no slower than a Hopper SM at the same clocks). The codec on 64 SMs then sustains
                    ~99 req/s, the split rule of the paper (§3.1: the split that gives the backbone the most
                    throughput while the codec keeps up at the target load) would pick 48/96, not 84/64,
                    and 84/64 simulates at ~2x the published 52 req/s.
  b200-pessimistic  `codec_per_sm` 0.565: what the paper's own choice implies. 84/64 chosen at ~52 req/s
                    means a 64-SM codec keeps up there and a 56-SM one does not: 64 x 1.54 x f >= 52 >
                    56 x 1.54 x f (1.54 req/s per SM: H100's codec bound per SM), f in [0.53, 0.60), the
                    middle taken. It is a second parameter read off the B200 result (no B200 codec latency
                    is published); what would replace it: a measured B200 codec latency at 1 and 16 chunks
                    (scripts/gpu_check.py writes recipes/gpus/<gpu>.measured.toml), e.g. kernels tuned for
                    Hopper (PyTorch 2.8 / CUDA 12.8 on early Blackwell) running the codec at half speed.
"""

from __future__ import annotations

from functools import partial

from .. import sim_paper
from ..registry import sim_spec_for
from ..sim_cost import CostShape
from ..sim_paper import FITTED_NAME, MODELS, HonestSim, PaperFit
from ..sim_priors import GPUS
from ..sim_shapes import KvRead, PaperCodec, Prefill, Stack

MODEL = "qwen3-tts-1.7b"
CTX_TOKENS = 64  # average talker context per row during decode (~10 prompt rows + half of ~98 frames)
KV = KvRead("kv", "talker", CTX_TOKENS)

COST = CostShape(
    model=MODEL,
    label="qwen3-tts",
    stacks=(
        Stack("talker", head=("codec_vocab",)),
        # one depth-transformer pass: its layers, the 2048->1024 projection, one lm head
        Stack("predictor", head=("vocab",), reads="passes", in_proj="talker_hidden"),
    ),
    row_reads=(KV,),
    prefill=Prefill(0),
    codec=PaperCodec(),
    frames_ref=sim_spec_for(MODEL).chunk.steady,  # the paper's chunks (10 frames), as the family's schedule
    head=(),
)
PAPER = PaperFit(
    talker="talker", predictor="predictor", kv=KV, sampling=16,
    # Codec traffic (assumptions, no published fact): weights ~100 M params bf16 read once per batch, and the
    # activations of a convolutional decoder upsampling 10 frames to 19,200 samples, ~4 levels of equal-sized
    # feature maps read and written ~10 times each in bf16: ~150 MB per chunk. Noise: device time / table
    # time, lognormal (kernels vary ~10% run to run). Host time per scheduler call (thread CPU time,
    # `python -m benchmarks bench_scheduler --per-call` on the 2-core dev box at 256 running rows, after
    # vectorisation): a fixed part plus a part per row of the batch.
    honest=HonestSim(codec_weight_mb=200.0, codec_chunk_mb=150.0, noise_sigma=0.1, host_call_us=20.0,
                     host_row_us=0.3),
)
TALKER, PREDICTOR = dict(COST.sizes()["talker"]), dict(COST.sizes()["predictor"])
CHUNK_FRAMES = COST.frames_ref
build_profile = partial(sim_paper.build_profile, COST, PAPER)
profile_toml = partial(sim_paper.profile_toml, COST, PAPER)
decode_ms = partial(sim_paper.decode_ms, COST, PAPER)
arithmetic_row_ms = partial(sim_paper.arithmetic_row_ms, COST, PAPER)
__all__ = ["COST", "FITTED_NAME", "GPUS", "MODELS", "PAPER", "arithmetic_row_ms", "build_profile",
           "decode_ms", "profile_toml"]

"""Cost profiles for Orpheus 3B on the simulated GPUs, from arithmetic on published sizes: NOTHING is fitted.

No serving capacity of Orpheus has been published in a form to fit to, so two settings ship side by side:
  * "pessimistic" (`--gpu h100`): the per-row decode cost is the arithmetic one times 6.2, the factor by which
    Qwen3-TTS's fitted per-row cost on H100 exceeded its own arithmetic (models/sim_priors.ROW_INEFFICIENCY,
    carried over as Dia's and Higgs' profiles carry it: the same serving stack, the same small GEMMs, paged-KV
    gathers and sampling over a 156,940-token vocabulary); SNAC runs at half the conv efficiency.
  * "optimistic" (`--gpu h100-optimistic`): the arithmetic as is.

THE SIM'S STEP IS A FRAME. Orpheus emits one token per LM step and a frame every seven (program.py); the sim
engine emits a frame per step, so a simulated decode step stands for the seven token steps of one frame
and costs 7 x a token step (floor and rows alike; `SimSpec.codebooks` = 7 codes a frame). Capacity, TTFA
(a 4-frame first chunk = 28 token steps) and the codec's load come out the same; what the sim does not show
is the finer interleaving of the real engine, which may admit or launch a codec call between the seven
steps.

Dimensions (models/orpheus/family.py): canopylabs/orpheus-3b-0.1-ft = Llama-3.2-3B (hidden 3072, 28 layers,
24 heads, 8 KV heads of 128, MLP 8192, vocab 156,940, tied embeddings) and hubertsiuzdak/snac_24khz (latent
768, decoder 1024 -> 64 channels over strides 8, 8, 4, 2, depthwise 7-tap residual convs). Per token step
(b rows):

    token_ms(b) = LM weights read once / (BW * BW_EFF)              3.21 B parameters in bf16 (the tied
                                                                    embedding read once, as the LM head)
                + kernels x LAUNCH_US                               28 x 7 + 3 + 6 (band mask, penalty,
                                                                    top-p sort/cumsum, draw, bookkeeping)
                + b x row_ms                                        KV over CTX positions / BW + 2 x params
                                                                    FLOPs + the logits row (157 k fp32)

Assumptions (stated, not fitted): a typical request is ~4 s of audio (47 frames = 329 tokens) after a
prompt of PROMPT = 30 tokens, so its average context is CTX = 30 + 165 positions; BW_EFF, FLOP_EFF,
LAUNCH_US and the SM scaling are the priors of models/sim_priors.py. The codec cost per frame is the
"whole" mode's (codec.py): a chunk of n frames decodes n + 6 frames (3 of left context, 3 held back),
charged here as (n + 6) / n per frame at the reference chunk of 16 frames (1.375 x); the "canopy" mode
decodes 4 frames per frame (4 x).

Prefill: the LM over PROMPT tokens (weights read once + 2 x params FLOPs per token).

    .venv/bin/python -m voxcli.bench.calibration --family orpheus [--gpu h100]
"""

from __future__ import annotations

from ..sim_codecs import snac_frame_cost
from ..sim_cost import CARRIED, DATASHEET, CostShape
from ..sim_shapes import Codec, KvRead, LogitsRead, Prefill, Stack

STEPS_PER_FRAME = 7
PROMPT_TOKENS = 30
CTX_POSITIONS = 30 + 165
CODEC_KERNELS = 120  # SNAC's convolutions, snakes and adds (~90) + the window gather and noise draws
CHUNK_REF = 16
WHOLE_MODE_OVERHEAD = (CHUNK_REF + 6) / CHUNK_REF

COST = CostShape(
    model="orpheus-3b",
    label="orpheus",
    # the tied embedding read as the head; 6 sampling kernels (band mask, penalty, top-p, draw, bookkeeping)
    stacks=(Stack("lm", head=("vocab",), sampling=6),),
    row_reads=(KvRead("kv", "lm", CTX_POSITIONS), LogitsRead("logits", "lm")),
    prefill=Prefill(PROMPT_TOKENS),
    codec=Codec("snac", snac_frame_cost, CODEC_KERNELS, overhead=WHOLE_MODE_OVERHEAD),
    frames_ref=CHUNK_REF,
    steps_per_frame=STEPS_PER_FRAME,
    values={"ctx": CTX_POSITIONS, "steps": STEPS_PER_FRAME, "overhead": WHOLE_MODE_OVERHEAD},
    per_setting={"carried": CARRIED},
    head=(
        "Written by `python -m voxcli.bench.calibration --family orpheus`: Orpheus 3B on {gpu}, setting "
        "{setting!r}; NO fitted",
        "parameter (nothing published to fit to); derivation in models/orpheus/sim.py.",
        DATASHEET,
        "a token step reads {step_params/1e9:.2f} B params; {kernels} kernels x {launch_us} us; token(b) = "
        "{token_floor_ms:.3f} ms + b x {token_row_ms:.4f} ms",
        "the sim's step is a frame = {steps} token steps: decode(b) = floor {floor_ms:.3f} ms + b x row "
        "{row_ms:.4f} ms (arithmetic token row {arith_row_ms:.4f} ms at ctx {ctx}{carried}",
        "codec (SNAC, whole mode x {overhead:.3f} re-decoded context): {codec_c0_ms:.3f} ms/call + "
        "{codec_frame_ms*1e3:.2f} us/frame ({codec_flops/1e9:.3f} GFLOP + {codec_act/1e6:.2f} MB per frame)",
    ),
)
CALIBRATION = COST.calibration(__doc__ or "")

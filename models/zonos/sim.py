"""Cost profiles for Zonos v0.1 (transformer) on the simulated GPUs, from arithmetic on published sizes:
NOTHING is fitted (no serving capacity of Zonos has been published). Two settings ship side by side:
  * "pessimistic" (`--gpu h100 --model zonos-v0.1`): the per-row decode cost is the arithmetic one times
    6.2, the factor by which Qwen3-TTS's fitted per-row cost on H100 exceeded its own arithmetic
    (models/sim_priors.py ROW_INEFFICIENCY), carried over as Dia's profile carries it; the DAC runs at half
    the conv efficiency.
  * "optimistic" (`--gpu h100-optimistic`): the arithmetic as is.

Dimensions (family.py ZONOS_V01; models/zonos/tiny.py SIZES["real"]): d_model 2048, 26 layers, 16 query /
4 KV heads of 128, SwiGLU MLP 8192, nine embeddings and nine heads of 1025; DAC 44.1 kHz (Dia's).
Per decode step (b rows; a request is always a CFG pair = 2 rows, each its own full sequence: no work is
shared between the two, unlike Dia's cross-attention):

    decode_ms(b) = backbone weights read once / (BW * BW_EFF)      26 layers (q,k,v,o + MLP) + 9 heads
                 + kernels x LAUNCH_US                             26 x 7 + 3 + 10 (nine embeddings summed,
                                                                   CFG combine, EOS mask, penalty, draw)
                 + b x row_ms                                      row: KV over CTX positions / BW +
                                                                   2 x params FLOPs / FLOP_EFF

Assumptions (stated, not fitted): a typical request is ~3 s of audio (258 frames) from a sentence of ~100
phonemes, so its prefix is PREFIX = 100 + 2 + 6 positions and its average decode context is
CTX = PREFIX + 9 + 129; BW_EFF, FLOP_EFF, LAUNCH_US and the SM scaling are the priors of models/sim_priors.py.
Prefill: both sequences' PREFIX + 1 positions through the backbone (FLOPs) plus one weight read.
Codec: the same DAC 44.1 kHz decoder as Dia's, so its cost is the shared DAC stage (models/sim_stages.py
dac_frame_cost), per 48-frame chunk reference.

    .venv/bin/python -m voxcli.bench.calibration --family zonos [--gpu h100]
"""

from __future__ import annotations

from ..sim_cost import CARRIED, CODEC, DATASHEET, DECODE, CostShape
from ..sim_shapes import Codec, KvRead, Prefill, Stack
from ..sim_stages import DAC_KERNELS, dac_frame_cost

PREFIX = 100 + 2 + 6
CTX_POSITIONS = PREFIX + 9 + 129

COST = CostShape(
    model="zonos-v0.1",
    label="zonos",
    # nine embeddings summed, CFG combine, EOS mask, penalty, draw: 10 sampling kernels; the nine heads
    stacks=(Stack("backbone", head=("codebooks", "head_vocab"), sampling=10),),
    row_reads=(KvRead("kv", "backbone", CTX_POSITIONS),),
    prefill=Prefill(PREFIX + 1, sequences=2),  # both sequences of the CFG pair
    codec=Codec("dac", dac_frame_cost, DAC_KERNELS),  # the same DAC 44.1 kHz decoder as Dia's
    frames_ref=48,
    values={"ctx": CTX_POSITIONS},
    per_setting={"carried": CARRIED},
    head=(
        "Written by `python -m voxcli.bench.calibration --family zonos`: Zonos v0.1 (transformer) on {gpu}, "
        "setting {setting!r}; NO fitted",
        "parameter (nothing published to fit to); derivation in models/zonos/sim.py.",
        DATASHEET,
        "backbone step reads {step_params/1e6:.1f} M params; {kernels} kernels x {launch_us} us",
        DECODE + ": KV {row_bytes/1e6:.1f} MB/row/step at ctx {ctx}{carried}",
        "every request is a CFG pair: 2 full rows (nothing shared between its sequences)",
        CODEC,
    ),
)
CALIBRATION = COST.calibration(__doc__ or "")

"""Cost profiles for Dia-1.6B on the simulated GPUs, from arithmetic on published sizes: NOTHING is fitted.

No serving capacity of Dia has been published (seed 2 reports a speedup, not a capacity), so there is
nothing to fit to. Two settings ship side by side:
  * "pessimistic" (`--gpu h100`): the per-row decode cost is the arithmetic one times 6.2, the factor by
    which Qwen3-TTS's fitted per-row cost on H100 exceeded its own arithmetic (models/qwen3_tts/sim.py, v2:
    0.0835 vs 0.0135 ms). Carried over as is (not refitted): the same serving stack, the same kind of
    inefficiency (small GEMMs, paged-KV gathers, sampling). The DAC runs at half the conv efficiency.
  * "optimistic" (`--gpu h100-optimistic`): the arithmetic as is.

Dimensions (models/dia/family.py, from the published config of nari-labs/Dia-1.6B-0626 and
descript/dac_44khz). Per decode step (b rows; a CFG request is 2 rows, the scheduler counts both):

    decode_ms(b) = decoder weights read once / (BW * BW_EFF)         18 layers: self q,k,v,o + cross q,o
                                                                     + MLP, and logits_dense (9 x 1028)
                 + kernels x LAUNCH_US                               18 x (7 + 3 cross) + 3 + 8 sampling
                 + b x row_ms                                        row: self KV over CTX positions +
                                                                     cross K/V of TEXT tokens (read every
                                                                     step) / BW + 2 x params FLOPs

Assumptions (stated, not fitted): a typical request is ~3 s of audio (258 frames) from TEXT = 100 text
bytes; its average decoder context is CTX = 16 + 129 positions; BW_EFF, FLOP_EFF, LAUNCH_US and the SM
scaling (Amdahl fractions from the paper's 93-99% on 108/132 SMs) are the priors of models/sim_priors.py.

CFG work sharing (models/dia/shared_cross.py): the unconditional sequence's cross-attention block adds
one constant per layer, the same for every request (its text is zeros: the encoder output is one vector
at every position, so the attention over it is V for any query). In rows of the setting's row_ms:
    cfg_row   = what an unconditional sequence still costs: the row less its whole cross-attention (the
                cross K/V read over TEXT tokens and the q/o projections' FLOPs) and less layer 0's
                self-attention (reused from its partner: q/k/v/o FLOPs + that layer's KV read). It keeps
                its own self-attention in layers 1.., the MLP and its logits row (the CFG combine needs
                both full logits rows: its top-k runs over the combined scores)
    cfg_group = once per batch (every pair carries the same `uncond_key`): the kernels the sharing adds
  * optimistic: those arithmetic seconds go, every other term stays: cfg_row = 1 - saved / arith_row;
    no kernel is added (the unconditional rows of the o_proj output buffer hold the constant for the
    batch's life, the existing residual add reads them; layer 0's residual add reads the partner's row).
  * pessimistic: only those same seconds go from the inflated row; the x 6.2 inefficiency (small GEMMs,
    gathers, launches) is assumed to stay whole: cfg_row = 1 - saved / (6.2 x arith_row); and the sharing
    adds one kernel per layer (the constant's add) and one per step (layer 0's result copied to the
    partners), cfg_group = (layers + 1) x LAUNCH_US / row_ms.
  Both: the encoder pass skipped at prefill is not credited (the prefill table is per batch, not per
  sequence), nor the cross pages an unconditional sequence no longer holds (memory, not time).

Prefill: the text encoder (12 layers over TEXT tokens) + the decoder's cross K/V projections + one decoder
step; per prompt position (a voice-clone prefix) one decoder row's FLOPs.

Codec (DAC 44.1 kHz decoder; a chunk of `frames_ref` = 48 frames): per frame the convolutions' FLOPs
(conv1 1024->1536 k7; four blocks of ConvTranspose(2s) + 3 residual units (k7 dilated + k1) at
1536/2^i channels, strides 8, 8, 4, 2; final conv) = ~1.6 GFLOP at FLOP_EFF, plus the snake / add passes
over the activations at BW; per call ~140 kernels (the convs, the activations, the streaming state's
gather/scatter) x LAUNCH_US. On s SMs: serial part x (132/s)^m, per-frame part x (132/s)^k with the
exponents of the paper's codec facts (sim_priors.codec_coefficients), i.e. the same structure as Qwen's.

    .venv/bin/python -m voxcli.bench.calibration --family dia [--gpu h100]
"""

from __future__ import annotations

from ..sim_cost import CARRIED, CODEC, DATASHEET, DECODE, CostShape
from ..sim_shapes import CfgShare, Codec, KvRead, Prefill, Stack
from ..sim_stages import DAC_KERNELS, dac_frame_cost, text_encoder_prefill_params

TEXT_TOKENS = 100
CTX_POSITIONS = 16 + 129
CROSS = KvRead("cross", "decoder", TEXT_TOKENS, width=("cross_kv_heads", "cross_head_dim"))

COST = CostShape(
    model="dia-1.6b",
    label="dia",
    # per layer 3 cross kernels (norm + Q GEMM, cross attention, O GEMM + residual); 8 sampling kernels
    # (CFG combine, top-k, channel filter, top-p sort/cumsum, draw, EOS bookkeeping); logits 9 x 1028
    stacks=(Stack("decoder", head=("channels", "vocab"), cross=True, layer_kernels=3, sampling=8),),
    row_reads=(KvRead("kv", "decoder", CTX_POSITIONS), CROSS),
    prefill=Prefill(TEXT_TOKENS, encoder=text_encoder_prefill_params),
    codec=Codec("dac", dac_frame_cost, DAC_KERNELS),
    frames_ref=48,
    cfg=CfgShare("decoder", CROSS, CTX_POSITIONS),
    values={"ctx": CTX_POSITIONS, "text": TEXT_TOKENS},
    per_setting={"carried": CARRIED},
    head=(
        "Written by `python -m voxcli.bench.calibration --family dia`: Dia-1.6B on {gpu}, setting "
        "{setting!r}; NO fitted",
        "parameter (nothing published to fit to); derivation in models/dia/sim.py.",
        DATASHEET,
        "decoder step reads {step_params/1e6:.1f} M params; {kernels} kernels x {launch_us} us",
        DECODE + ": KV {row_bytes/1e6:.1f} MB/row/step at ctx {ctx}, text {text}{carried}",
        "CFG sharing: an unconditional sequence costs {cfg_row:.3f} rows (its cross-attention is one "
        "constant: no {bytes_cross/1e6:.1f} MB cross K/V read, no q/o GEMMs; layer 0's self-attention "
        "reused), plus {cfg_group:.3f} rows per batch (the kernels it adds)",
        CODEC,
    ),
)
CALIBRATION = COST.calibration(__doc__ or "")

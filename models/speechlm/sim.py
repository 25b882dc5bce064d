"""Write GPU cost profiles for the unified text+audio LMs (Bagpiper-8B, OpusLM-7B) from arithmetic on
their published sizes; NOTHING is fitted (no serving capacity of them is published: seed 2 reports
speedups over ESPnet's sequential inference, not a capacity).

    .venv/bin/python -m voxcli.bench.calibration --family speechlm [--gpu h100]

recipes/gpus/<gpu>-<model>.toml (pessimistic: what `--gpu <gpu> --model <model>` loads) and
recipes/gpus/<gpu>-optimistic-<model>.toml, for model in bagpiper-8b, opuslm-7b. The structure is
models/dia/sim.py's (same priors from models/sim_priors.py: BW_EFF, FLOP_EFF, LAUNCH_US, the SM
scaling of the paper's facts):

    decode_ms(b) = backbone + lm_head weights read once / (BW * BW_EFF) + kernels x LAUNCH_US
                 + b x row_ms,  row = KV over CTX positions / BW + 2 x (backbone params + S x H x V) FLOPs

Assumptions, stated: the shared head computes only each stream's candidates (models/speechlm/head.py): in
an audio step S x 1027 rows of W_H (each stream's 1025-wide interval, eos/eot), in a text step the text
vocabulary (stream 0; the other streams only pad). A step reads both row sets (a decode batch mixes rows
in both phases); a row's FLOPs are the text share (TextPlan.share: of its steps) times the text head plus the
rest times the audio head. A typical Bagpiper-TTS request has a 60-token prompt, a text plan of
TEXT_PLAN[setting] tokens and 250 audio frames (5 s), so its average context is 60 + plan + 125; the
pessimistic row cost is the arithmetic one times the 6.2 by which Qwen3-TTS's fitted per-row cost
exceeded its arithmetic (models/qwen3_tts/sim.py v2), as Dia's is.

The text plan (what comes before the first audio frame). Published: Bagpiper generates as
[user request, CoT, rich caption, audio] (espnet2/bin/speechlm_inference.py, citing arXiv:2602.05220
2.3.2; its TTS system prompt asks the model to "first think ... then provide a detailed description of
the audio"); the text segment's decoding rules are temperature 0.6, top-k 20, min_step 1, max_step 2048
(Table 10 of that paper, PAPER_DECODING there). Not published: how long the CoT + caption of a TTS
request is (the seed paper gives no length either). Assumed: optimistic 64 tokens (a one- or two-
sentence caption), pessimistic 256 (a CoT paragraph + a detailed caption); 2048 is the hard bound. The
text phase runs without guidance (text cfg 1: one row; the companion starts with the audio). So TTFA at
an EMPTY server is at least prefill + (plan + 1) decode steps of 1 row + (1 + 7 + 10) steps of a pair
(modality pass, delay fill N - 1, first chunk) + one codec call, written into each profile's header
(Bagpiper-8B, H100: 532 ms optimistic, 1841 ms pessimistic), i.e. the bench's 200 ms TTFA SLO cannot be
met BY CONSTRUCTION by any Bagpiper-TTS request (64 steps of >= 6 ms alone). `vox bench --ttfa-slo`
reports the capacity at a TTFA bound the text phase allows instead (label it so). The sim's stand-in runs the
optimistic plan (SimSpec.lead_steps = 7 + 64 in models/speechlm/family.py) under either cost setting:
the sim's stand-in has one plan length per family, so the pessimistic plan's TTFA is this header's floor,
not a simulated figure. OpusLM-7B is given the same plan (an assumption: OpusLM's TTS task may go
straight to audio).
Codec: X-Codec's acoustic decoder (hf-audio/xcodec-hubert-general: DAC decoder, width 1024, upsampling
8, 5, 4, 2, latent 256, 320 samples per frame) plus fc2; OpusLM's ESPnet DAC is assumed to cost the same
(its published size is not in the wheel). Prefill: 2 x params FLOPs per prompt position (+ the weights).
"""

from __future__ import annotations

from dataclasses import replace

from ..sim_codecs import xcodec_frame_cost
from ..sim_cost import CODEC, DATASHEET_BARE, CostShape, calibration
from ..sim_shapes import Codec, KvRead, PhasedHead, Prefill, Stack, TextPlan
from ..sim_stages import DAC_KERNELS

MODELS = ("bagpiper-8b", "opuslm-7b")
TEXT_PLAN = {"optimistic": 64, "pessimistic": 256}  # tokens before the audio (assumed; see the docstring)
# 60 prompt tokens, 250 audio frames (5 s), the delay fill N - 1 = 7 for 8 codec streams, a first chunk of 10
# frames (the recipes' chunk.first)
PLAN = TextPlan(TEXT_PLAN, prompt=60, audio_frames=250, delay_fill=7, first_chunk=10)

BAGPIPER = CostShape(
    model="bagpiper-8b",
    label="speechlm",
    # masks, CFG merge, re-mask, top-k, softmax, multinomial, gather, phase bookkeeping: 10 sampling kernels
    stacks=(Stack("backbone", sampling=10), PhasedHead("backbone")),
    row_reads=(KvRead("kv", "backbone", PLAN.ctx()),),
    prefill=Prefill(0, token="step"),  # one step; 2 x params FLOPs per prompt position
    codec=Codec("codec", xcodec_frame_cost, DAC_KERNELS),
    frames_ref=50,
    plan=PLAN,
    values={"plan_optimistic": TEXT_PLAN["optimistic"], "plan_pessimistic": TEXT_PLAN["pessimistic"]},
    head=(
        "Written by `python -m voxcli.bench.calibration --family speechlm`: {model} on {gpu}, setting "
        "{setting!r}; NO fitted",
        "parameter (nothing published to fit to); derivation and assumptions in models/speechlm/sim.py.",
        DATASHEET_BARE,
        "step reads {step_params/1e9:.2f} G params (head {params_head/1e6:.0f} M: text + {streams} x 1027 "
        "audio rows); {kernels} kernels x {launch_us} us",
        "decode(b) = floor {floor_ms:.3f} ms + b x row {row_ms:.4f} ms (arithmetic {arith_row_ms:.4f} ms: KV "
        "{row_bytes/1e6:.1f} MB/row/step at ctx {ctx})",
        CODEC,
        "text plan assumed: {plan} tokens (setting {setting!r}; optimistic {plan_optimistic}, pessimistic "
        "{plan_pessimistic}, bound 2048); TTFA at an empty server >= {ttfa_ms:.0f} ms, so a 200 ms TTFA SLO "
        "cannot be met",
    ),
)
# OpusLM's ESPnet DAC is assumed to cost what X-Codec does (its published size is not in the wheel)
COSTS = {model: replace(BAGPIPER, model=model) for model in MODELS}
COST = COSTS["bagpiper-8b"]
CALIBRATION = calibration(__doc__ or "", tuple(COSTS.values()))

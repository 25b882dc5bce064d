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
in both phases); a row's FLOPs are the text share (text_share() of its steps) times the text head plus the
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

import argparse
from collections.abc import Mapping

from ..registry import sim_sizes
from ..sim_calibration import Calibration, Simulator
from ..sim_priors import (
    BW_EFF,
    BYTES_BF16,
    FLOP_EFF,
    GPUS,
    KERNELS_PER_LAYER,
    KERNELS_PER_MODEL,
    LAUNCH_US,
    ROW_INEFFICIENCY,
)
from ..sim_profile import codec_call_ms, render_profile, stage_profile
from ..sim_stages import dac_decoder_frame, stack_params

MODELS = ("bagpiper-8b", "opuslm-7b")
PROMPT_TOKENS = 60
AUDIO_FRAMES = 250
TEXT_PLAN = {"optimistic": 64, "pessimistic": 256}  # tokens before the audio (assumed; see the docstring)
FIRST_CHUNK = 10  # frames (the recipes' chunk.first)
DELAY_FILL = 7  # N - 1 for 8 codec streams


SAMPLING_KERNELS = 10  # masks, CFG merge, re-mask, top-k, softmax, multinomial, gather, phase bookkeeping
CODEC_KERNELS = 140
FRAMES_REF = 50


def ctx_positions(setting: str) -> int:
    return PROMPT_TOKENS + TEXT_PLAN[setting] + AUDIO_FRAMES // 2


def sizes(model: str) -> dict:
    return sim_sizes(model)


def backbone_params(s: dict) -> int:
    return stack_params(s["backbone"], 0)  # its heads are counted per phase (head_params)


def text_share(setting: str) -> float:
    """Text-plan steps per request step."""
    return TEXT_PLAN[setting] / (TEXT_PLAN[setting] + AUDIO_FRAMES)


def head_rows(s: dict) -> tuple[int, int]:
    """(text-step head rows, audio-step head rows)."""
    return s["text_vocab"] + 2, s["streams"] * 1027


def head_params(s: dict) -> int:
    """W_H rows read per step (both phases' candidates)."""
    return s["backbone"]["hidden"] * sum(head_rows(s))


def head_row_params(s: dict, setting: str) -> float:
    """W_H parameters one row multiplies per step, averaged over its text and audio steps."""
    text, audio = head_rows(s)
    share = text_share(setting)
    return s["backbone"]["hidden"] * (share * text + (1 - share) * audio)


def codec_frame(s: dict) -> tuple[float, float]:
    c = s["codec"]
    head = 2.0 * c["fc2_in"] * c["latent"] + 2.0 * c["latent"] * c["hidden"] * 7  # fc2 + conv1
    return dac_decoder_frame(c["hidden"], c["rates"], head)


def terms(model: str, gpu_name: str, setting: str) -> dict[str, float]:
    s = sizes(model)
    gpu = GPUS[gpu_name]
    bw, fl = gpu.bandwidth * BW_EFF, gpu.flops * FLOP_EFF
    b = s["backbone"]
    kv = b["layers"] * 2 * b["kv_heads"] * b["head_dim"] * BYTES_BF16 * ctx_positions(setting)
    row_flops = 2 * (backbone_params(s) + head_row_params(s, setting))
    arith_row = (kv / bw + row_flops / fl) * 1e3
    weights = (backbone_params(s) + head_params(s)) * BYTES_BF16
    kernels = b["layers"] * KERNELS_PER_LAYER + KERNELS_PER_MODEL + SAMPLING_KERNELS
    floor = weights / bw * 1e3 + kernels * LAUNCH_US / 1e3
    conv, act = codec_frame(s)
    conv_eff = 0.5 if setting == "pessimistic" else 1.0
    return {"floor_ms": floor, "arith_row_ms": arith_row, "kv_bytes": kv, "kernels": kernels,
            "row_ms": arith_row * (ROW_INEFFICIENCY if setting == "pessimistic" else 1.0),
            "prefill_ms": floor, "prefill_token_ms": 2 * (backbone_params(s) + head_params(s)) / fl * 1e3,
            "codec_c0_ms": CODEC_KERNELS * LAUNCH_US / 1e3,
            "codec_frame_ms": (conv / (fl * conv_eff) + act / bw) * 1e3,
            "conv": conv, "act": act}


def ttfa_floor_ms(t: dict[str, float], setting: str, codec_ms: float) -> float:
    """Submit -> first audio on an empty server: prefill, the text plan (1 row: no guidance in the text
    phase), the modality pass + delay fill + first chunk as a CFG pair (2 rows), one codec call."""
    def step(rows: int) -> float:
        return t["floor_ms"] + rows * t["row_ms"]

    prefill = t["prefill_ms"] + PROMPT_TOKENS * t["prefill_token_ms"]
    return prefill + TEXT_PLAN[setting] * step(1) + (1 + DELAY_FILL + FIRST_CHUNK) * step(2) + codec_ms


def build_profile(model: str, gpu_name: str, setting: str) -> dict:
    gpu = GPUS[gpu_name]
    t = terms(model, gpu_name, setting)
    name = f"{gpu.name}{'-optimistic' if setting == 'optimistic' else ''}-{model}"
    return stage_profile(name, gpu, gpu.paper_split, t, t["codec_frame_ms"], FRAMES_REF)


def profile_toml(model: str, gpu_name: str, setting: str) -> str:
    t = terms(model, gpu_name, setting)
    gpu = GPUS[gpu_name]
    s = sizes(model)
    first_chunk_ms = codec_call_ms(t["codec_c0_ms"], t["codec_frame_ms"], FRAMES_REF,
                                   FIRST_CHUNK / FRAMES_REF, gpu.sms)
    # The first lines name the command that writes the profile and the module holding its derivation.
    head = [
        f"Written by `python -m voxcli.bench.calibration --family speechlm`: {model} on {gpu_name}, "
        f"setting {setting!r}; NO fitted",
        "parameter (nothing published to fit to); derivation and assumptions in models/speechlm/sim.py.",
        f"{gpu.name}: {gpu.sms} SMs, {gpu.bandwidth / 1e12:.2f} TB/s, {gpu.flops / 1e12:.0f} TFLOP/s bf16",
        f"step reads {(backbone_params(s) + head_params(s)) / 1e9:.2f} G params (head "
        f"{head_params(s) / 1e6:.0f} M: text + {s['streams']} x 1027 audio rows); {t['kernels']} kernels x "
        f"{LAUNCH_US} us",
        f"decode(b) = floor {t['floor_ms']:.3f} ms + b x row {t['row_ms']:.4f} ms (arithmetic "
        f"{t['arith_row_ms']:.4f} ms: KV {t['kv_bytes'] / 1e6:.1f} MB/row/step at ctx "
        f"{ctx_positions(setting)})",
        f"codec: {t['codec_c0_ms']:.3f} ms/call + {t['codec_frame_ms'] * 1e3:.2f} us/frame "
        f"({t['conv'] / 1e9:.2f} GFLOP + {t['act'] / 1e6:.2f} MB per frame)",
        f"text plan assumed: {TEXT_PLAN[setting]} tokens (setting {setting!r}; optimistic "
        f"{TEXT_PLAN['optimistic']}, pessimistic {TEXT_PLAN['pessimistic']}, bound 2048); TTFA at an empty "
        f"server >= {ttfa_floor_ms(t, setting, first_chunk_ms):.0f} ms, so a "
        "200 ms TTFA SLO cannot be met",
    ]
    return render_profile(head, build_profile(model, gpu_name, setting), f"speechlm-{setting}")


def add_options(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--gpu", default="h100")


def run(args: argparse.Namespace, sim: Simulator) -> Mapping[str, str]:
    """recipes/gpus/<gpu>-<model>.toml (pessimistic) and <gpu>-optimistic-<model>.toml for both models;
    nothing is simulated."""
    names = {"pessimistic": f"{args.gpu}-{{model}}", "optimistic": f"{args.gpu}-optimistic-{{model}}"}
    return {f"recipes/gpus/{name.format(model=model)}.toml": profile_toml(model, args.gpu, setting)
            for model in MODELS for setting, name in names.items()}


CALIBRATION = Calibration(__doc__ or "", add_options, run)

"""Deterministic random-weight Qwen3-TTS checkpoints in the exact official layout.

    OUT/config.json, generation_config.json, model.safetensors, tokenizer files
    OUT/speech_tokenizer/{config.json, model.safetensors, preprocessor_config.json}

The official package loads these directories as-is (`Qwen3TTSModel.from_pretrained`), which is what
makes them usable for parity tests. Sizes:
  "tiny"       the oracle's dimensions (talker H=64, 2 layers, codebook 128, specials shifted by -1920)
  "cpu-bench"  a moderate model for CPU serving benchmarks (H=256, 4 layers, real 2048 codebook/ids)
  "0.6b", "1.7b"  the real Qwen3-TTS 12 Hz architectures (design notes section 2; 906 M / 1,917 M
               params) with the real-size speech tokenizer, for GPU benchmarks without a download
Weights: every parameter drawn from one torch.Generator(seed) at O(1) scale (so each block matters),
talker and predictor heads x8 (clear greedy margins), and the talker's EOS row set so that greedy
decoding of CAL_TEXT stops at exactly `eos_frame` frames (computed with this package's own greedy run;
only the EOS row changes, so the trajectory before it is untouched).

Real sizes differ in three ways. They keep the tiny tokenizer and its special ids (tts_pad/bos/eos
500-502, im_start/im_end from the tokenizer): the real 151,936-row text embedding admits every one of
them, and the text path's cost does not depend on which ids are used. They skip the EOS calibration
(a greedy run of a 1.7B model on a CPU is too slow, and benchmarks request fixed frame counts), so the
EOS row stays scaled down and the model practically never stops by itself. And the talker is stored
in bfloat16 like the official checkpoints, drawn tensor by tensor from a meta-device module so that
no full float32 copy is ever held.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import save_file
from tokenizers import Tokenizer, models

from ..base import SynthesisRequest
from ..text_tokenizer import TextTokenizer, add_specials, bytes_to_unicode, qwen2_pipeline
from .config import parse_config
from .random_init import HEAD_GAIN, randomize

SEED = 1234
CAL_TEXT = "Hello world. This is a tiny test."
EOS_FRAME = 24
CORPUS = (
    "<|im_start|>assistant\n",
    "<|im_start|>user\n",
    CAL_TEXT,
    "The quick brown fox jumps over the lazy dog.",
    "Speak slowly and clearly.",
    "你好，世界。",
    "assistant user system",
    "A warm, calm voice.",
)
TTS_PAD, TTS_BOS, TTS_EOS = 500, 501, 502  # tiny text vocab 512 (real: 151671..151673)
REAL_SPEAKERS = {"serena": 3066, "vivian": 3065, "uncle_fu": 3010, "dylan": 2878, "eric": 2875}
REAL_LANGUAGES = {
    "chinese": 2055,
    "english": 2050,
    "german": 2053,
    "japanese": 2058,
    "beijing_dialect": 2074,
    "sichuan_dialect": 2062,
}
DIALECTS = {
    "serena": False,
    "vivian": False,
    "uncle_fu": False,
    "dylan": "beijing_dialect",
    "eric": "sichuan_dialect",
}

SIZES: dict[str, dict[str, Any]] = {
    "tiny": dict(
        codebook=128,
        hidden=64,
        inter=128,
        layers=2,
        heads=4,
        kv=2,
        head_dim=16,
        text_hidden=48,
        p_hidden=64,
        p_hidden_proj=32,
        p_inter=96,
        p_layers=2,
        p_heads=4,
        p_kv=2,
        p_head_dim=16,
        mrope=[4, 2, 2],
        enc_dim=64,
    ),
    "cpu-bench": dict(
        codebook=2048,
        hidden=256,
        inter=768,
        layers=4,
        heads=8,
        kv=4,
        head_dim=32,
        text_hidden=128,
        p_hidden=256,
        p_hidden_proj=128,
        p_inter=512,
        p_layers=2,
        p_heads=4,
        p_kv=2,
        p_head_dim=32,
        mrope=[8, 4, 4],
        enc_dim=256,
    ),
}
# The real architectures: their builder lives in realsize.py (benchmarks and gpu_check only); build_tiny
# dispatches to it for these names.
REAL_SIZES = ("0.6b", "1.7b")
ALL_SIZES = (*SIZES, *REAL_SIZES)


def size_dims(size: str) -> dict[str, Any]:
    if size in REAL_SIZES:
        from .realsize import real_size_dims

        return real_size_dims(size)
    return SIZES[size]


# --- text tokenizer ------------------------------------------------------------------------------------
def tiny_tokenizer() -> TextTokenizer:
    """Byte-level BPE: the 256 byte symbols plus merges that make each pre-token of CORPUS one token
    (built, not trained, so it is identical on every run). Then the 33 Qwen3/TTS specials."""
    be = bytes_to_unicode()
    vocab = {be[b]: i for i, b in enumerate(sorted(be))}
    merges: list[tuple[str, str]] = []
    splitter = qwen2_pipeline(Tokenizer(models.BPE(vocab=dict(vocab), merges=[]))).pre_tokenizer
    for text in CORPUS:
        for piece, _ in splitter.pre_tokenize_str(text.replace("<|im_start|>", "")):
            for i in range(1, len(piece)):
                left, right = piece[:i], piece[i]
                if left + right not in vocab:
                    merges.append((left, right))
                    vocab[left + right] = len(vocab)
    tok = qwen2_pipeline(Tokenizer(models.BPE(vocab=vocab, merges=merges, fuse_unk=False)))
    add_specials(tok)
    assert tok.get_vocab_size() < TTS_PAD, "tiny tokenizer grew into the TTS special ids"
    return TextTokenizer(tok)


# --- configs -------------------------------------------------------------------------------------------
def make_config(variant: str, proj: bool, size: str, tok: TextTokenizer) -> dict[str, Any]:
    s = size_dims(size)
    real = s.get("real", False)
    cb = s["codebook"]
    off = cb - 2048  # keep the specials in the top 1024 ids, which generate() suppresses (except EOS)
    talker = dict(
        vocab_size=cb + 1024,
        hidden_size=s["hidden"],
        intermediate_size=s["inter"],
        num_hidden_layers=s["layers"],
        num_attention_heads=s["heads"],
        num_key_value_heads=s["kv"],
        head_dim=s["head_dim"],
        hidden_act="silu",
        max_position_embeddings=32768,
        rms_norm_eps=1e-6,
        rope_theta=1000000.0,
        rope_scaling={"mrope_section": s["mrope"], "interleaved": True, "rope_type": "default"},
        num_code_groups=16,
        text_hidden_size=s["text_hidden"],
        text_vocab_size=s.get("text_vocab", 512),
        position_id_per_seconds=13,
        tie_word_embeddings=False,
        codec_pad_id=2148 + off,
        codec_bos_id=2149 + off,
        codec_eos_token_id=2150 + off,
        codec_think_id=2154 + off,
        codec_nothink_id=2155 + off,
        codec_think_bos_id=2156 + off,
        codec_think_eos_id=2157 + off,
        codec_language_id={k: v + off for k, v in REAL_LANGUAGES.items()},
        spk_id={k: v + off for k, v in REAL_SPEAKERS.items()} if variant == "custom_voice" else {},
        spk_is_dialect=dict(DIALECTS) if variant == "custom_voice" else {},
        code_predictor_config=dict(
            vocab_size=cb,
            hidden_size=s["p_hidden_proj"] if proj and not real else s["p_hidden"],
            intermediate_size=s["p_inter"],
            num_hidden_layers=s["p_layers"],
            num_attention_heads=s["p_heads"],
            num_key_value_heads=s["p_kv"],
            head_dim=s["p_head_dim"],
            hidden_act="silu",
            max_position_embeddings=65536,
            rms_norm_eps=1e-6,
            rope_theta=1000000.0,
            num_code_groups=16,
            use_sliding_window=False,
        ),
    )
    cfg: dict[str, Any] = dict(
        architectures=["Qwen3TTSForConditionalGeneration"],
        model_type="qwen3_tts",
        tokenizer_type="qwen3_tts_tokenizer_12hz",
        tts_model_size=s["model_size"] if real else "1b7" if proj else "0b6",
        tts_model_type=variant,
        im_start_token_id=tok.token_id("<|im_start|>"),
        im_end_token_id=tok.token_id("<|im_end|>"),
        tts_pad_token_id=TTS_PAD,
        tts_bos_token_id=TTS_BOS,
        tts_eos_token_id=TTS_EOS,
        talker_config=talker,
    )
    if variant == "base":
        # Only real fields: the official speaker-encoder config class takes no extra kwargs.
        # Real sizes get the real ECAPA widths (design notes 1a), the others the oracle's small ones.
        cfg["speaker_encoder_config"] = dict(
            mel_dim=128,
            enc_dim=s["hidden"],
            enc_channels=[512, 512, 512, 512, 1536] if real else [32, 32, 32, 32, 96],
            enc_kernel_sizes=[5, 3, 3, 3, 1],
            enc_dilations=[1, 2, 3, 4, 1],
            enc_attention_channels=128 if real else 16,
            enc_res2net_scale=8,
            enc_se_channels=128 if real else 16,
            sample_rate=24000,
        )
    return cfg


def generation_config(max_new_tokens: int = 8192) -> dict[str, Any]:
    return {
        "do_sample": True,
        "repetition_penalty": 1.05,
        "temperature": 0.9,
        "top_p": 1.0,
        "top_k": 50,
        "subtalker_dosample": True,
        "subtalker_temperature": 0.9,
        "subtalker_top_p": 1.0,
        "subtalker_top_k": 50,
        "max_new_tokens": max_new_tokens,
    }


# --- weights -------------------------------------------------------------------------------------------
def _talker_state(cfg_dict: dict[str, Any], seed: int) -> dict[str, torch.Tensor]:
    from .talker import Qwen3TTSWeights

    cfg = parse_config(cfg_dict)
    torch.manual_seed(seed)
    w = Qwen3TTSWeights(cfg.talker)
    randomize(w, torch.Generator().manual_seed(seed))
    with torch.no_grad():
        w.talker.codec_head.weight.mul_(HEAD_GAIN)
        for h in w.talker.code_predictor.lm_head:
            h.weight.mul_(HEAD_GAIN)
        eos = cfg.talker.codec_eos_id
        w.talker.codec_head.weight[eos] *= -1e-3  # EOS never wins until calibrated
    return {k: v.contiguous() for k, v in w.state_dict().items()}


def _save_weights(out: Path, sd: dict[str, torch.Tensor]) -> None:
    save_file(dict(sorted(sd.items())), str(out / "model.safetensors"), metadata={"format": "pt"})


@torch.no_grad()
def calibrate_eos(out: Path, variant: str, eos_frame: int, cal_text: str = CAL_TEXT,
                  hazard: float | None = None) -> float:
    """Set the EOS row of codec_head to c * h_T / |h_T| so greedy decoding of `cal_text` stops after
    exactly `eos_frame` frames; c is the middle of the window where EOS wins at T and nowhere before."""
    from .program import Qwen3TTSProgram
    from .reference import Trace, generate

    program = Qwen3TTSProgram.load(str(out))
    cfg = program.cfg.talker
    cb = cfg.predictor.vocab_size
    T = eos_frame
    req = SynthesisRequest(
        text=cal_text,
        language="english",
        options={"streaming_text": True},
        max_frames=T + 8,
        voice="serena" if variant == "custom_voice" else None,
    )
    req.sampling = type(req.sampling)(greedy=True)
    trace = Trace(prompt=None)  # type: ignore[arg-type]
    if variant == "base":
        generate(
            program,
            req,
            with_wav=False,
            trace=trace,
            x_vector=torch.zeros(cfg.block.hidden_size),
            ref_codes=None,
        )
    else:
        generate(program, req, with_wav=False, trace=trace)
    head = program.talker.codec_head.weight
    best, seen = [], set()
    rp = program.gen.repetition_penalty
    for h in trace.hidden:
        lg = (head @ h)[:cb].clone()
        for i in seen:
            lg[i] = lg[i] / rp if lg[i] > 0 else lg[i] * rp
        best.append(float(lg.max()))
        seen.add(int(lg.argmax()))
    if hazard is not None:
        row = _hazard_row(trace.hidden, head[:cb], hazard, program.gen.temperature)
        return _write_eos_row(out, cfg.codec_eos_id, row)
    u = trace.hidden[T] / trace.hidden[T].norm()
    proj = [float(u @ h) for h in trace.hidden]
    lo = best[T] / proj[T]
    hi = min([best[t] / proj[t] for t in range(2, T) if proj[t] > 0] + [float("inf")])
    if not lo < hi:
        raise RuntimeError(f"EOS at frame {T} is not separable for this seed (lo={lo:.3f}, hi={hi:.3f})")
    c = lo + 0.5 * (min(hi, 2 * lo) - lo)
    return _write_eos_row(out, cfg.codec_eos_id, c * u)


def _hazard_row(hidden: list[torch.Tensor], code_rows: torch.Tensor, hazard: float, temperature: float
                ) -> torch.Tensor:
    """EOS row along the mean hidden direction, scaled so that under sampling at `temperature` EOS has
    on average probability `hazard` per step (a roughly constant stop rate: expected length 1/hazard)."""
    H = torch.stack(hidden)
    u = H.mean(0) / H.mean(0).norm()
    others = (H @ code_rows.T) / temperature
    proj = (H @ u) / temperature

    def mean_p(alpha: float) -> float:
        lg = torch.cat([others, (alpha * proj)[:, None]], dim=1)
        return float(lg.softmax(-1)[:, -1].mean())

    lo, hi = -1000.0, 1000.0
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if mean_p(mid) < hazard else (lo, mid)
    return 0.5 * (lo + hi) * u


def _write_eos_row(out: Path, eos_id: int, row: torch.Tensor) -> float:
    from safetensors.torch import load_file

    sd = load_file(str(out / "model.safetensors"))
    sd["talker.codec_head.weight"][eos_id] = row.to(sd["talker.codec_head.weight"].dtype)
    _save_weights(out, sd)
    return float(row.norm())


@dataclass(frozen=True)
class Calibration:
    """What the two calibration runs of a tiny build produce: the codec decoder's output scale and the
    talker's EOS row. Shipped for the demo (models/qwen3_tts/demo_calibration.json)."""

    decoder_scale: float
    eos_row: tuple[float, ...]


def measure_calibration(ckpt: Path, size: str = "tiny", seed: int = SEED) -> Calibration:
    """Read the calibration a full (calibrating) build of `ckpt` arrived at."""
    from safetensors.torch import load_file

    from .tiny_audio import _BY_CODEBOOK, measured_decoder_scale

    cfg = json.loads((Path(ckpt) / "config.json").read_text())
    eos = cfg["talker_config"]["codec_eos_token_id"]
    row = load_file(str(Path(ckpt) / "model.safetensors"))["talker.codec_head.weight"][eos]
    scale = measured_decoder_scale(_BY_CODEBOOK[SIZES[size]["codebook"]], seed + 1)
    return Calibration(scale, tuple(float(x) for x in row))


# --- builder -------------------------------------------------------------------------------------------
def build_tiny(
    out: str | Path,
    variant: str = "custom_voice",
    proj: bool = False,
    size: str = "tiny",
    seed: int = SEED,
    eos_frame: int = EOS_FRAME,
    max_new_tokens: int = 8192,
    eos_hazard: float | None = None,
    calibration: Calibration | None = None,
) -> Path:
    """Write a deterministic random checkpoint to `out` (built in a temp dir, then moved into place).
    Real sizes ("0.6b", "1.7b") ignore `eos_frame` (no calibration) and refuse `proj`/`eos_hazard`.
    `calibration` (the results of an earlier identical build) replaces both calibration runs, which
    are most of a tiny build's time; the checkpoint comes out the same."""
    if variant not in ("custom_voice", "base", "voice_design"):
        raise ValueError(f"variant must be custom_voice, base or voice_design, got {variant!r}")
    if size not in ALL_SIZES:
        raise ValueError(f"size must be one of {', '.join(ALL_SIZES)}, got {size!r}")
    real = size in REAL_SIZES
    if real and proj:
        raise ValueError(f"proj is for the tiny sizes only: size {size!r} fixes the predictor width itself "
                         "(the 1.7b has the 2048->1024 projection, the 0.6b none)")
    if real and eos_hazard is not None:
        raise ValueError(f"size {size!r} skips the EOS calibration (too slow on a CPU): request fixed "
                         "frame counts instead of passing eos_hazard")
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".building-", dir=out.parent))
    try:
        tok = tiny_tokenizer()
        tok.save(tmp)
        cfg = make_config(variant, proj, size, tok)
        (tmp / "config.json").write_text(json.dumps(cfg, indent=2, sort_keys=True))
        (tmp / "generation_config.json").write_text(json.dumps(generation_config(max_new_tokens), indent=2))
        if real:
            from .realsize import talker_state_streamed

            sd = talker_state_streamed(cfg, seed, torch.bfloat16)
        else:
            sd = _talker_state(cfg, seed)
        if variant == "base":
            sd.update(_speaker_encoder_state(cfg["speaker_encoder_config"], seed + 3))
        _save_weights(tmp, sd)
        del sd
        _write_speech_tokenizer(
            tmp / "speech_tokenizer", size_dims(size)["codebook"], seed + 1, "real" if real else None,
            calibration.decoder_scale if calibration else None,
        )
        if calibration is not None:
            _write_eos_row(tmp, cfg["talker_config"]["codec_eos_token_id"],
                           torch.tensor(calibration.eos_row, dtype=torch.float32))
        elif not real:
            calibrate_eos(tmp, variant, eos_frame, hazard=eos_hazard)
        if out.exists():
            shutil.rmtree(out)
        tmp.rename(out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def _speaker_encoder_state(enc_cfg: dict[str, Any], seed: int) -> dict[str, torch.Tensor]:
    from .tiny_audio import speaker_encoder_weights

    sd = speaker_encoder_weights(enc_cfg, seed=seed)
    return {
        (k if k.startswith("speaker_encoder.") else f"speaker_encoder.{k}"): v.contiguous()
        for k, v in sd.items()
    }


def _write_speech_tokenizer(st_dir: Path, codebook: int, seed: int, size: str | None = None,
                            decoder_scale: float | None = None) -> None:
    from .tiny_audio import build_speech_tokenizer_weights

    build_speech_tokenizer_weights(st_dir, codebook_size=codebook, seed=seed, size=size,
                                   decoder_scale=decoder_scale)

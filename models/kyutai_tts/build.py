"""Random-weight Kyutai TTS checkpoints in kyutai/tts-1.6b-en_fr's released layout, in plain torch (no moshi:
the project's own venv builds them; the demo, `scripts/make_tiny.py --family kyutai_tts`, the benchmark and
the real-size run use this). moshi_build.py writes the same layout through moshi's own classes for the
parity tests; tests/test_kyutai_build.py checks that moshi loads this builder's output and decodes it as our
engine does.

Written: config.json (`model_type` "tts", the LM keys, `conditioners`, `fuser`, `tts_config`, `model_id`,
`lm_gen_config`, `moshi_name`, `mimi_name`, `tokenizer_name`, and `mimi_config_name` when the size has a
small Mimi), the LM safetensors under moshi's names with attention stacked per module
(`self_attn.in_proj_weight` [sets * 3 * dim, dim], `out_proj.weight` [sets * dim, dim]; the conditioners in
float32 as moshi keeps them), the Mimi safetensors under moshi's names (float32), a byte-fallback
sentencepiece tokenizer whose ids 0..3 are the TTS's specials, and voices/<name>.wav.<sig>@<epoch>.safetensors
(`speaker_wavs` [1, 512, 125]).

Every tensor is drawn and written one at a time (stream_write.py): the real size (1.6B in bfloat16, 3.3 GB,
plus moshi's fixed 24 kHz Mimi) is written with a few hundred MB of memory. The LM's tensor list comes from
this package's own KyutaiLM built on the meta device (the names the loader reads), stacked back as released;
Mimi's from moshi's SEANet / transformer / split-RVQ structure for the size's Mimi config.

Sizes: tiny (moshi_build's tiny: 32-wide 2-layer LM with context 24, 16-wide 2-layer depformer, 400-piece
tokenizer, a 32-wide Mimi with window 8); bench (a mid size the benchmark runs in minutes on a CPU: 512-wide
6-layer LM, 256-wide depformer, a 128-wide Mimi); real (the published sizes, bfloat16, moshi's fixed Mimi).

How a random model ends: moshi's state machine forces a new word after `max_padding` pads and ends a few
steps past the last word, so every run ends by itself; the text head's rows for `new_word` (0) and `pad`
(3) are scaled so that greedy decoding picks between them by the model's own scores.
"""

from __future__ import annotations

import io
import json
import random
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import save_file

from .config import MOSHI_MIMI, parse_config
from .stream_write import write_streamed
from .tiny import TINY_MIMI

SEED = 0
SIG, EPOCH = "1e68beda", 240
MOSHI_NAME = f"dsm_tts_{SIG}@{EPOCH}.safetensors"
MIMI_NAME = "tokenizer-e351c8d8-checkpoint125.safetensors"
TEXT_HEAD_SCALE = 4.0
BENCH_MIMI = json.loads(json.dumps(TINY_MIMI))
BENCH_MIMI["seanet"].update(dimension=128, n_filters=16)
BENCH_MIMI["quantizer"].update(dimension=64, input_dimension=128, output_dimension=128)
BENCH_MIMI["transformer"].update(d_model=128, num_heads=4, context=250, dim_feedforward=512,
                                 input_dimension=128, output_dimensions=[128])
SIZES: dict[str, dict[str, Any]] = {
    "tiny": {
        "text_card": 400, "dtype": "float32", "mimi_config": TINY_MIMI,
        "lm": {"dim": 32, "num_heads": 2, "num_layers": 2, "context": 24, "depformer_dim": 16,
               "depformer_num_heads": 2, "depformer_num_layers": 2, "depformer_dim_feedforward": 24,
               "depformer_low_rank_embeddings": 8},
    },
    "bench": {
        "text_card": 2000, "dtype": "float32", "mimi_config": BENCH_MIMI,
        "lm": {"dim": 512, "num_heads": 8, "num_layers": 6, "context": 500, "depformer_dim": 256,
               "depformer_num_heads": 4, "depformer_num_layers": 2, "depformer_dim_feedforward": 768,
               "depformer_low_rank_embeddings": 64},
    },
    # kyutai/tts-1.6b-en_fr's config.json; Mimi: moshi's fixed one (no mimi_config_name)
    "real": {
        "text_card": 8000, "dtype": "bfloat16", "mimi_config": None,
        "lm": {"dim": 2048, "num_heads": 16, "num_layers": 16, "context": 500, "depformer_dim": 1024,
               "depformer_num_heads": 16, "depformer_num_layers": 4, "depformer_dim_feedforward": 3072,
               "depformer_low_rank_embeddings": 128},
    },
}
VOICES = ("tiny-default", "tiny-other")
CORPUS = (
    "hello world this is a tiny random kyutai text to speech model built for tests "
    "bonjour le monde ceci est un petit modele de synthese vocale aleatoire "
    "the quick brown fox jumps over the lazy dog while words arrive one by one"
)


def train_tokenizer(out: Path, vocab: int, seed: int) -> int:
    """tokenizer.model: byte-fallback BPE with ids 0..3 = unk, bos, eos, pad (the TTS's new-word, main
    speaker, other speaker and pad: no word encodes to them). The corpus is CORPUS plus made-up syllable
    words, enough for `vocab` pieces (8000 at the real size); returns the piece count."""
    import sentencepiece as spm

    rng = random.Random(seed)
    syllables = [c + v for c in "bcdfghjklmnprstvwz" for v in "aeiou"]
    words = CORPUS.split(" ") * 4 + [
        "".join(rng.choice(syllables) for _ in range(rng.randint(1, 4))) for _ in range(5 * vocab)
    ]
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(words), model_writer=model, vocab_size=vocab, model_type="bpe",
        byte_fallback=True, character_coverage=1.0, unk_id=0, bos_id=1, eos_id=2, pad_id=3,
        hard_vocab_limit=False, num_threads=1, minloglevel=2,
    )
    (out / "tokenizer.model").write_bytes(model.getvalue())
    return spm.SentencePieceProcessor(model_proto=model.getvalue()).get_piece_size()


def config_dict(size: dict[str, Any], text_card: int) -> dict[str, Any]:
    """config.json as the release has it (kyutai/tts-1.6b-en_fr), at the size's dimensions."""
    lm, n_q = size["lm"], 32
    config: dict[str, Any] = {
        "card": 2048, "n_q": n_q, "dep_q": n_q, "delays": [0, 0] + [2] * (n_q - 1), "text_card": text_card,
        "existing_text_padding_id": 3, "hidden_scale": 4.125, "causal": True, "layer_scale": None,
        "max_period": 10000, "gating": "silu", "norm": "rms_norm_f32", "positional_embedding": "rope",
        "depformer_multi_linear": True, "depformer_pos_emb": "none", "depformer_weights_per_step": True,
        "demux_second_stream": True, "text_card_out": None, "cross_attention": True, **lm,
        "depformer_weights_per_step_schedule": list(range(8)) + [8] * 8 + [9] * 8 + [10] * 8,
        "conditioners": {
            "speaker_wavs": {"type": "tensor", "tensor": {"dim": 512}},
            "cfg": {"type": "lut", "lut": {"n_bins": 7, "dim": 16, "tokenizer": "noop",
                                           "possible_values": [f"{x / 2:.1f}" for x in range(2, 9)]}},
            "control": {"type": "lut", "lut": {"dim": lm["dim"], "n_bins": 1, "tokenizer": "noop",
                                               "possible_values": ["ok"]}},
        },
        "fuser": {"cross_attention_pos_emb": True, "cross_attention_pos_emb_scale": 1,
                  "sum": ["control", "cfg"], "prepend": [], "cross": ["speaker_wavs"]},
        "tts_config": {"audio_delay": 1.28, "second_stream_ahead": 2},
        "model_id": {"sig": SIG, "epoch": EPOCH},
        "model_type": "tts",
        "lm_gen_config": {"temp": 0.6, "text_temp": 0.6},
        "moshi_name": MOSHI_NAME,
        "mimi_name": MIMI_NAME,
        "tokenizer_name": "tokenizer.model",
    }
    if size.get("mimi_config") is not None:
        config["mimi_config_name"] = "mimi_config.json"
    return config


Plan = dict[str, tuple[tuple[int, ...], torch.dtype]]
_STACKED = (("in_projs", "in_proj_weight"), ("out_projs", "out_proj.weight"))


def lm_plan(root: Path, config: dict[str, Any], dtype: torch.dtype) -> Plan:
    """The LM file's tensors: KyutaiLM's (the loader's names) on the meta device, with each module's
    per-weight-set `in_projs.N.weight` / `out_projs.N.weight` stacked into one released entry."""
    from .layers import KyutaiLM

    cfg = parse_config(config, root)
    with torch.device("meta"):
        state = KyutaiLM(cfg).state_dict()
    plan: Plan = {}
    for name, t in state.items():
        kind = torch.float32 if name.startswith("condition_provider.") else dtype
        for part, target in _STACKED:
            marker = f".{part}."
            if marker in name:
                stacked = name.split(marker)[0] + "." + target
                rows = plan[stacked][0][0] if stacked in plan else 0
                plan[stacked] = ((rows + t.shape[0], *t.shape[1:]), kind)
                break
        else:
            plan[name] = (tuple(t.shape), kind)
    return plan


def mimi_plan(m: dict[str, Any]) -> Plan:
    """moshi's Mimi (SEANet encoder/decoder, the two transformers, the split RVQ, the frame-rate convs)
    under moshi's state-dict names, for moshi's Mimi config dict."""
    s, q, t = m["seanet"], m["quantizer"], m["transformer"]
    nf, dim, comp, channels = s["n_filters"], s["dimension"], s["compress"], s.get("channels", 1)
    ratios, n_res = list(s["ratios"]), s["n_residual_layers"]
    f32 = torch.float32
    plan: Plan = {}

    def conv(name: str, out_c: int, in_c: int, k: int, bias: bool = True) -> None:
        plan[f"{name}.weight"] = ((out_c, in_c, k), f32)
        if bias:
            plan[f"{name}.bias"] = ((out_c,), f32)

    def blocks(side: str, i: int, c: int) -> int:
        for _ in range(n_res):
            conv(f"{side}.model.{i}.block.1.conv.conv", c // comp, c, s["residual_kernel_size"])
            conv(f"{side}.model.{i}.block.3.conv.conv", c, c // comp, 1)
            i += 1
        return i

    # encoder: conv, then per ratio (reversed): residual blocks, ELU, strided conv; ELU, last conv
    conv("encoder.model.0.conv.conv", nf, channels, s["kernel_size"])
    i, c = 1, nf
    for r in reversed(ratios):
        i = blocks("encoder", i, c) + 1
        conv(f"encoder.model.{i}.conv.conv", 2 * c, c, 2 * r)
        i, c = i + 1, 2 * c
    conv(f"encoder.model.{i + 1}.conv.conv", dim, c, s["last_kernel_size"])
    # decoder: conv, then per ratio: ELU, transposed conv (weight [in, out, k]), residual blocks; ELU, conv
    conv("decoder.model.0.conv.conv", c, dim, s["kernel_size"])
    i = 1
    for r in ratios:
        plan[f"decoder.model.{i + 1}.convtr.convtr.weight"] = ((c, c // 2, 2 * r), f32)
        plan[f"decoder.model.{i + 1}.convtr.convtr.bias"] = ((c // 2,), f32)
        i, c = blocks("decoder", i + 2, c // 2), c // 2
    conv(f"decoder.model.{i + 1}.conv.conv", channels, c, s["last_kernel_size"])
    d, ff = t["d_model"], t["dim_feedforward"]
    for side in ("encoder_transformer", "decoder_transformer"):
        for layer in range(t["num_layers"]):
            p = f"{side}.transformer.layers.{layer}."
            plan[p + "self_attn.in_proj_weight"] = ((3 * d, d), f32)
            plan[p + "self_attn.out_proj.weight"] = ((d, d), f32)
            plan[p + "linear1.weight"] = ((ff, d), f32)
            plan[p + "linear2.weight"] = ((d, ff), f32)
            for n in ("norm1", "norm2"):
                plan[p + f"{n}.weight"] = ((d,), f32)
                plan[p + f"{n}.bias"] = ((d,), f32)
            plan[p + "layer_scale_1.scale"] = ((d,), f32)
            plan[p + "layer_scale_2.scale"] = ((d,), f32)
    # 25 Hz encoder frames <-> 12.5 Hz codes: stride 2, kernel 4, no bias (the upsample is depthwise)
    stride = round(m["sample_rate"] / _prod(ratios) / m["frame_rate"])
    plan["downsample.conv.conv.conv.weight"] = ((dim, dim, 2 * stride), f32)
    plan["upsample.convtr.convtr.convtr.weight"] = ((dim, 1, 2 * stride), f32)
    qd, bins = q["dimension"], q["bins"]
    qin, qout = q.get("input_dimension", dim), q.get("output_dimension", dim)
    for rvq, layers in (("rvq_first", 1), ("rvq_rest", q["n_q"] - 1)):
        if qin != qd:
            plan[f"quantizer.{rvq}.input_proj.weight"] = ((qd, qin, 1), f32)
        if qout != qd:
            plan[f"quantizer.{rvq}.output_proj.weight"] = ((qout, qd, 1), f32)
        for n in range(layers):
            p = f"quantizer.{rvq}.vq.layers.{n}._codebook."
            plan[p + "_initialized"] = ((1,), f32)
            plan[p + "cluster_usage"] = ((bins,), f32)
            plan[p + "embedding_sum"] = ((bins, qd), f32)
    return plan


def _prod(xs: list[int]) -> int:
    out = 1
    for x in xs:
        out *= x
    return out


def _lm_draw(g: torch.Generator):
    """norms' alpha ~ N(1, 0.1); matrices ~ N(0, 1/fan_in) (activations stay O(1) at any width); vectors
    ~ N(0, 0.2); the text head's new-word and pad rows scaled (module docstring)."""

    def draw(name: str, shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
        if name.endswith("alpha"):
            t = 1.0 + 0.1 * torch.randn(shape, generator=g)
        elif len(shape) >= 2:
            t = torch.randn(shape, generator=g).mul_(shape[-1] ** -0.5)
        else:
            t = 0.2 * torch.randn(shape, generator=g)
        if name == "text_linear.weight":
            t[0] *= TEXT_HEAD_SCALE
            t[3] *= TEXT_HEAD_SCALE
        return t.to(dtype)

    return draw


def _mimi_draw(g: torch.Generator, last_conv: str):
    """Weights ~ N(0, 1/fan_in); LayerScale 0.1; other vectors N(0, 0.05); codebooks N(0, 1) with usage in
    [0.5, 2] (so each code's centroid is a different finite vector); the last conv small enough that the
    waveform stays within [-1, 1] (a 16-bit WAV holds it)."""

    def draw(name: str, shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
        if name.endswith("_initialized"):
            return torch.ones(shape, dtype=dtype)
        if name.endswith("cluster_usage"):
            return torch.rand(shape, generator=g).mul_(1.5).add_(0.5).to(dtype)
        if name.endswith("embedding_sum"):
            return torch.randn(shape, generator=g).to(dtype)
        if len(shape) >= 2:
            t = torch.randn(shape, generator=g).mul_(_prod(list(shape[1:])) ** -0.5)
            return (t * 0.3 if name == last_conv else t).to(dtype)
        if name.endswith("scale"):
            return torch.full(shape, 0.1, dtype=dtype)
        return (0.05 * torch.randn(shape, generator=g)).to(dtype)

    return draw


def write_voices(out: Path, seed: int, names: tuple[str, ...] = VOICES) -> None:
    voices = out / "voices"
    voices.mkdir(exist_ok=True)
    g = torch.Generator().manual_seed(seed + 1)
    for name in names:
        save_file({"speaker_wavs": torch.randn(1, 512, 125, generator=g)},
                  str(voices / f"{name}.wav.{SIG}@{EPOCH}.safetensors"),
                  metadata={"sig": SIG, "epoch": str(EPOCH)})


def write_layout(out: Path, size: str, text_card: int | None = None) -> tuple[Plan, Plan]:
    """config.json (+ mimi_config.json) of `size` written into `out`; returns the LM and Mimi files' tensor
    tables (name -> shape, dtype) without drawing a tensor. `text_card`: the tokenizer's piece count
    (default: the size's)."""
    spec = SIZES[size]
    config = config_dict(spec, int(spec["text_card"] if text_card is None else text_card))
    mimi = spec["mimi_config"]
    if mimi is not None:
        (out / "mimi_config.json").write_text(json.dumps(mimi, indent=2))
    (out / "config.json").write_text(json.dumps(config, indent=2))
    return lm_plan(out, config, getattr(torch, spec["dtype"])), mimi_plan(mimi or MOSHI_MIMI)


def build(out: Path, size: str = "tiny", seed: int = SEED) -> Path:
    """Write a complete checkpoint of `size` into `out` (created if needed)."""
    if size not in SIZES:
        raise ValueError(f"size must be one of {', '.join(SIZES)}, got {size!r}")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    lm, mimi = write_layout(out, size, train_tokenizer(out, int(SIZES[size]["text_card"]), seed))
    write_streamed(out / MOSHI_NAME, lm, _lm_draw(torch.Generator().manual_seed(seed)))
    last = max((k for k in mimi if k.startswith("decoder.model.") and k.endswith(".weight")),
               key=lambda k: int(k.split(".")[2]))
    write_streamed(out / MIMI_NAME, mimi, _mimi_draw(torch.Generator().manual_seed(seed + 2), last))
    write_voices(out, seed)
    return out

"""Random-weight CSM checkpoints in the transformers layout of sesame/csm-1b, built without transformers
(the demo, tests, `scripts/make_tiny.py --family csm`, the real-size runs).

Written: config.json (`csm`, with `depth_decoder_config` and a Mimi `codec_config`), generation_config.json,
`transformers-0000N-of-0000M.safetensors` + `transformers.safetensors.index.json` with the 538 tensors the
release has (the codec's `codec_model.*` included, the tied audio embedding stored under both names as in
the release), tokenizer.json (byte-level BPE; the Llama-3 / CSM special tokens at the config's ids) +
tokenizer_config.json, chat_template.jinja and preprocessor_config.json. Tensors are drawn one at a time
and written shard by shard, so a real-size build never holds the model in memory.

How a random model ends (so greedy parity runs end naturally, as `generate` does): residual dimension 0
of the depth decoder carries only "the input code is 0". The audio table's rows for code 0 hold a large
value there and every other row 0; the projector maps backbone dimension 0 to depth dimension 0 alone; no
depth layer writes it (o_proj and down_proj row 0 are 0); the backbone's final norm zeroes its dimension 0
(so position 0, the backbone's hidden state, carries none); every depth head scores code 0 by that
dimension alone. So code 0 in, code 0 out: a frame whose codebook 0 is 0 is all 0 (the end of the
utterance, not played), any other frame does not end it. `lm_head`'s row 0 is scaled so that greedy
decoding of `CALIBRATION_TEXT` picks codebook 0 = 0 after 25 to 60 frames (the scale is searched at build
time with this package's own program). Ids at Mimi's codebook size and up (pad/eos room) score exactly 0,
below the best of the random codes, so neither implementation picks them.
"""

from __future__ import annotations

import json
import math
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import save_file

from ..byte_tokenizer import write_tokenizer
from ..dtypes import torch_dtype

SEED = 0
CALIBRATION_TEXT = "Hello from a tiny random CSM."
SPECIALS = ("<|begin_of_text|>", "<|end_of_text|>", "<|AUDIO|>", "<|audio_eos|>")
CHAT_TEMPLATE = (
    "{%- for message in messages %}{{- bos_token }}{{- '[' + message['role'] + ']' }}"
    "{{- message['content'][0]['text'] }}{{- eos_token }}{%- if message['content']|length > 1 %}"
    "{{- '<|AUDIO|><|audio_eos|>' }}{%- endif %}{%- endfor %}"
)
LLAMA3_ROPE = {
    "rope_type": "llama3",
    "rope_theta": 500000.0,
    "factor": 32.0,
    "low_freq_factor": 1.0,
    "high_freq_factor": 4.0,
    "original_max_position_embeddings": 8192,
}
SIZES: dict[str, dict[str, Any]] = {
    # codebooks 32 as released; the codec's transformer window 8 (25 Hz positions) so that tests of 25+
    # frames cross it
    "tiny": dict(
        backbone=dict(
            hidden_size=64,
            intermediate_size=128,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            head_dim=16,
        ),
        depth=dict(
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            head_dim=8,
        ),
        codec=dict(
            hidden_size=32,
            num_filters=4,
            codebook_size=32,
            codebook_dim=16,
            vector_quantization_hidden_dimension=16,
            upsample_groups=32,
            num_hidden_layers=2,
            intermediate_size=64,
            num_attention_heads=4,
            num_key_value_heads=4,
            head_dim=8,
            sliding_window=8,
        ),
        vocab_size=35,
        first_special=256,
        max_position_embeddings=2048,
    ),
    # sesame/csm-1b's published dimensions (its config.json)
    "real": dict(
        backbone=dict(
            hidden_size=2048,
            intermediate_size=8192,
            num_hidden_layers=16,
            num_attention_heads=32,
            num_key_value_heads=8,
            head_dim=64,
        ),
        depth=dict(
            hidden_size=1024,
            intermediate_size=8192,
            num_hidden_layers=4,
            num_attention_heads=8,
            num_key_value_heads=2,
            head_dim=128,
        ),
        codec=dict(
            hidden_size=512,
            num_filters=64,
            codebook_size=2048,
            codebook_dim=256,
            vector_quantization_hidden_dimension=256,
            upsample_groups=512,
            num_hidden_layers=8,
            intermediate_size=2048,
            num_attention_heads=8,
            num_key_value_heads=8,
            head_dim=64,
            sliding_window=250,
        ),
        vocab_size=2051,
        first_special=128000,
        max_position_embeddings=2048,
    ),
}
SHARD_BYTES = 2 << 30
EOS_MARK = 50.0  # the code-0 rows' value in the marker dimension
EOS_HEAD = 10.0  # each depth head's weight on it
# lm_head row-0 scales `calibrate_scale` found, by (seed, dtype): building them needs no search (a search
# loads the model and decodes up to 60 frames per probe). Seed 0 fp32: greedy CALIBRATION_TEXT ends after 57
# frames (tests/test_csm_parity.py checks that transformers' generate ends there too).
CALIBRATED = {(0, "float32"): 0.5}


def config_dict(size: str) -> dict[str, Any]:
    s = SIZES[size]
    K, special = 32, s["first_special"]
    codec = {
        "model_type": "mimi",
        "sampling_rate": 24000,
        "frame_rate": 12.5,
        "audio_channels": 1,
        "num_residual_layers": 1,
        "upsampling_ratios": [8, 6, 5, 4],
        "kernel_size": 7,
        "last_kernel_size": 3,
        "residual_kernel_size": 3,
        "dilation_growth_rate": 2,
        "use_causal_conv": True,
        "pad_mode": "constant",
        "compress": 2,
        "trim_right_ratio": 1.0,
        "num_quantizers": K,
        "use_conv_shortcut": False,
        "num_semantic_quantizers": 1,
        "hidden_act": "gelu",
        "max_position_embeddings": 8000,
        "norm_eps": 1e-5,
        "rope_theta": 10000.0,
        "layer_scale_initial_scale": 0.01,
        "attention_bias": False,
        **s["codec"],
    }
    depth = {
        "model_type": "csm_depth_decoder_model",
        "num_codebooks": K,
        "vocab_size": s["vocab_size"],
        "backbone_hidden_size": s["backbone"]["hidden_size"],
        "hidden_act": "silu",
        "rms_norm_eps": 1e-5,
        "max_position_embeddings": 33,
        "rope_scaling": LLAMA3_ROPE,
        "rope_theta": 500000.0,
        "attention_bias": False,
        "mlp_bias": False,
        **s["depth"],
    }
    return {
        "architectures": ["CsmForConditionalGeneration"],
        "model_type": "csm",
        "num_codebooks": K,
        "vocab_size": s["vocab_size"],
        "text_vocab_size": special + len(SPECIALS) if special < 128000 else 128256,
        "bos_token_id": special,
        "pad_token_id": special + 2,
        "audio_token_id": special + 2,
        "audio_eos_token_id": special + 3,
        "codebook_eos_token_id": 0,
        "codebook_pad_token_id": s["vocab_size"] - 1,
        "hidden_act": "silu",
        "rms_norm_eps": 1e-5,
        "max_position_embeddings": s["max_position_embeddings"],
        "rope_scaling": LLAMA3_ROPE,
        "rope_theta": 500000.0,
        "attention_bias": False,
        "mlp_bias": False,
        "tie_codebooks_embeddings": True,
        "tie_word_embeddings": False,
        "torch_dtype": "float32",
        "depth_decoder_config": depth,
        "codec_config": codec,
        **s["backbone"],
    }


def _shapes(cfg_dict: dict[str, Any]) -> dict[str, tuple[int, ...]]:
    """Every tensor's name and shape, from this package's own modules built on the meta device."""
    from ..codecs.mimi.codec import MimiCodec
    from .config import parse_config
    from .layers import CsmWeights

    cfg = parse_config(cfg_dict, "tiny config")
    with torch.device("meta"):
        shapes = {k: tuple(v.shape) for k, v in CsmWeights(cfg).state_dict().items()}
        shapes["backbone_model.embed_tokens.embed_audio_tokens.weight"] = shapes[
            "depth_decoder.model.embed_tokens.weight"
        ]
        shapes.update(
            {
                f"codec_model.{k}": tuple(v.shape)
                for k, v in MimiCodec(cfg.codec, cfg.num_codebooks).state_dict().items()
            }
        )
    return shapes


def _draw(
    name: str, shape: tuple[int, ...], g: torch.Generator, c: dict[str, Any], lm_scale: float
) -> torch.Tensor:
    """One tensor: norms and Mimi's codebook usage/flags at 1, LayerScale at its initial value, weights
    normal (std 0.2 in the Llama stacks, wider than transformers' 0.02 so attention and position shape a
    random model's output instead of a fixed point; 0.1 for heads and embeddings; 0.15 in the codec, whose
    output then stays within a few units),
    then the end-of-utterance construction of the module docstring."""
    last = name.rsplit(".", 1)[-1]
    if "layernorm" in name or name.endswith("norm.weight") or last in ("cluster_usage", "initialized"):
        t = torch.zeros(shape) if last == "bias" else torch.ones(shape)
    elif last == "scale":
        t = torch.full(shape, 0.01)
    else:
        std = (
            0.1 if ("head" in name or "embed" in name) else (0.15 if name.startswith("codec_model.") else 0.2)
        )
        t = torch.randn(shape, generator=g) * std
        if last == "bias":
            t.mul_(0.1)
    V, top = c["vocab_size"], c["codec_config"]["codebook_size"]
    if name == "backbone_model.norm.weight":
        t[0] = 0.0
    elif name.endswith("embed_audio_tokens.weight") or name == "depth_decoder.model.embed_tokens.weight":
        t[:, 0] = 0.0
        t[torch.arange(c["num_codebooks"]) * V, 0] = EOS_MARK
    elif name == "depth_decoder.model.inputs_embeds_projector.weight":
        t[0, :] = 0.0
        t[:, 0] = 0.0
        t[0, 0] = 1.0
    elif name.startswith("depth_decoder.model.layers.") and (
        name.endswith("o_proj.weight") or name.endswith("down_proj.weight")
    ):
        t[0, :] = 0.0
    elif name == "depth_decoder.codebooks_head.weight":
        t[:, :, 0] = 0.0
        t[:, 0, 0] = EOS_HEAD
        t[:, :, top:] = 0.0
    elif name == "lm_head.weight":
        t[top:] = 0.0
        t[0] *= lm_scale
    return t


def _tensors(
    cfg_dict: dict[str, Any], seed: int, lm_scale: float, dtype: torch.dtype
) -> Iterator[tuple[str, torch.Tensor]]:
    g = torch.Generator().manual_seed(seed)
    tied = None
    for name, shape in sorted(_shapes(cfg_dict).items()):
        if name == "backbone_model.embed_tokens.embed_audio_tokens.weight":
            continue  # written with the depth decoder's table: the same tensor (tie_codebooks_embeddings)
        t = _draw(name, shape, g, cfg_dict, lm_scale)
        if name == "depth_decoder.model.embed_tokens.weight":
            tied = t
        keep = (
            t.dtype
            if name.endswith((".initialized", ".cluster_usage", ".embed_sum")) and dtype != torch.float32
            else dtype
        )
        yield name, t.to(keep if t.is_floating_point() else t.dtype)
    assert tied is not None
    yield "backbone_model.embed_tokens.embed_audio_tokens.weight", tied.to(dtype).clone()


def write_weights(
    out: Path,
    cfg_dict: dict[str, Any],
    seed: int,
    lm_scale: float,
    dtype: torch.dtype,
    shard_bytes: int = SHARD_BYTES,
) -> None:
    """transformers-0000N-of-0000M.safetensors + transformers.safetensors.index.json, shard by shard."""
    shards: list[dict[str, torch.Tensor]] = [{}]
    size = 0
    names: list[list[str]] = [[]]
    tmp: list[Path] = []
    total = 0
    for name, t in _tensors(cfg_dict, seed, lm_scale, dtype):
        n = t.numel() * t.element_size()
        if size and size + n > shard_bytes:
            path = out / f"shard-{len(tmp)}.tmp"
            save_file(shards[-1], str(path), metadata={"format": "pt"})
            tmp.append(path)
            shards[-1] = {}
            names.append([])
            size = 0
        shards[-1][name] = t.contiguous()
        names[-1].append(name)
        size += n
        total += n
    path = out / f"shard-{len(tmp)}.tmp"
    save_file(shards[-1], str(path), metadata={"format": "pt"})
    tmp.append(path)
    count = max(2, len(tmp))  # the release has two shards; a tiny one writes an empty second
    weight_map = {}
    for i, p in enumerate(tmp):
        final = f"transformers-{i + 1:05d}-of-{count:05d}.safetensors"
        p.rename(out / final)
        weight_map.update({k: final for k in names[i]})
    for i in range(len(tmp), count):
        save_file(
            {}, str(out / f"transformers-{i + 1:05d}-of-{count:05d}.safetensors"), metadata={"format": "pt"}
        )
    (out / "transformers.safetensors.index.json").write_text(
        json.dumps(
            {"metadata": {"total_size": total}, "weight_map": dict(sorted(weight_map.items()))}, indent=2
        )
    )


def write_side_files(out: Path, cfg_dict: dict[str, Any], size: str, max_new_tokens: int) -> None:
    (out / "config.json").write_text(json.dumps(cfg_dict, indent=2))
    # the release samples both stages (temperature 0.9, top-k 50); --greedy asks for argmax
    (out / "generation_config.json").write_text(
        json.dumps(
            {
                "bos_token_id": cfg_dict["bos_token_id"],
                "pad_token_id": cfg_dict["pad_token_id"],
                "do_sample": True,
                "temperature": 0.9,
                "top_k": 50,
                "depth_decoder_do_sample": True,
                "depth_decoder_temperature": 0.9,
                "depth_decoder_top_k": 50,
                "max_new_tokens": max_new_tokens,
            },
            indent=2,
        )
    )
    first = SIZES[size]["first_special"]
    filler = tuple(f"<|reserved_special_token_{i}|>" for i in range(first - 256)) if first > 256 else ()
    write_tokenizer(out, filler + SPECIALS)
    conf = json.loads((out / "tokenizer_config.json").read_text())
    conf.update({"bos_token": "<|begin_of_text|>", "eos_token": "<|end_of_text|>", "pad_token": "<|AUDIO|>"})
    (out / "tokenizer_config.json").write_text(json.dumps(conf, indent=2))
    (out / "chat_template.jinja").write_text(CHAT_TEMPLATE)
    (out / "preprocessor_config.json").write_text(
        json.dumps(
            {
                "feature_extractor_type": "EncodecFeatureExtractor",
                "feature_size": 1,
                "padding_side": "right",
                "padding_value": 0.0,
                "return_attention_mask": True,
                "sampling_rate": 24000,
                "chunk_length_s": None,
                "overlap": None,
                "processor_class": "CsmProcessor",
            },
            indent=2,
        )
    )


def build_tiny(
    out: Path,
    size: str = "tiny",
    seed: int = SEED,
    max_new_tokens: int = 300,
    dtype: str = "float32",
    calibrate: bool | None = None,
) -> Path:
    """Write a complete checkpoint into `out`. Tiny: `lm_head` row 0's scale is the one CALIBRATED holds or,
    for another seed, searched (module docstring) so greedy decoding of CALIBRATION_TEXT ends after 25 to 60
    frames; other sizes are not calibrated (their requests end at their frame cap)."""
    if size not in SIZES:
        raise ValueError(f"size must be one of {', '.join(SIZES)}, got {size!r}")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    cfg_dict = config_dict(size)
    weights_dtype = torch_dtype(dtype, ("float32", "bfloat16"))
    cfg_dict["torch_dtype"] = dtype
    write_side_files(out, cfg_dict, size, max_new_tokens)
    if not (size == "tiny" if calibrate is None else calibrate):
        write_weights(out, cfg_dict, seed, 1.0, weights_dtype)
        return out
    known = CALIBRATED.get((seed, dtype))
    scale = known if known is not None else calibrate_scale(out, cfg_dict, seed, weights_dtype)
    write_weights(out, cfg_dict, seed, scale, weights_dtype)
    return out


def calibrate_scale(
    out: Path, cfg_dict: dict[str, Any], seed: int, dtype: torch.dtype, limit: int = 61
) -> float:
    """The first scale of lm_head's row 0 on a geometric grid at which greedy decoding of CALIBRATION_TEXT
    (speaker 0) plays 25 to 60 frames, then ends by itself: one program loaded, its row rescaled in place."""
    from .program import CsmProgram
    from .reference import generate_with

    with tempfile.TemporaryDirectory() as tmp:
        probe = Path(tmp)
        for f in out.iterdir():
            if f.is_file():
                shutil.copy(f, probe / f.name)
        write_weights(probe, cfg_dict, seed, 1.0, dtype)
        prog = CsmProgram.load(
            str(probe), dtype={torch.float32: "float32", torch.bfloat16: "bfloat16"}[dtype]
        )
    row = prog.weights.lm_head.weight.data[0].clone()
    for k in range(40):
        scale = 0.5 * math.exp(0.15 * k)
        prog.weights.lm_head.weight.data[0] = row * scale
        n = generate_with(prog, CALIBRATION_TEXT, max_frames=limit).shape[0]
        if 25 <= n < limit:
            (out / "calibration.json").write_text(
                json.dumps({"lm_head_row0_scale": scale, "text": CALIBRATION_TEXT, "greedy_frames": n})
            )
            return scale
    raise RuntimeError(
        f"no lm_head scale made seed {seed}'s greedy decoding end after 25..60 frames; try another"
    )

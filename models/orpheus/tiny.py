"""Random Orpheus checkpoints in the released layout: config.json (`LlamaForCausalLM`, llama3 rope, tied
embeddings, vocab 156,940), generation_config.json, tokenizer.json (byte-level BPE padded to the Llama-3
base vocabulary, the 256 Llama-3 special tokens at 128000.. and the 28,684 `<custom_token_N>` at 128256..,
"<|begin_of_text|>" put in front by its post-processor), the weights as shards + model.safetensors.index.json,
and codec/ = a SNAC folder (config.json + pytorch_model.bin, weight norm as
`parametrizations.weight.original0/1`, the encoder included so `SNAC.from_pretrained` loads it strictly).

The "tiny" LM is random but built so that greedy decoding behaves like a trained Orpheus (parity tests need a
stream of valid frames that ends by itself): every embedding carries a constant feature, its frame
position's band as a one-hot, an "audio" flag and random code features; layer 0's MLP (its gate reads the
constant feature, so it acts linearly) moves a token's band one-hot to the next position's, so the argmax over
the WHOLE vocabulary always lands in the right band; layer 0's attention (zero queries and keys: a uniform
average) writes the fraction of audio tokens in the context into an "end" feature, which only the stop token's
embedding reads. The stop token's weight on it is calibrated (`calibrate_stop`) from one greedy run so that
greedy generation of CALIBRATION_TEXT stops by itself after STOP_AFTER frames. Every other weight is small
random noise. The "3b" size is Orpheus 3B's dimensions with plain random weights (bf16), for real-size runs.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import torch

from ..codecs.snac.config import SnacConfig
from ..codecs.snac.model import SnacDecoder
from ..layers import PagedBatch
from ..text_tokenizer import bytes_to_unicode
from ..weights import save_weights
from .config import OrpheusConfig, parse_config
from .layers import OrpheusWeights
from .tokens import (
    AUDIO_BASE,
    BOS,
    CODES,
    END_OF_SPEECH,
    END_OF_TEXT,
    FRAME_TOKENS,
    START_OF_SPEECH,
    band,
    prompt_ids,
    prompt_text,
)

SEED = 30
BASE_VOCAB = 128000
SPECIAL_TOKENS = 256
CUSTOM_TOKENS = 28684
VOCAB = BASE_VOCAB + SPECIAL_TOKENS + CUSTOM_TOKENS  # 156,940
CALIBRATION_TEXT = "Hello from Orpheus <laugh> streaming."
CALIBRATION_VOICE = "tara"
STOP_AFTER = 26  # greedy CALIBRATION_TEXT stops at the first frame from here a stop weight singles out
SEARCH_FRAMES = 14  # ... within this many frames

ROPE = {
    "rope_type": "llama3",
    "factor": 32.0,
    "low_freq_factor": 1.0,
    "high_freq_factor": 4.0,
    "original_max_position_embeddings": 8192,
}
SIZES: dict[str, dict[str, Any]] = {
    "tiny": dict(
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        max_position_embeddings=131072,
    ),
    # canopylabs/orpheus-3b-0.1-ft = Llama-3.2-3B's dimensions
    "3b": dict(
        hidden_size=3072,
        intermediate_size=8192,
        num_hidden_layers=28,
        num_attention_heads=24,
        num_key_value_heads=8,
        head_dim=128,
        max_position_embeddings=131072,
    ),
}
# SNAC: the tiny codec keeps snac_24khz's rates (so frames, hop and hold-back are the real ones), narrow.
SNAC_SIZES: dict[str, dict[str, Any]] = {
    "tiny": dict(encoder_dim=4, decoder_dim=32),
    "3b": dict(encoder_dim=48, decoder_dim=1024),  # hubertsiuzdak/snac_24khz
}


def model_config(size: str) -> dict[str, Any]:
    return {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "vocab_size": VOCAB,
        **SIZES[size],
        "rms_norm_eps": 1e-5,
        "rope_theta": 500000.0,
        "rope_scaling": ROPE,
        "tie_word_embeddings": True,
        "attention_bias": False,
        "attention_dropout": 0.0,
        "mlp_bias": False,
        "hidden_act": "silu",
        "bos_token_id": BOS,
        "eos_token_id": END_OF_TEXT,
        "torch_dtype": "bfloat16",
    }


def write_tokenizer(out: Path) -> None:
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, processors

    chars = list(bytes_to_unicode().values())
    vocab = {ch: i for i, ch in enumerate(chars)}
    vocab.update({f"<|unused_base_{i}|>": i for i in range(len(chars), BASE_VOCAB)})
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    named = {
        0: "<|begin_of_text|>",
        1: "<|end_of_text|>",
        6: "<|start_header_id|>",
        7: "<|end_header_id|>",
        9: "<|eot_id|>",
    }
    specials = [named.get(i, f"<|reserved_special_token_{i}|>") for i in range(SPECIAL_TOKENS)]
    customs = [f"<custom_token_{n}>" for n in range(CUSTOM_TOKENS)]
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in specials + customs])
    assert tok.token_to_id("<|begin_of_text|>") == BOS and tok.token_to_id("<custom_token_10>") == AUDIO_BASE
    tok.post_processor = processors.TemplateProcessing(
        single="<|begin_of_text|> $A", special_tokens=[("<|begin_of_text|>", BOS)]
    )
    tok.save(str(out / "tokenizer.json"))
    conf = {
        "bos_token": "<|begin_of_text|>",
        "eos_token": "<|eot_id|>",
        "tokenizer_class": "PreTrainedTokenizerFast",
        "model_max_length": 131072,
        "clean_up_tokenization_spaces": True,
    }
    (out / "tokenizer_config.json").write_text(json.dumps(conf, indent=2))


# --- the tiny LM's construction (module doc) -------------------------------------------------------
CONST, BAND0, AUDIO_FLAG, END_FEATURE, CODE0 = 0, 1, 8, 9, 10


def _tiny_weights(cfg: OrpheusConfig, gen: torch.Generator) -> OrpheusWeights:
    w = OrpheusWeights(cfg)
    H, inner = cfg.hidden_size, cfg.intermediate_size
    with torch.no_grad():
        for p in w.parameters():
            p.copy_(torch.randn(p.shape, generator=gen) * 0.02)
        for name, p in w.named_parameters():
            if name.endswith("layernorm.weight") or name == "model.norm.weight":
                p.fill_(1.0)
        E = w.model.embed_tokens.weight
        E.copy_(torch.randn(E.shape, generator=gen) * 0.3)
        E[:, CONST] = 1.0
        E[:, BAND0 : BAND0 + FRAME_TOKENS] = 0.0
        E[:, AUDIO_FLAG] = 0.0
        E[:, END_FEATURE] = 0.0
        for j in range(FRAME_TOKENS):
            lo, hi = band(j)
            E[lo:hi, BAND0 + j] = 3.0
            E[lo:hi, AUDIO_FLAG] = 1.0
        E[START_OF_SPEECH, BAND0 + FRAME_TOKENS - 1] = (
            3.0  # the prompt's last token: frame position 0 comes next
        )
        E[END_OF_SPEECH, BAND0] = 3.0  # competes with position 0's codes only
        E[END_OF_SPEECH, CODE0:] = 0.0  # no code features: its logit follows the end feature alone
        l0 = w.model.layers[0]
        att = l0.self_attn
        att.q_proj.weight.zero_()
        att.k_proj.weight.zero_()  # uniform attention over the context
        att.v_proj.weight.zero_()
        att.o_proj.weight.zero_()
        hd = cfg.head_dim
        att.v_proj.weight[0:hd, AUDIO_FLAG] = 1.0  # kv head 0 carries the audio flag
        att.o_proj.weight[END_FEATURE, 0:hd] = 4.0 / hd  # query head 0 (reads kv head 0) -> the end feature
        mlp = l0.mlp
        mlp.gate_proj.weight.zero_()
        mlp.up_proj.weight.zero_()
        mlp.down_proj.weight.zero_()
        mlp.gate_proj.weight[:, CONST] = 6.0  # silu of a large positive constant: the MLP acts linearly
        for j in range(FRAME_TOKENS):
            mlp.up_proj.weight[j, BAND0 + j] = 1.0
            mlp.down_proj.weight[BAND0 + j, j] = -1.2  # leave position j ...
            mlp.down_proj.weight[BAND0 + (j + 1) % FRAME_TOKENS, j] = 1.2  # ... for position j + 1
        code = slice(CODE0, H)
        n_code = H - CODE0
        rest = slice(FRAME_TOKENS, inner)
        mlp.up_proj.weight[rest, code] = torch.randn(inner - FRAME_TOKENS, n_code, generator=gen) * 0.3
        mlp.down_proj.weight[code, rest] = torch.randn(n_code, inner - FRAME_TOKENS, generator=gen) * 0.05
    return w


def _trace(w: OrpheusWeights, ids: list[int], frames: int) -> list[tuple[float, torch.Tensor]]:
    """Greedy decoding of `ids` for `frames` frames with the stop token never chosen; per frame start the
    best position-0 logit and the final hidden state (stop logit = hidden . stop embedding). Checks that the
    argmax over the whole vocabulary (the stop token aside) is always in the right band."""
    cfg = w.cfg
    ps = 64
    pages = math.ceil((len(ids) + FRAME_TOKENS * frames + 1) / ps)
    shape = (cfg.num_hidden_layers, pages, ps, cfg.num_key_value_heads, cfg.head_dim)
    k, v = torch.zeros(shape), torch.zeros(shape)
    row = SimpleNamespace(pages=list(range(pages)), request_id=0)
    dev = torch.device("cpu")
    out = []
    with torch.inference_mode():
        pb = PagedBatch.for_rows([row], [0], [len(ids)], ps, dev)
        h = w.hidden_states(torch.tensor([ids]), pb, k, v)[0, -1]
        pos = len(ids)
        for step in range(frames * FRAME_TOKENS):
            j = step % FRAME_TOKENS
            logits = w.logits(h)
            lo, hi = band(j)
            if j == 0:
                out.append((float(logits[lo:hi].max()), h.float().clone()))
            logits[END_OF_SPEECH] = float("-inf")
            tok = int(logits.argmax())
            if not lo <= tok < hi:
                raise RuntimeError(f"tiny Orpheus: greedy step {step} picked token {tok}, outside band {j}")
            pb = PagedBatch.for_rows([row], [pos], [1], ps, dev)
            h = w.hidden_states(torch.tensor([[tok]]), pb, k, v)[0, 0]
            pos += 1
    return out


def calibrate_stop(w: OrpheusWeights, ids: list[int], stop_after: int) -> float:
    """The stop embedding's weight on the end feature so that greedy stops right at frame `stop_after`'s
    start: above what that frame needs, below what every earlier frame would (with the margin split)."""
    trace = _trace(w, ids, stop_after + SEARCH_FRAMES)
    e = w.model.embed_tokens.weight[END_OF_SPEECH].float()
    need = []
    for best, h in trace:
        gap = float(best - h @ e)
        if h[END_FEATURE] > 0:
            need.append(gap / float(h[END_FEATURE]))
        elif gap > 0:  # no audio in the context yet: the stop token loses whatever its weight
            need.append(math.inf)
        else:
            raise RuntimeError(
                "tiny Orpheus: the stop token wins before any audio; the construction is broken"
            )
    for t in range(stop_after, len(need)):
        earlier = min(need[:t])
        if need[t] < earlier:  # the first frame from `stop_after` on that a weight can single out
            return (need[t] + earlier) / 2
    raise RuntimeError(
        f"tiny Orpheus: no frame from {stop_after} to {len(need) - 1} needs a smaller stop weight "
        f"than every earlier one ({[round(x, 3) for x in need]})"
    )


# --- SNAC ---------------------------------------------------------------------------------------
def snac_config(size: str) -> dict[str, Any]:
    return {
        "sampling_rate": 24000,
        "encoder_rates": [2, 4, 8, 8],
        "latent_dim": None,
        "decoder_rates": [8, 8, 4, 2],
        "attn_window_size": None,
        "codebook_size": CODES,
        "codebook_dim": 8,
        "vq_strides": [4, 2, 1],
        "noise": True,
        "depthwise": True,
        **SNAC_SIZES[size],
    }


def _wn(prefix: str, v: torch.Tensor, gen: torch.Generator, out: dict[str, torch.Tensor]) -> None:
    """A weight-normed tensor as torch's parametrization stores it: original0 = g [out, 1, ...],
    original1 = v."""
    g = v.norm(dim=tuple(range(1, v.dim())), keepdim=True) * (
        0.5 + torch.rand(v.shape[0], *[1] * (v.dim() - 1), generator=gen)
    )
    out[prefix + "parametrizations.weight.original0"] = g
    out[prefix + "parametrizations.weight.original1"] = v


def _conv(
    prefix: str,
    cout: int,
    cin: int,
    k: int,
    gen: torch.Generator,
    out: dict,
    bias: bool = True,
    transpose: bool = False,
    gain: float = 1.0,
) -> None:
    shape = (cin, cout, k) if transpose else (cout, cin, k)
    fan = shape[1] * k
    _wn(prefix, torch.randn(shape, generator=gen) * (gain / math.sqrt(fan)), gen, out)
    if bias:
        out[prefix + "bias"] = torch.randn(cout, generator=gen) * 0.02


def _residual(prefix: str, dim: int, groups: int, gen: torch.Generator, out: dict) -> None:
    out[prefix + "block.0.alpha"] = 0.5 + torch.rand(1, dim, 1, generator=gen)
    _conv(prefix + "block.1.", dim, dim // groups, 7, gen, out)
    out[prefix + "block.2.alpha"] = 0.5 + torch.rand(1, dim, 1, generator=gen)
    # small residual branches keep the activations O(1) through the twelve units (like a trained codec's), so
    # float rounding is not amplified into the PCM and tanh does not saturate
    _conv(prefix + "block.3.", dim, dim, 1, gen, out, gain=0.2)


def snac_state(cfg: SnacConfig, gen: torch.Generator) -> dict[str, torch.Tensor]:
    """Every tensor of `SNAC(**config)`'s state dict, random, with SNAC's names (encoder included)."""
    out: dict[str, torch.Tensor] = {}
    d = cfg.encoder_dim
    _conv("encoder.block.0.", d, 1, 7, gen, out)
    for i, stride in enumerate(cfg.encoder_rates):
        cin, d = d, d * 2
        groups = cin if cfg.depthwise else 1
        p = f"encoder.block.{i + 1}.block."
        for r in range(3):
            _residual(f"{p}{r}.", cin, groups, gen, out)
        out[f"{p}3.alpha"] = 0.5 + torch.rand(1, cin, 1, generator=gen)
        _conv(f"{p}4.", d, cin, 2 * stride, gen, out)
    _conv(f"encoder.block.{len(cfg.encoder_rates) + 1}.", d, 1 if cfg.depthwise else d, 7, gen, out)
    lat, cd = cfg.latent, cfg.codebook_dim
    for i in range(len(cfg.vq_strides)):
        p = f"quantizer.quantizers.{i}."
        _conv(p + "in_proj.", cd, lat, 1, gen, out)
        _conv(p + "out_proj.", lat, cd, 1, gen, out)
        out[p + "codebook.weight"] = torch.randn(cfg.codebook_size, cd, generator=gen)
    ch = cfg.decoder_dim
    _conv("decoder.model.0.", lat, 1, 7, gen, out)
    _conv("decoder.model.1.", ch, lat, 1, gen, out)
    cout = ch
    for i, stride in enumerate(cfg.decoder_rates):
        cin, cout = ch // 2**i, ch // 2 ** (i + 1)
        p = f"decoder.model.{2 + i}.block."
        out[p + "0.alpha"] = 0.5 + torch.rand(1, cin, 1, generator=gen)
        _conv(p + "1.", cout, cin, 2 * stride, gen, out, transpose=True)
        _wn(p + "2.linear.", torch.randn(cout, cout, 1, generator=gen) / math.sqrt(cout), gen, out)
        for r in range(3):
            _residual(f"{p}{3 + r}.", cout, cout, gen, out)
    n = 2 + len(cfg.decoder_rates)
    out[f"decoder.model.{n}.alpha"] = 0.5 + torch.rand(1, cout, 1, generator=gen)
    _conv(f"decoder.model.{n + 1}.", 1, cout, 7, gen, out, gain=0.03)
    return out


def write_snac(out: Path, size: str, gen: torch.Generator) -> None:
    out.mkdir(parents=True, exist_ok=True)
    d = snac_config(size)
    (out / "config.json").write_text(json.dumps(d, indent=2))
    cfg = SnacConfig(**{k: tuple(v) if isinstance(v, list) else v for k, v in d.items()})
    state = snac_state(cfg, gen)
    with torch.device("meta"):
        net = SnacDecoder(cfg)
    for k in net.state_dict():  # the decoder half must be exactly what the loader reads
        base = k[:-6] + "parametrizations.weight.original0" if k.endswith(".weight") else k
        assert k in state or base in state, k
    torch.save(state, str(out / "pytorch_model.bin"))


# --- the checkpoint ------------------------------------------------------------------------------
def build_tiny(out: Path, size: str = "tiny", seed: int = SEED, shard_bytes: int = 16 << 20) -> Path:
    """Write a complete random Orpheus checkpoint (LM + tokenizer + codec/) into `out`."""
    if size not in SIZES:
        raise ValueError(f"size must be one of {', '.join(SIZES)}, got {size!r}")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    gen = torch.Generator().manual_seed(seed)
    d = model_config(size)
    (out / "config.json").write_text(json.dumps(d, indent=2))
    write_tokenizer(out)
    cfg = parse_config(d, str(out / "config.json"))
    # generation_config.json as the release has it (bos/eos only): sampling defaults are canopy's
    (out / "generation_config.json").write_text(
        json.dumps({"bos_token_id": BOS, "eos_token_id": END_OF_TEXT})
    )
    if size == "tiny":
        w = _tiny_weights(cfg, gen)
        from tokenizers import Tokenizer

        tok = Tokenizer.from_file(str(out / "tokenizer.json"))
        ids = prompt_ids(tok.encode(prompt_text(CALIBRATION_TEXT, CALIBRATION_VOICE)).ids)
        with torch.no_grad():
            w.model.embed_tokens.weight[END_OF_SPEECH, END_FEATURE] = calibrate_stop(w, ids, STOP_AFTER)
        sd = {k: v for k, v in w.state_dict().items()}
        save_weights(sd, out, shard_bytes=shard_bytes)
    else:
        sd = _random_state(cfg, gen)
        save_weights(sd, out)
    write_snac(out / "codec", size, gen)
    return out


def _random_state(cfg: OrpheusConfig, gen: torch.Generator) -> dict[str, torch.Tensor]:
    """Plain random bf16 weights at the configured size, drawn tensor by tensor (a 3B model never exists in
    fp32 at once)."""
    with torch.device("meta"):
        w = OrpheusWeights(cfg)
    sd = {}
    for k, p in w.state_dict().items():
        if k.endswith("norm.weight"):
            sd[k] = torch.ones(p.shape, dtype=torch.bfloat16)
        else:
            t = torch.empty(p.shape, dtype=torch.bfloat16)
            sd[k] = t.normal_(0.0, 0.02, generator=gen)
    return sd

"""Build a random Kyutai TTS checkpoint in the released layout of kyutai/tts-1.6b-en_fr WITH MOSHI'S OWN
CLASSES (`moshi.models.lm.LMModel` through `loaders.get_moshi_lm`, `loaders.get_mimi`): a script run by the
Kyutai oracle interpreter (moshi 0.2.13, scripts/setup_oracle_kyutai.sh), never imported by voxcli.

    python moshi_build.py OUT_DIR SIZE_JSON

Written (as the release): config.json (`model_type` "tts", the LM keys, `conditioners`, `fuser`,
`tts_config`, `model_id`, `lm_gen_config`, `moshi_name`, `mimi_name`, `tokenizer_name`), the LM safetensors
with attention stacked (`self_attn.in_proj_weight` / `self_attn.out_proj.weight`, moshi's load hook splits
them per weight set), the Mimi safetensors under moshi's names (its attention stacked the same way), a
sentencepiece tokenizer trained here, and one voice `voices/<name>.wav.<sig>@<epoch>.safetensors` holding
`speaker_wavs` [1, 512, 125] with the release's metadata. A size may name `mimi_config` (moshi's own
`mimi_config_name` key, a small Mimi for tests); without it moshi builds the fixed released Mimi.

How a random model ends: moshi's state machine forces a new word after `max_padding` pads and ends one
step past the last word, so every run ends by itself. The text head's rows for `new_word` (0) and `pad`
(3) are scaled by `text_head_scale` so that greedy decoding picks between them by the model's own scores
(a word ends when the model says so) rather than always by the padding limit.
"""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import sentencepiece as spm
import torch
from safetensors.torch import save_file

CORPUS = (
    "hello world this is a tiny random kyutai text to speech model built for tests "
    "bonjour le monde ceci est un petit modele de synthese vocale aleatoire "
    "the quick brown fox jumps over the lazy dog while words arrive one by one"
)


def train_tokenizer(out: Path, vocab: int) -> None:
    """A byte-fallback sentencepiece model whose ids 0..3 are the specials the TTS reserves (new word,
    main speaker, other speaker, pad), so no word encodes to them."""
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(CORPUS.split(" ") * 4),
        model_writer=model,
        vocab_size=vocab,
        model_type="bpe",
        byte_fallback=True,
        character_coverage=1.0,
        unk_id=0,
        bos_id=1,
        eos_id=2,
        pad_id=3,
        hard_vocab_limit=False,
        minloglevel=2,
    )
    (out / "tokenizer.model").write_bytes(model.getvalue())


def stacked(state: dict[str, torch.Tensor], mults: dict[str, int]) -> dict[str, torch.Tensor]:
    """moshi's in-memory per-weight-set names (`in_projs.{i}.weight`) -> the released stacked ones."""
    out: dict[str, torch.Tensor] = {}
    groups: dict[str, list[tuple[int, torch.Tensor]]] = {}
    for k, v in state.items():
        for part, target in (("in_projs", "in_proj_weight"), ("out_projs", "out_proj.weight")):
            marker = f".{part}."
            if marker in k:
                head, tail = k.split(marker)
                i = int(tail.split(".")[0])
                groups.setdefault(f"{head}.{target}", []).append((i, v))
                break
        else:
            out[k] = v.contiguous()
    for name, parts in groups.items():
        parts.sort(key=lambda p: p[0])
        out[name] = torch.cat([p[1] for p in parts], dim=0).contiguous()
    return out


def main() -> None:
    out, size = Path(sys.argv[1]), json.loads(sys.argv[2])
    out.mkdir(parents=True, exist_ok=True)
    from moshi.models import loaders

    torch.manual_seed(int(size.get("seed", 0)))
    train_tokenizer(out, int(size["text_card"]))
    text_card = spm.SentencePieceProcessor(model_file=str(out / "tokenizer.model")).get_piece_size()
    lm = dict(size["lm"])
    dim = lm["dim"]
    n_q = int(size.get("n_q", 32))
    config = {
        "card": int(size.get("card", 2048)),
        "n_q": n_q,
        "dep_q": n_q,
        "delays": [0, 0] + [2] * (n_q - 1),
        "text_card": text_card,
        "existing_text_padding_id": 3,
        "hidden_scale": 4.125,
        "causal": True,
        "layer_scale": None,
        "max_period": 10000,
        "gating": "silu",
        "norm": "rms_norm_f32",
        "positional_embedding": "rope",
        "depformer_multi_linear": True,
        "depformer_pos_emb": "none",
        "depformer_weights_per_step": True,
        "demux_second_stream": True,
        "text_card_out": None,
        "cross_attention": True,
        **lm,
        "depformer_weights_per_step_schedule": list(range(8)) + [8] * 8 + [9] * 8 + [10] * 8,
        "conditioners": {
            "speaker_wavs": {"type": "tensor", "tensor": {"dim": 512}},
            "cfg": {
                "type": "lut",
                "lut": {
                    "n_bins": 7,
                    "dim": 16,
                    "tokenizer": "noop",
                    "possible_values": ["1.0", "1.5", "2.0", "2.5", "3.0", "3.5", "4.0"],
                },
            },
            "control": {
                "type": "lut",
                "lut": {"dim": dim, "n_bins": 1, "tokenizer": "noop", "possible_values": ["ok"]},
            },
        },
        "fuser": {
            "cross_attention_pos_emb": True,
            "cross_attention_pos_emb_scale": 1,
            "sum": ["control", "cfg"],
            "prepend": [],
            "cross": ["speaker_wavs"],
        },
        "tts_config": {"audio_delay": 1.28, "second_stream_ahead": 2},
        "model_id": {"sig": "1e68beda", "epoch": 240},
        "model_type": "tts",
        "lm_gen_config": {"temp": 0.6, "text_temp": 0.6},
        "moshi_name": "dsm_tts_1e68beda@240.safetensors",
        "mimi_name": "tokenizer-e351c8d8-checkpoint125.safetensors",
        "tokenizer_name": "tokenizer.model",
    }
    if size["n_q"] != 32:
        config["depformer_weights_per_step_schedule"] = list(range(n_q))
    mimi_config = size.get("mimi_config")
    if mimi_config is not None:
        config["mimi_config_name"] = "mimi_config.json"
        (out / "mimi_config.json").write_text(json.dumps(mimi_config, indent=2))
    (out / "config.json").write_text(json.dumps(config, indent=2))

    raw = dict(config)
    for k in ("moshi_name", "mimi_name", "tokenizer_name", "mimi_config_name", "model_type", "lm_gen_config",
              "tts_config", "model_id"):
        raw.pop(k, None)
    kwargs = json.loads(json.dumps(raw))
    dtype = getattr(torch, size.get("dtype", "float32"))
    model = loaders.get_moshi_lm(None, lm_kwargs=kwargs, device="cpu", dtype=dtype)
    with torch.no_grad():
        # moshi's own init leaves the conditioners' output projections at nn.Linear's default and the
        # depformer at its own; give every floating tensor a scale that keeps activations O(1).
        for name, p in model.named_parameters():
            if name.endswith("alpha"):
                p.normal_(1.0, 0.1)
            elif p.dim() >= 2:
                p.normal_(0.0, 1.0 / max(p.shape[-1], 1) ** 0.5)
            else:
                p.normal_(0.0, 0.2)
        if dtype != torch.float32:  # moshi keeps its conditioners in float32 (loaders.get_moshi_lm)
            model.condition_provider.float()
        scale = float(size.get("text_head_scale", 4.0))
        model.text_linear.weight[0] *= scale
        model.text_linear.weight[3] *= scale
    state = {k: v for k, v in model.state_dict().items()}
    save_file(stacked(state, {}), str(out / config["moshi_name"]))

    mimi = loaders.get_mimi(None, mimi_config, device="cpu", num_codebooks=n_q)
    with torch.no_grad():
        for name, p in mimi.named_parameters():
            if "embedding_sum" in name or "cluster_usage" in name:
                continue
            if p.dim() >= 2:
                p.normal_(0.0, 1.0 / max(p[0].numel(), 1) ** 0.5)
            elif "scale" in name:
                p.fill_(0.1)
            else:
                p.normal_(0.0, 0.05)
        for name, b in mimi.named_buffers():
            if name.endswith("cluster_usage"):
                b.uniform_(0.5, 2.0)
            elif name.endswith("embedding_sum"):
                b.normal_(0.0, 1.0)
            elif name.endswith("_initialized"):
                b.fill_(1.0)
        # the last conv small enough that the waveform stays within [-1, 1] (a 16-bit WAV holds it)
        mimi.decoder.model[-1].conv.conv.weight.mul_(0.3)
    save_file(stacked(dict(mimi.state_dict()), {}), str(out / config["mimi_name"]))

    voices = out / "voices"
    voices.mkdir(exist_ok=True)
    g = torch.Generator().manual_seed(int(size.get("seed", 0)) + 1)
    for name in size.get("voices", ["tiny-default", "tiny-other"]):
        emb = torch.randn(1, 512, 125, generator=g)
        save_file({"speaker_wavs": emb}, str(voices / f"{name}.wav.1e68beda@240.safetensors"),
                  metadata={"sig": "1e68beda", "epoch": "240"})


if __name__ == "__main__":
    main()

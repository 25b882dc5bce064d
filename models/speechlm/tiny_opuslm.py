"""Random-weight OpusLM-like checkpoints in the released layout: a 9-stream unified LM (1 SSL stream + 8
codec streams) whose codec is ESPnet's DAC as an espnet_model_zoo pack (meta.yaml -> exp/codec/config.yaml
+ exp/codec/model.pth with ESPnetGANCodecModel's keys and weight-norm pairs).

Sizes: "tiny" (tests: a 2-layer Llama) and "real" (OpusLM-Dialogue's backbone, SmolLM2-1.7B's
published config.json: hidden 2048, 24 layers, 32 heads, MLP 8192, vocabulary 49152, tied embeddings,
rope theta 130000; stored in bfloat16, 3.5 GB). Assumed where nothing is published: the SSL k-means size
(1024) and the DAC's generator sizes (ESPnet's DAC defaults at 16 kHz: hidden 128, 32 filters, ratios
8, 5, 4, 2, a 2-layer LSTM, 8 x 1024 codebooks of dim 8).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch

from .backbone import ParallelLM
from .config import NUM_SPECIAL, build_layout, parse_backbone
from .espnet_dac import DacNet, DacShape, file_key

LLAMA_TINY = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64,
              "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
              "num_key_value_heads": 2, "head_dim": 16, "rms_norm_eps": 1e-5, "max_position_embeddings": 4096,
              "vocab_size": 64, "rope_theta": 10000.0, "tie_word_embeddings": False}
SMOLLM2_1_7B = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 2048,
                "intermediate_size": 8192, "num_hidden_layers": 24, "num_attention_heads": 32,
                "num_key_value_heads": 32, "rms_norm_eps": 1e-5, "max_position_embeddings": 8192,
                "vocab_size": 49152, "rope_theta": 130000.0, "tie_word_embeddings": True}
DAC_TINY = {"hidden_dim": 16, "codebook_dim": 8, "encdec_n_filters": 4, "encdec_ratios": [8, 5, 4, 2],
            "quantizer_n_q": 8, "quantizer_bins": 64}
DAC_REAL = {"hidden_dim": 128, "codebook_dim": 8, "encdec_n_filters": 32, "encdec_ratios": [8, 5, 4, 2],
            "quantizer_n_q": 8, "quantizer_bins": 1024}
SIZES = {"tiny": (LLAMA_TINY, DAC_TINY, 10), "real": (SMOLLM2_1_7B, DAC_REAL, 1024)}
INFERENCE = {"enforce_modality": ["text", "audio"],
             "text": {"temperature": 0.6, "topk": 20, "cfg": 1, "max_step": 16, "min_step": 1},
             "audio": {"temperature": 0.8, "topk": 20, "cfg": 1, "max_step": 257, "min_step": 50},
             "dtype": "bfloat16"}


def write_dac_pack(out: Path, generator_params: dict[str, Any], g: torch.Generator,
                   sample_rate: int = 16000) -> DacShape:
    """ESPnet's DAC pack layout with random decode-half weights (the encoder is not written: nothing here
    encodes; ESPnet's own loader would keep its random init for it)."""
    import yaml

    conf = {"sampling_rate": sample_rate, "generator_params": generator_params,
            "use_mel_loss": False, "use_dual_decoder": False}
    shape = DacShape.from_config({"codec": "dac", "codec_conf": conf}, "tiny DAC")
    net = DacNet(shape, shape.n_q)
    sd: dict[str, torch.Tensor] = {}
    for k, v in net.state_dict().items():
        r = torch.randn(v.shape, generator=g)
        key = file_key(k)
        if k.endswith("alpha"):
            sd[key] = 0.5 + torch.rand(v.shape, generator=g)
        elif k.endswith("bias"):
            sd[key] = 0.05 * r
        elif "embed" in k:
            sd[key] = r
        elif k.endswith(".weight") and k.startswith("decoder.") and "lstm" not in k:
            base = key[: -len("weight")]
            sd[base + "parametrizations.weight.original1"] = r  # direction v
            g_shape = (r.shape[0],) + (1,) * (r.dim() - 1)  # magnitude: each row's norm near 1, unit gain
            sd[base + "parametrizations.weight.original0"] = 0.5 + torch.rand(g_shape, generator=g)
        else:
            sd[key] = r / max(1, v.shape[-1]) ** 0.5
    exp = out / "exp" / "codec"
    exp.mkdir(parents=True, exist_ok=True)
    (exp / "config.yaml").write_text(yaml.safe_dump({"codec": "dac", "codec_conf": conf, "model_conf": {}}))
    torch.save(sd, exp / "model.pth")
    (out / "meta.yaml").write_text(yaml.safe_dump({"files": {"model_file": "exp/codec/model.pth"},
                                                   "yaml_files": {"train_config": "exp/codec/config.yaml"}}))
    return shape


def _tokenizer(path: Path, words: int) -> None:
    from tokenizers import Tokenizer, models, pre_tokenizers

    vocab = ["[UNK]", "<pad>"] + [f"w{i}" for i in range(words - 2)]
    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(vocab)}, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.save(str(path))


def build_opuslm(out: Path, size: str = "tiny", seed: int = 0, inference: dict[str, Any] | None = None,
                 weight_std: float = 0.1) -> Path:
    import yaml

    if size not in SIZES:
        raise ValueError(f"size must be one of {', '.join(SIZES)}, got {size!r}")
    backbone, dac, ssl_k = SIZES[size]
    out = Path(out)
    bdir, cdir = out / "backbone", out / "dac"
    bdir.mkdir(parents=True, exist_ok=True)
    (bdir / "config.json").write_text(json.dumps(backbone, indent=1))
    _tokenizer(bdir / "tokenizer.json", backbone["vocab_size"])
    g = torch.Generator().manual_seed(seed)
    shape = write_dac_pack(cdir, dac, g)
    tied = bool(backbone["tie_word_embeddings"])
    train: dict[str, Any] = {
        "job_type": "speechlm",
        "multimodal_io": {"text": {"tokenizer_name": "backbone"},
                          "discrete_audio": {"codec_choice": "ESPnet", "codec_hf_model_tag": "dac",
                                             "codec_max_token_per_frame": shape.n_q, "ssl_choice": "ESPnet",
                                             "ssl_hf_model_tag": "espnet/xeus", "delay_interleave": True}},
        "model": {"model_choice": "parallel", "model_hf_tag": "backbone",
                  "model_conf": {"tie_word_embeddings": tied}},
    }
    words = backbone["vocab_size"]
    widths = [ssl_k + 1] + [shape.bins + 1] * shape.n_q
    start = NUM_SPECIAL + words
    iv, pos = [], start
    for w in widths:
        iv.append([pos, pos + w])
        pos += w
    train["vocab_intervals"] = {"special_token": [[0, NUM_SPECIAL]], "text": [[NUM_SPECIAL, start]],
                                "discrete_audio": iv}
    layout = build_layout(train, words, size)
    with torch.device("meta"):  # real size: never a float32 copy of 1.7 B parameters
        lm = ParallelLM(parse_backbone(backbone, size), layout.vocab_size, layout.num_stream)
    state = {}
    for k, v in lm.state_dict().items():
        if tied and k == "lm_head.weight":
            continue  # ESPnet ties it to the embedding; the loader does the same
        if k == "vocab_weight":
            state[k] = torch.ones(v.shape, dtype=torch.float32)
        elif k.endswith("norm.weight"):
            state[k] = (1 + 0.1 * torch.randn(v.shape, generator=g)).to(torch.bfloat16)
        else:
            t = torch.empty(v.shape, dtype=torch.bfloat16)
            state[k] = t.normal_(0, weight_std, generator=g)
    torch.save({"module": state}, out / "model.pt")
    del state
    (out / f"train_opuslm_{size}.yaml").write_text(yaml.safe_dump(train, sort_keys=False))
    (out / "inference.yaml").write_text(yaml.safe_dump(inference or INFERENCE, sort_keys=False))
    return out

"""A tiny random-weight ESPnet SpeechLM checkpoint in the released layout (the `demo-speechlm` alias and
tests that need no oracle): a Bagpiper-like Qwen3 backbone folder (config.json + tokenizer.json), model.pt
= {"module": state_dict} (BF16 tensors, FP32 vocab_weight), train.yaml recording the token layout,
inference.yaml, and a tiny X-Codec folder holding the decode half of XcodecModel's state dict.

Random weights: the text phase is a few random words and the audio is not speech.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch

from .backbone import ParallelLM
from .config import NUM_SPECIAL, build_layout, parse_backbone
from .xcodec import XcodecNet, XcodecShape, file_key

WORDS = 64
BACKBONE = {"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "hidden_size": 64,
            "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
            "num_key_value_heads": 2,
            "head_dim": 16, "rms_norm_eps": 1e-6, "max_position_embeddings": 4096, "vocab_size": WORDS,
            "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0}, "tie_word_embeddings": False}
XCODEC = {"model_type": "xcodec", "sample_rate": 16000, "codebook_size": 64, "target_bandwidths": [2.4],
          "acoustic_model_config": {"downsampling_ratios": [2, 4, 5, 8], "upsampling_ratios": [8, 5, 4, 2],
                                    "decoder_hidden_size": 32, "hidden_size": 8, "encoder_hidden_size": 4},
          # a tiny HuBERT whose strides multiply to the hop (320), as the released one's do: the encoder
          # (audio in) gives one frame per hop on both of its branches
          "semantic_model_config": {"hidden_size": 8, "num_hidden_layers": 1, "num_attention_heads": 2,
                                    "intermediate_size": 16, "conv_dim": [8] * 7,
                                    "conv_stride": [5, 2, 2, 2, 2, 2, 2],
                                    "conv_kernel": [10, 3, 3, 3, 3, 2, 2],
                                    "num_conv_pos_embeddings": 16, "num_conv_pos_embedding_groups": 2}}
INFERENCE = {"enforce_modality": ["text", "audio"],
             "text": {"temperature": 0.6, "topk": 20, "cfg": 1, "max_step": 16, "min_step": 1},
             "audio": {"temperature": 0.8, "topk": 20, "cfg": 3, "max_step": 257, "min_step": 50},
             "dtype": "float32"}


def _tokenizer(path: Path, n_words: int = WORDS) -> None:
    from tokenizers import Tokenizer, models, pre_tokenizers

    words = ["[UNK]", "<pad>"] + [f"w{i}" for i in range(n_words - 2)]
    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.save(str(path))


def _codec_init(key: str, shape: tuple[int, ...], g: torch.Generator) -> torch.Tensor:
    """Random decoder weights that keep the signal near unit scale through the stack."""
    r = torch.randn(shape, generator=g)
    if key.endswith("alpha"):
        return 1 + 0.1 * r  # Snake divides by alpha
    if key.endswith("bias"):
        return 0.01 * r
    if "embed" in key:
        return r
    fan = max(1, int(torch.tensor(shape[1:]).prod()))
    gain = 0.005 if key == "decoder.conv2.weight" else 1.0  # Snake stages grow the signal: bring it to ~1
    return gain * r / fan**0.5


def _encoder_weights(config: Path, n_codec: int, seed: int) -> dict[str, torch.Tensor]:
    """X-Codec's encode half (HuBERT, semantic encoder, DAC encoder, fc), random, from a generator of its
    own so the decoder's and the LM's weights stay what they were before the checkpoint could hear. The
    codebooks are the decoder's (`quantizer.quantizers.N.codebook.embed`, already written)."""
    from .xcodec_encoder import XcodecEncoderNet, read_config

    cfg, n_q = read_config(config, n_codec)
    g = torch.Generator().manual_seed(seed + 1)
    out = {}
    for k, v in XcodecEncoderNet(cfg, n_q).state_dict().items():
        if k.startswith("quantizer."):
            continue
        if k.endswith("alpha") or "norm" in k and k.endswith("weight"):
            out[k] = 1 + 0.1 * torch.randn(v.shape, generator=g)
        elif v.dim() == 1:
            out[k] = 0.01 * torch.randn(v.shape, generator=g)
        else:
            out[k] = torch.randn(v.shape, generator=g) / max(1, v[0].numel()) ** 0.5
    return out


def build_tiny(out: Path, seed: int = 0, inference: dict[str, Any] | None = None,
               weight_std: float = 0.1, backbone: dict[str, Any] | None = None,
               xcodec: dict[str, Any] | None = None) -> Path:
    """`backbone` / `xcodec`: other sizes (real_hearing.py: SmolLM2-1.7B with the released X-Codec's)."""
    import yaml
    from safetensors.torch import save_file

    out = Path(out)
    bdir, cdir = out / "backbone", out / "xcodec"
    bdir.mkdir(parents=True, exist_ok=True)
    cdir.mkdir(parents=True, exist_ok=True)
    backbone, xcodec = backbone or BACKBONE, xcodec or XCODEC
    words = int(backbone["vocab_size"])
    (bdir / "config.json").write_text(json.dumps(backbone, indent=1))
    _tokenizer(bdir / "tokenizer.json", words)
    (cdir / "config.json").write_text(json.dumps(xcodec, indent=1))
    g = torch.Generator().manual_seed(seed)
    n_codec = 8
    shape = XcodecShape.read(cdir / "config.json", n_codec)
    net = XcodecNet(shape)
    sd = {file_key(k): _codec_init(k, tuple(v.shape), g) for k, v in net.state_dict().items()}
    sd.update(_encoder_weights(cdir / "config.json", n_codec, seed))
    save_file(sd, str(cdir / "model.safetensors"))

    train = {
        "job_type": "speechlm",
        # folders relative to the checkpoint (the loader looks there first), so the folder can move
        "multimodal_io": {"text": {"tokenizer_name": "backbone"},
                          "discrete_audio": {"codec_choice": "Xcodec", "codec_hf_model_tag": "xcodec",
                                             "codec_max_token_per_frame": n_codec, "delay_interleave": True}},
        "model": {"model_choice": "parallel", "model_hf_tag": "backbone", "model_conf": {}},
        "preprocessor": {"audio_input": "discrete_audio", "audio_output": "discrete_audio",
                         "loss_region": "assistant"},
    }
    widths = [xcodec["codebook_size"] + 1] * n_codec
    start = NUM_SPECIAL + words
    train["vocab_intervals"] = {
        "special_token": [[0, NUM_SPECIAL]], "text": [[NUM_SPECIAL, NUM_SPECIAL + words]],
        "discrete_audio": [[start + i * w, start + (i + 1) * w] for i, w in enumerate(widths)]}
    layout = build_layout(train, words, "tiny")
    with torch.device("meta"):  # shapes only: a real-size backbone is written tensor by tensor
        lm = ParallelLM(parse_backbone(backbone, "tiny"), layout.vocab_size, layout.num_stream)
    state = {}
    for k, v in lm.state_dict().items():
        if k == "vocab_weight":
            state[k] = torch.ones(v.shape, dtype=torch.float32)
        elif k.endswith("norm.weight"):
            state[k] = (1 + 0.1 * torch.randn(v.shape, generator=g)).to(torch.bfloat16)
        else:
            state[k] = (torch.randn(v.shape, generator=g) * weight_std).to(torch.bfloat16)
    torch.save({"module": state}, out / "model.pt")
    (out / "train_tiny.yaml").write_text(yaml.safe_dump(train, sort_keys=False))
    (out / "inference.yaml").write_text(yaml.safe_dump(inference or INFERENCE, sort_keys=False))
    return out

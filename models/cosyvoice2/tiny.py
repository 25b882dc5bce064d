"""Deterministic random-weight CosyVoice 2 checkpoints in the released layout (CosyVoice2-0.5B's), written
without upstream code by the library's builder (models/flowlm/tiny.py: its yaml template, tokenizer, Qwen2
folder, randomiser and speaker format), given what CosyVoice 2 has of its own:

    OUT/cosyvoice2.yaml            upstream's HyperPyYAML structure (Qwen2LM, CausalMaskedDiffWithXvec with
                                   UpsampleConformerEncoder + CausalConditionalDecoder, HiFTGenerator)
    OUT/llm.pt, flow.pt, hift.pt   state dicts with upstream's names (hift.pt weight-normed)
    OUT/spk2info.pt                one zero-shot speaker in `add_zero_shot_spk`'s format
    OUT/CosyVoice-BlankEN/         Qwen2 config.json, tokenizer files, a stub model.safetensors

Upstream's CosyVoice2 class loads it strictly (tests/test_cosyvoice2_parity.py). The audio is not speech.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from ..flowlm.tiny import Generation, YamlVariant, write_checkpoint
from .config import YAML, parse_config
from .flow import FlowWeights
from .hift import HiFTWeights
from .lm import CosyVoice2LMWeights

SEED = 2345

SIZES: dict[str, dict[str, Any]] = {
    "tiny": dict(
        qwen=dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2),
        # upstream hard-codes a 512-wide look-ahead layer and upsampler: the encoder is 512 wide at any size
        enc=dict(d=512, heads=4, units=256, blocks=1),
        dec=dict(ch=64, heads=4, head_dim=16, n_blocks=1, mid=2),
        hift=dict(base_channels=32, f0_cond_channels=32),
        prompt_tokens=15,
    ),
    # published sizes (CosyVoice2-0.5B, its cosyvoice2.yaml): real-size memory / speed runs
    "real": dict(
        qwen=dict(hidden_size=896, intermediate_size=4864, num_hidden_layers=24, num_attention_heads=14,
                  num_key_value_heads=2),
        enc=dict(d=512, heads=8, units=2048, blocks=6),
        dec=dict(ch=256, heads=8, head_dim=64, n_blocks=4, mid=12),
        hift=dict(base_channels=512, f0_cond_channels=512),
        prompt_tokens=75,
    ),
}

FLOW = """\
flow: !new:cosyvoice.flow.flow.CausalMaskedDiffWithXvec
    input_size: {d}
    output_size: 80
    spk_embed_dim: !ref <spk_embed_dim>
    output_type: 'mel'
    vocab_size: 6561
    input_frame_rate: !ref <token_frame_rate>
    only_mask_loss: True
    token_mel_ratio: !ref <token_mel_ratio>
    pre_lookahead_len: 3
    encoder: !new:cosyvoice.transformer.upsample_encoder.UpsampleConformerEncoder
        output_size: {d}
        attention_heads: {heads}
        linear_units: {units}
        num_blocks: {blocks}
        dropout_rate: 0.1
        positional_dropout_rate: 0.1
        attention_dropout_rate: 0.1
        normalize_before: True
        input_layer: 'linear'
        pos_enc_layer_type: 'rel_pos_espnet'
        selfattention_layer_type: 'rel_selfattn'
        input_size: {d}
        use_cnn_module: False
        macaron_style: False
        static_chunk_size: !ref <chunk_size>
    decoder: !new:cosyvoice.flow.flow_matching.CausalConditionalCFM
        in_channels: 240
        n_spks: 1
        spk_emb_dim: 80
        cfm_params: !new:omegaconf.DictConfig
            content:
                sigma_min: 1e-06
                solver: 'euler'
                t_scheduler: 'cosine'
                training_cfg_rate: 0.2
                inference_cfg_rate: 0.7
                reg_loss_type: 'l1'
        estimator: !new:cosyvoice.flow.decoder.CausalConditionalDecoder
            in_channels: 320
            out_channels: 80
            channels: [{ch}]
            dropout: 0.0
            attention_head_dim: {head_dim}
            n_blocks: {n_blocks}
            num_mid_blocks: {mid}
            num_heads: {dheads}
            act_fn: 'gelu'
            static_chunk_size: !ref <chunk_size> * <token_mel_ratio>
            num_decoding_left_chunks: !ref <num_decoding_left_chunks>

"""


def _flow_scale(fsd: dict[str, torch.Tensor]) -> None:
    """Convolutions at a He-like scale, so the random UNet's output is not ~0."""
    for k in list(fsd):
        if fsd[k].ndim == 3:
            fsd[k] = fsd[k] / 0.02 * (1.0 / (fsd[k].shape[1] * fsd[k].shape[2])) ** 0.5


COSYVOICE2 = Generation(YAML, parse_config, CosyVoice2LMWeights, FlowWeights, HiFTWeights,
                        speaker_prompt="This is my voice.", flow_scale=_flow_scale)


def cosyvoice2_yaml(size: str, s: dict[str, Any]) -> str:
    """The library's yaml with CosyVoice 2's own parts: Qwen2LM, the conformer encoder + UNet flow, the
    non-causal HiFT and F0 predictor, the tokenizer's default version, fmax 8000."""
    e, d = s["enc"], s["dec"]
    return YamlVariant(
        title=f"random CosyVoice 2 ({size}): upstream's structure "
              "(examples/libritts/cosyvoice2/conf/cosyvoice2.yaml)",
        llm_class="Qwen2LM",
        flow=FLOW.format(d=e["d"], heads=e["heads"], units=e["units"], blocks=e["blocks"], ch=d["ch"],
                         head_dim=d["head_dim"], n_blocks=d["n_blocks"], mid=d["mid"], dheads=d["heads"]),
        hift_class="HiFTGenerator",
        hift_extra="",
        f0_class="ConvRNNF0Predictor",
        tokenizer_extra="",
        fmax="8000",
    ).render(s["qwen"]["hidden_size"], **s["hift"])


def build_tiny(
    out: str | Path, size: str = "tiny", seed: int = SEED, eos_at: tuple[str, int] | None = None,
    clone_models: bool = False,
) -> Path:
    """Write a checkpoint into `out` (replaced); `eos_at=(text, n)`: greedy decoding of `text` with the
    saved speaker stops after exactly n tokens (models/flowlm/calibrate.py); `clone_models` adds tiny
    random speech_tokenizer_v2.onnx and campplus.onnx (needs `onnx`) so that --ref-audio runs."""
    if size not in SIZES:
        raise ValueError(f"size must be one of {', '.join(SIZES)}, got {size!r}")
    s = SIZES[size]
    from .program import CosyVoice2Program  # what calibrate_eos loads the folder with (eos_at)

    yaml_text = cosyvoice2_yaml(size, s)
    folder = write_checkpoint(Path(out), COSYVOICE2, yaml_text, s, seed, eos_at, CosyVoice2Program)
    if clone_models:
        from ..flowlm.tiny_onnx import write_tiny_onnx  # onnx only when asked for
        from .config import SPEECH_TOKENIZER

        write_tiny_onnx(folder, seed=seed, tokenizer=SPEECH_TOKENIZER)
    return folder

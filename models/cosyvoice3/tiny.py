"""Deterministic random-weight CosyVoice 3 checkpoints in the real layout (Fun-CosyVoice3-0.5B's), written
without upstream code by the library's builder (models/flowlm/tiny.py: its yaml template, tokenizer,
Qwen2 folder, randomiser and speaker format), given what CosyVoice 3 has of its own: CosyVoice3LM, the
CausalMaskedDiffWithDiT flow, the causal HiFT and its F0 predictor. Upstream loads the folder strictly
(tests/test_cosyvoice_parity.py). The audio is not speech.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Any

from ..flowlm.lm import SpeechLMWeights
from ..flowlm.tiny import SPEAKER, Generation, YamlVariant, write_checkpoint
from ..flowlm.tiny import speaker_entry as _speaker_entry
from .config import YAML, parse_config
from .flow import FlowWeights
from .hift import HiFTWeights

__all__ = ["SEED", "SIZES", "SPEAKER", "build_tiny", "speaker_entry"]

SEED = 1234
SPEAKER_PROMPT = "You are a helpful assistant.<|endofprompt|>This is my voice."

SIZES: dict[str, dict[str, Any]] = {
    "tiny": dict(
        qwen=dict(
            hidden_size=64,
            intermediate_size=128,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
        ),
        dit=dict(dim=64, depth=2, heads=4, dim_head=16, ff_mult=2),
        lookahead=64,
        hift=dict(base_channels=32, f0_cond_channels=32),
        prompt_tokens=15,
    ),
    # CPU benchmarks: a DiT a quarter as wide as the real one, a HiFT half as wide
    "bench": dict(
        qwen=dict(
            hidden_size=256,
            intermediate_size=512,
            num_hidden_layers=4,
            num_attention_heads=4,
            num_key_value_heads=2,
        ),
        dit=dict(dim=256, depth=6, heads=4, dim_head=64, ff_mult=2),
        lookahead=256,
        hift=dict(base_channels=128, f0_cond_channels=128),
        prompt_tokens=25,
    ),
    # published sizes (Fun-CosyVoice3-0.5B): for real-size memory / speed runs with random weights
    "real": dict(
        qwen=dict(
            hidden_size=896,
            intermediate_size=4864,
            num_hidden_layers=24,
            num_attention_heads=14,
            num_key_value_heads=2,
        ),
        dit=dict(dim=1024, depth=22, heads=16, dim_head=64, ff_mult=2),
        lookahead=1024,
        hift=dict(base_channels=512, f0_cond_channels=512),
        prompt_tokens=75,
    ),
}

COSYVOICE3_FLOW = """\
flow: !new:cosyvoice.flow.flow.CausalMaskedDiffWithDiT
    input_size: 80
    output_size: 80
    spk_embed_dim: !ref <spk_embed_dim>
    output_type: 'mel'
    vocab_size: 6561
    input_frame_rate: !ref <token_frame_rate>
    only_mask_loss: True
    token_mel_ratio: !ref <token_mel_ratio>
    pre_lookahead_len: 3
    pre_lookahead_layer: !new:cosyvoice.transformer.upsample_encoder.PreLookaheadLayer
        in_channels: 80
        channels: {lookahead}
        pre_lookahead_len: 3
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
        estimator: !new:cosyvoice.flow.DiT.dit.DiT
            dim: {dim}
            depth: {depth}
            heads: {heads}
            dim_head: {dim_head}
            ff_mult: {ff_mult}
            mel_dim: 80
            mu_dim: 80
            spk_dim: 80
            out_channels: 80
            static_chunk_size: !ref <chunk_size> * <token_mel_ratio>
            num_decoding_left_chunks: !ref <num_decoding_left_chunks>

"""


def cosyvoice3_yaml(size: str, s: dict[str, Any]) -> str:
    return YamlVariant(
        title=f"tiny random CosyVoice 3 ({size}): upstream's structure, small dimensions",
        llm_class="CosyVoice3LM",
        flow=COSYVOICE3_FLOW.format(lookahead=s["lookahead"], **s["dit"]),
        hift_class="CausalHiFTGenerator",
        hift_extra="    conv_pre_look_right: 4\n",
        f0_class="CausalConvRNNF0Predictor",
        tokenizer_extra="    version: cosyvoice3\n",
        fmax="null",
    ).render(s["qwen"]["hidden_size"], **s["hift"])


COSYVOICE3 = Generation(YAML, parse_config, SpeechLMWeights, FlowWeights, HiFTWeights, SPEAKER_PROMPT)


def build_tiny(
    out: str | Path, size: str = "tiny", seed: int = SEED, eos_at: tuple[str, int] | None = None,
    clone_models: bool = False,
) -> Path:
    """Write a checkpoint into `out` (replaced); `eos_at=(text, n)`: make greedy decoding of `text` with
    the built-in speaker stop after exactly n tokens (models/flowlm/calibrate.py); `clone_models` adds tiny
    random speech_tokenizer_v3.onnx and campplus.onnx (needs `onnx`) so that --ref-audio runs."""
    if size not in SIZES:
        raise ValueError(f"size must be one of {', '.join(SIZES)}, got {size!r}")
    s = SIZES[size]
    from .program import CosyVoice3Program  # what calibrate_eos loads the folder with (eos_at)

    yaml_text = cosyvoice3_yaml(size, s)
    folder = write_checkpoint(Path(out), COSYVOICE3, yaml_text, s, seed, eos_at, CosyVoice3Program)
    if clone_models:
        from ..flowlm.tiny_onnx import write_tiny_onnx  # onnx only when asked for

        write_tiny_onnx(folder, seed=seed)
    return folder



# a zero-shot speaker with CosyVoice 3's prompt text (the LM needs <|endofprompt|>)
speaker_entry = partial(_speaker_entry, prompt=SPEAKER_PROMPT)

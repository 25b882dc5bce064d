"""Deterministic random-weight CosyVoice 2 checkpoints in the released layout (CosyVoice2-0.5B's), written
without upstream code (CosyVoice 3's builder supplies the tokenizer, the Qwen2 folder, the randomiser and
the speaker format):

    OUT/cosyvoice2.yaml            upstream's HyperPyYAML structure (Qwen2LM, CausalMaskedDiffWithXvec with
                                   UpsampleConformerEncoder + CausalConditionalDecoder, HiFTGenerator)
    OUT/llm.pt, flow.pt, hift.pt   state dicts with upstream's names (hift.pt weight-normed)
    OUT/spk2info.pt                one zero-shot speaker in `add_zero_shot_spk`'s format
    OUT/CosyVoice-BlankEN/         Qwen2 config.json, tokenizer files, a stub model.safetensors

Upstream's CosyVoice2 class loads it strictly (tests/test_cosyvoice2_parity.py). The audio is not speech.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import save_file

from ..cosyvoice3.tiny import _qwen_config, _randomize, hift_state, speaker_entry, tiny_tokenizer
from .config import QWEN_DIR, YAML, parse_config
from .flow import FlowWeights
from .hift import HiFTWeights
from .lm import CosyVoice2LMWeights

SEED = 2345
SPEAKER = "tiny_speaker"

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

YAML_TEMPLATE = """\
# voxcli random CosyVoice 2 ({size}): upstream's structure (examples/libritts/cosyvoice2/conf/cosyvoice2.yaml)
__set_seed1: !apply:random.seed [1986]
__set_seed2: !apply:numpy.random.seed [1986]
__set_seed3: !apply:torch.manual_seed [1986]
__set_seed4: !apply:torch.cuda.manual_seed_all [1986]

sample_rate: 24000
llm_input_size: {hidden}
llm_output_size: {hidden}
spk_embed_dim: 192
qwen_pretrain_path: ''
token_frame_rate: 25
token_mel_ratio: 2
chunk_size: 25
num_decoding_left_chunks: -1

llm: !new:cosyvoice.llm.llm.Qwen2LM
    llm_input_size: !ref <llm_input_size>
    llm_output_size: !ref <llm_output_size>
    speech_token_size: 6561
    length_normalized_loss: True
    lsm_weight: 0
    mix_ratio: [5, 15]
    llm: !new:cosyvoice.llm.llm.Qwen2Encoder
        pretrain_path: !ref <qwen_pretrain_path>
    sampling: !name:cosyvoice.utils.common.ras_sampling
        top_p: 0.8
        top_k: 25
        win_size: 10
        tau_r: 0.1

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

hift: !new:cosyvoice.hifigan.generator.HiFTGenerator
    in_channels: 80
    base_channels: {base_channels}
    nb_harmonics: 8
    sampling_rate: !ref <sample_rate>
    nsf_alpha: 0.1
    nsf_sigma: 0.003
    nsf_voiced_threshold: 10
    upsample_rates: [8, 5, 3]
    upsample_kernel_sizes: [16, 11, 7]
    istft_params:
        n_fft: 16
        hop_len: 4
    resblock_kernel_sizes: [3, 7, 11]
    resblock_dilation_sizes: [[1, 3, 5], [1, 3, 5], [1, 3, 5]]
    source_resblock_kernel_sizes: [7, 7, 11]
    source_resblock_dilation_sizes: [[1, 3, 5], [1, 3, 5], [1, 3, 5]]
    lrelu_slope: 0.1
    audio_limit: 0.99
    f0_predictor: !new:cosyvoice.hifigan.f0_predictor.ConvRNNF0Predictor
        num_class: 1
        in_channels: 80
        cond_channels: {f0_cond_channels}

get_tokenizer: !name:cosyvoice.tokenizer.tokenizer.get_qwen_tokenizer
    token_path: !ref <qwen_pretrain_path>
    skip_special_tokens: True
allowed_special: 'all'
feat_extractor: !name:matcha.utils.audio.mel_spectrogram
    n_fft: 1920
    num_mels: 80
    sampling_rate: !ref <sample_rate>
    hop_size: 480
    win_size: 1920
    fmin: 0
    fmax: 8000
    center: False
"""


def build_tiny(
    out: str | Path, size: str = "tiny", seed: int = SEED, eos_at: tuple[str, int] | None = None
) -> Path:
    """Write a checkpoint into `out` (replaced); `eos_at=(text, n)`: greedy decoding of `text` with the
    saved speaker stops after exactly n tokens (models/cosyvoice3/calibrate.py)."""
    if size not in SIZES:
        raise ValueError(f"size must be one of {', '.join(SIZES)}, got {size!r}")
    s = SIZES[size]
    out = Path(out)
    gen = torch.Generator().manual_seed(seed)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".cosy2-build-", dir=out.parent))
    try:
        e, d = s["enc"], s["dec"]
        (tmp / YAML).write_text(YAML_TEMPLATE.format(
            size=size, hidden=s["qwen"]["hidden_size"], d=e["d"], heads=e["heads"], units=e["units"],
            blocks=e["blocks"], ch=d["ch"], head_dim=d["head_dim"], n_blocks=d["n_blocks"], mid=d["mid"],
            dheads=d["heads"], **s["hift"]))
        qd = tmp / QWEN_DIR
        qd.mkdir()
        (qd / "config.json").write_text(json.dumps(_qwen_config(s["qwen"]), indent=2))
        tiny_tokenizer().save(qd)
        save_file({"model.norm.weight": torch.ones(s["qwen"]["hidden_size"])}, str(qd / "model.safetensors"),
                  metadata={"format": "pt"})
        cfg = parse_config(tmp)
        with torch.device("meta"):
            lm, flow = CosyVoice2LMWeights(cfg.lm), FlowWeights(cfg.flow)
        lsd = _randomize(lm, gen)
        lsd["llm.model.lm_head.weight"] = lsd["llm.model.model.embed_tokens.weight"]  # tied, as Qwen2-0.5B
        torch.save(lsd, tmp / "llm.pt")
        fsd = _randomize(flow, gen)
        fsd["input_embedding.weight"] = torch.randn(fsd["input_embedding.weight"].shape, generator=gen)
        for k in list(fsd):  # convolutions at a He-like scale, so the random UNet's output is not ~0
            if fsd[k].ndim == 3:
                fsd[k] = fsd[k] / 0.02 * (1.0 / (fsd[k].shape[1] * fsd[k].shape[2])) ** 0.5
        torch.save(fsd, tmp / "flow.pt")
        torch.save(hift_state(cfg, gen, HiFTWeights), tmp / "hift.pt")
        spk = speaker_entry(tmp, s["prompt_tokens"], gen, prompt="This is my voice.")
        torch.save({SPEAKER: spk}, tmp / "spk2info.pt")
        if eos_at is not None:
            from ..cosyvoice3.calibrate import calibrate_eos
            from .program import CosyVoice2Program

            calibrate_eos(tmp, *eos_at, program_cls=CosyVoice2Program)
        if out.exists():
            shutil.rmtree(out)
        tmp.rename(out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out


"""Deterministic random-weight checkpoints in upstream's CosyVoice layout, written without upstream code;
each family's tiny.py gives what its generation has of its own (`Generation`, `YamlVariant`):

    OUT/<family>.yaml              upstream's HyperPyYAML structure (llm, flow, hift) with small dimensions
    OUT/llm.pt, flow.pt, hift.pt   state dicts with upstream's names (hift.pt weight-normed:
                                   `.parametrizations.weight.original0/1`, as torch 2.x saves them)
    OUT/spk2info.pt                one zero-shot speaker in `add_zero_shot_spk`'s format
    OUT/CosyVoice-BlankEN/         Qwen2 config.json, tokenizer files, a stub model.safetensors (upstream
                                   overwrites every Qwen2 weight from llm.pt)

The tokenizer keeps the real id of `<|endofprompt|>` (151646, which upstream's CosyVoice 3 LM asserts):
151,643 base entries (bytes, merges for a small corpus, unreachable fillers), the three Qwen2 specials,
and upstream adds its own specials after them at load. The audio is not speech.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import save_file
from tokenizers import Tokenizer, models

from ..text_tokenizer import TextTokenizer, add_specials, bytes_to_unicode, qwen2_pipeline
from .config import ENDOFPROMPT_ID, QWEN_DIR

QWEN2_SPECIALS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
CORPUS = (
    "Hello world. This is a test of the tiny CosyVoice model, and it speaks random sounds!",
    "You are a helpful assistant. Please say it again; one two three four five.",
)
SPEAKER = "tiny_speaker"  # the one saved speaker's name

YAML_TEMPLATE = """\
# voxcli {title}
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

llm: !new:cosyvoice.llm.llm.{llm_class}
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

{flow}hift: !new:cosyvoice.hifigan.generator.{hift_class}
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
{hift_extra}    f0_predictor: !new:cosyvoice.hifigan.f0_predictor.{f0_class}
        num_class: 1
        in_channels: 80
        cond_channels: {f0_cond_channels}

get_tokenizer: !name:cosyvoice.tokenizer.tokenizer.get_qwen_tokenizer
    token_path: !ref <qwen_pretrain_path>
    skip_special_tokens: True
{tokenizer_extra}allowed_special: 'all'
feat_extractor: !name:matcha.utils.audio.mel_spectrogram
    n_fft: 1920
    num_mels: 80
    sampling_rate: !ref <sample_rate>
    hop_size: 480
    win_size: 1920
    fmin: 0
    fmax: {fmax}
    center: False
"""

@dataclass(frozen=True)
class YamlVariant:
    """What one CosyVoice generation's yaml has of its own; the rest of YAML_TEMPLATE is common to all."""

    title: str  # the first line's comment, after "voxcli "
    llm_class: str
    flow: str  # the whole flow section, its dimensions filled in, ending in a blank line
    hift_class: str
    hift_extra: str  # lines of the hift section before its f0_predictor
    f0_class: str
    tokenizer_extra: str  # lines of get_tokenizer after skip_special_tokens
    fmax: str

    def render(self, hidden: int, base_channels: int, f0_cond_channels: int) -> str:
        return YAML_TEMPLATE.format(hidden=hidden, base_channels=base_channels,
                                    f0_cond_channels=f0_cond_channels, **vars(self))


def tiny_tokenizer() -> TextTokenizer:
    """Byte-level BPE with merges that make each pre-token of CORPUS one token, fillers up to 151,643
    entries (never produced: no merge reaches them), then the three Qwen2 specials."""
    be = bytes_to_unicode()
    vocab = {be[b]: i for i, b in enumerate(sorted(be))}
    merges: list[tuple[str, str]] = []
    splitter = qwen2_pipeline(Tokenizer(models.BPE(vocab=dict(vocab), merges=[]))).pre_tokenizer
    for text in CORPUS:
        for piece, _ in splitter.pre_tokenize_str(text):
            for i in range(1, len(piece)):
                left, right = piece[:i], piece[i]
                if left + right not in vocab:
                    merges.append((left, right))
                    vocab[left + right] = len(vocab)
    base = ENDOFPROMPT_ID - len(QWEN2_SPECIALS)
    for i in range(len(vocab), base):
        vocab[f"<|vox_filler_{i}|>"] = i
    tok = qwen2_pipeline(Tokenizer(models.BPE(vocab=vocab, merges=merges, fuse_unk=False)))
    add_specials(tok, QWEN2_SPECIALS)
    return TextTokenizer(tok)


def _qwen_config(q: dict[str, Any]) -> dict[str, Any]:
    return {
        "architectures": ["Qwen2ForCausalLM"],
        "model_type": "qwen2",
        "attention_dropout": 0.0,
        "bos_token_id": 151643,
        "eos_token_id": 151643,
        "hidden_act": "silu",
        "initializer_range": 0.02,
        "max_position_embeddings": 32768,
        "max_window_layers": 24,
        "rms_norm_eps": 1e-6,
        "rope_theta": 1000000.0,
        "sliding_window": 32768,
        "tie_word_embeddings": True,
        "torch_dtype": "float32",
        "use_cache": True,
        "use_sliding_window": False,
        "vocab_size": 151936,
        **q,
    }


def _randomize(module: torch.nn.Module, gen: torch.Generator, std: float = 0.02) -> dict[str, torch.Tensor]:
    sd = {}
    for name, p in module.state_dict().items():
        leaf = name.rsplit(".", 1)[-1]
        if name.endswith("inv_freq"):
            sd[name] = p.clone()
        elif "norm" in name and leaf == "weight" and p.ndim == 1:
            sd[name] = 1 + 0.1 * torch.randn(p.shape, generator=gen)
        elif leaf == "alpha":
            sd[name] = 1 + 0.2 * torch.rand(p.shape, generator=gen)
        else:
            sd[name] = std * torch.randn(p.shape, generator=gen)
    return sd


def _conv_std(name: str, shape: torch.Size) -> float:
    """He-like scale for convolutions so the random vocoder neither dies out nor saturates."""
    fan_in = shape[1] * (shape[2] if len(shape) > 2 else 1)
    return (1.0 / max(fan_in, 1)) ** 0.5


def hift_state(cfg: Any, gen: torch.Generator, weights_cls: type) -> dict[str, torch.Tensor]:
    """Random HiFT weights, saved weight-normed as upstream's modules hold them (`weights_cls`: the
    family's HiFTWeights; both generations' vocoders have the same names and weight norms)."""
    w = weights_cls(cfg.hift)
    sd: dict[str, torch.Tensor] = {}
    plain = {"source_downs", "m_source"}
    for name, p in w.state_dict().items():
        if name.endswith("alpha"):
            sd[name] = 1 + 0.2 * torch.rand(p.shape, generator=gen)
        elif name.endswith("bias"):
            sd[name] = 0.01 * torch.randn(p.shape, generator=gen)
        elif name.endswith("weight") and p.ndim == 3 and name.split(".")[0] not in plain:
            v = _conv_std(name, p.shape) * torch.randn(p.shape, generator=gen)
            base = name[: -len(".weight")]
            sd[base + ".parametrizations.weight.original0"] = torch.linalg.vector_norm(
                v, dim=(1, 2), keepdim=True
            ) * (0.8 + 0.4 * torch.rand(p.shape[0], 1, 1, generator=gen))
            sd[base + ".parametrizations.weight.original1"] = v
        else:
            sd[name] = (
                _conv_std(name, p.shape) * torch.randn(p.shape, generator=gen)
                if p.ndim > 1
                else 0.01 * torch.randn(p.shape, generator=gen)
            )
    # voiced (f0 > 10 Hz) but low: the sine source's float32 phase grows with f0 x time, and its rounding
    # is what separates any two float32 runs of this vocoder (upstream's own float32 vs float64 differ by
    # 2.5e-3 at 120 Hz over 9 s); 30 Hz keeps two float32 computations within the tests' 1e-4
    sd["f0_predictor.classifier.bias"] = torch.full_like(sd["f0_predictor.classifier.bias"], 30.0)
    g = "conv_post.parametrizations.weight.original0"
    sd[g] = sd[g] * 0.05  # log-magnitudes near 0: a waveform of about +-0.5, rarely at the 0.99 clamp
    return sd


@dataclass(frozen=True)
class Generation:
    """What a CosyVoice generation's checkpoint is written with (each family's builder passes its own)."""

    yaml_name: str
    parse_config: Callable[[Path], Any]
    lm_weights: type
    flow_weights: type
    hift_weights: type
    speaker_prompt: str
    flow_scale: Callable[[dict[str, torch.Tensor]], None] | None = None  # rescales the random flow in place


def write_checkpoint(out: Path, gen_kind: Generation, yaml_text: str, s: dict[str, Any], seed: int,
                     eos_at: tuple[str, int] | None, program_cls: type) -> Path:
    """Write a checkpoint into `out` (replaced; built in a temp folder beside it): the yaml, the Qwen2
    folder, random llm/flow/hift weights and one saved speaker, drawn in that order from `seed`;
    `eos_at=(text, n)`: greedy decoding of `text` stops after n tokens (calibrate.py, `program_cls` loading
    the folder)."""
    gen = torch.Generator().manual_seed(seed)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".cosy-build-", dir=out.parent))
    try:
        (tmp / gen_kind.yaml_name).write_text(yaml_text)
        qd = tmp / QWEN_DIR
        qd.mkdir()
        (qd / "config.json").write_text(json.dumps(_qwen_config(s["qwen"]), indent=2))
        tiny_tokenizer().save(qd)
        save_file(
            {"model.norm.weight": torch.ones(s["qwen"]["hidden_size"])},
            str(qd / "model.safetensors"),
            metadata={"format": "pt"},
        )
        cfg = gen_kind.parse_config(tmp)
        with torch.device("meta"):
            lm, flow = gen_kind.lm_weights(cfg.lm), gen_kind.flow_weights(cfg.flow)
        lsd = _randomize(lm, gen)
        lsd["llm.model.lm_head.weight"] = lsd["llm.model.model.embed_tokens.weight"]  # tied, as Qwen2-0.5B
        torch.save(lsd, tmp / "llm.pt")
        fsd = _randomize(flow, gen)
        fsd["input_embedding.weight"] = torch.randn(fsd["input_embedding.weight"].shape, generator=gen)
        if gen_kind.flow_scale is not None:
            gen_kind.flow_scale(fsd)
        torch.save(fsd, tmp / "flow.pt")
        torch.save(hift_state(cfg, gen, gen_kind.hift_weights), tmp / "hift.pt")
        spk = speaker_entry(tmp, s["prompt_tokens"], gen, prompt=gen_kind.speaker_prompt)
        torch.save({SPEAKER: spk}, tmp / "spk2info.pt")
        if eos_at is not None:
            from .calibrate import calibrate_eos

            calibrate_eos(tmp, *eos_at, program_cls=program_cls)
        if out.exists():
            shutil.rmtree(out)
        tmp.rename(out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def speaker_entry(root: Path, n_tokens: int, gen: torch.Generator, prompt: str) -> dict[str, torch.Tensor]:
    """A zero-shot speaker as upstream's add_zero_shot_spk stores it (text/len pairs int32, batch dim 1)."""
    from .frontend import load_tokenizer

    ids = load_tokenizer(root / QWEN_DIR).encode(prompt)
    toks = torch.randint(0, 6561, (1, n_tokens), generator=gen, dtype=torch.int32)
    feat = 0.5 * torch.randn(1, 2 * n_tokens, 80, generator=gen) - 4.0
    emb = torch.randn(1, 192, generator=gen)
    i32 = torch.int32
    return {
        "prompt_text": torch.tensor([ids], dtype=i32),
        "prompt_text_len": torch.tensor([len(ids)], dtype=i32),
        "llm_prompt_speech_token": toks,
        "llm_prompt_speech_token_len": torch.tensor([n_tokens], dtype=i32),
        "flow_prompt_speech_token": toks.clone(),
        "flow_prompt_speech_token_len": torch.tensor([n_tokens], dtype=i32),
        "prompt_speech_feat": feat,
        "prompt_speech_feat_len": torch.tensor([2 * n_tokens], dtype=i32),
        "llm_embedding": emb,
        "flow_embedding": emb.clone(),
    }

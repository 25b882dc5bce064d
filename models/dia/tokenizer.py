"""Dia's text tokenizer: UTF-8 bytes, except the speaker tags [S1] -> 1, [S2] -> 2 and "<pad>" -> 0
(transformers' DiaTokenizer: byte-level, no BOS/EOS, no truncation, no normalisation)."""

from __future__ import annotations

import re

SPECIAL = {"<pad>": 0, "[S1]": 1, "[S2]": 2}
_SPLIT = re.compile("(" + "|".join(re.escape(s) for s in SPECIAL) + ")")


def encode(text: str, offset: int = 0) -> list[int]:
    ids: list[int] = []
    for part in _SPLIT.split(text):
        if part in SPECIAL:
            ids.append(SPECIAL[part])
        elif part:
            ids.extend(b + offset for b in part.encode("utf-8"))
    return ids

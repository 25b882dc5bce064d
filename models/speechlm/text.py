"""The text IO (ESPnet's HuggingFaceTextIO) with the `tokenizers` library: the backbone's tokenizer.json.

Encoding is `encode(text, add_special_tokens=True)` (tokenizer.json's own post-processor adds what the
backbone's fast tokenizer adds); decoding skips special tokens and applies transformers'
`clean_up_tokenization_spaces` rules, as the reference's `decode_batch` asks.
"""

from __future__ import annotations

from pathlib import Path

from ..base import CheckpointError

# transformers' PreTrainedTokenizerBase.clean_up_tokenization, in its order
_CLEANUP = ((" .", "."), (" ?", "?"), (" !", "!"), (" ,", ","), (" ' ", "'"), (" n't", "n't"), (" 'm", "'m"),
            (" 's", "'s"), (" 've", "'ve"), (" 're", "'re"))


class TextIO:
    def __init__(self, folder: Path) -> None:
        from tokenizers import Tokenizer

        path = folder / "tokenizer.json"
        if not path.exists():
            raise CheckpointError(f"{path} is missing: the text IO needs the backbone's fast tokenizer")
        try:
            self.tok = Tokenizer.from_file(str(path))
        except Exception as e:  # noqa: BLE001 - a malformed tokenizer.json
            raise CheckpointError(f"{path} is not a readable tokenizer.json ({e})") from None

    def encode(self, text: str) -> list[int]:
        return self.tok.encode(text, add_special_tokens=True).ids

    def decode(self, ids: list[int]) -> str:
        out = self.tok.decode(ids, skip_special_tokens=True)
        for a, b in _CLEANUP:
            out = out.replace(a, b)
        return out

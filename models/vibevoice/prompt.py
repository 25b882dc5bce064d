"""VibeVoice's text-only prompt (the release's script format, no voice sample):

    " Transform the text provided by various speakers into speech output, utilizing the distinct voice of
    each respective speaker.\n Text input:\n Speaker N: TEXT\n Speech output:\n" + <|vision_start|>

tokenized by the checkpoint's tokenizer.json without added specials; the LM then speaks from audio_bos.
"""

from __future__ import annotations

from pathlib import Path

from ..base import CheckpointError

SYSTEM = (" Transform the text provided by various speakers into speech output, utilizing the distinct "
          "voice of each respective speaker.\n")


def script(text: str, speaker: str) -> str:
    lines = " ".join(text.split())
    return f"{SYSTEM} Text input:\n Speaker {speaker}: {lines}\n Speech output:\n"


class TextTokenizer:
    def __init__(self, root: Path) -> None:
        from tokenizers import Tokenizer

        path = root / "tokenizer.json"
        if not path.exists():
            raise CheckpointError(f"{path} is missing; a VibeVoice checkpoint needs its text tokenizer")
        try:
            self.tok = Tokenizer.from_file(str(path))
        except Exception as e:  # noqa: BLE001 - the library raises plain Exceptions for bad files
            raise CheckpointError(f"cannot read {path} ({e})") from None

    def prompt(self, text: str, speaker: str, audio_bos: int) -> list[int]:
        return self.tok.encode(script(text, speaker), add_special_tokens=False).ids + [audio_bos]

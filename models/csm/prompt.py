"""CSM's prompt: the chat template of sesame/csm-1b's processor, one segment per conversation turn,

    <|begin_of_text|>[SPEAKER]TEXT<|end_of_text|>                         the turn to speak (last)
    <|begin_of_text|>[SPEAKER]TEXT<|end_of_text|><|AUDIO|>*n<|audio_eos|>  a context turn with its audio

where the processor expands `<|AUDIO|>` to one position per Mimi frame of the clip; in the backbone each such
position is that frame's K codebooks embedded and summed, `<|audio_eos|>` the all-eos frame. A voice clone
is one context turn (the clip and its transcript) spoken by the same speaker as the text.
"""

from __future__ import annotations

from pathlib import Path

from ..base import CheckpointError
from ..locate import read_json

BOS, EOS = "<|begin_of_text|>", "<|end_of_text|>"


class TextTokenizer:
    """The checkpoint's tokenizer.json through the `tokenizers` library (transformers' fast tokenizer), the
    template's text encoded without added specials (the template writes its own)."""

    def __init__(self, root: Path) -> None:
        from tokenizers import Tokenizer

        path = root / "tokenizer.json"
        if not path.exists():
            raise CheckpointError(f"{path} is missing; a CSM checkpoint needs its text tokenizer files")
        try:
            self.tok = Tokenizer.from_file(str(path))
        except Exception as e:  # noqa: BLE001 - the library raises plain Exceptions for bad files
            raise CheckpointError(f"cannot read {path} ({e})") from None
        conf_path = root / "tokenizer_config.json"
        conf = read_json(conf_path) if conf_path.exists() else {}
        for key, default in (("bos_token", BOS), ("eos_token", EOS)):
            tok = conf.get(key, default)
            tok = tok.get("content") if isinstance(tok, dict) else str(tok)
            if self.tok.token_to_id(tok) is None:
                raise CheckpointError(f"{path}: the {key} {tok!r} of tokenizer_config.json is not in it")
            setattr(self, key.split("_")[0], tok)

    def segment(self, speaker: str, text: str) -> list[int]:
        """One turn's text ids: `bos [speaker]text eos` (audio, if any, follows as frame positions)."""
        return self.tok.encode(f"{self.bos}[{speaker}]{text}{self.eos}", add_special_tokens=False).ids

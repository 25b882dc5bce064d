"""The byte-level tokenizer tiny checkpoints ship (Higgs', CSM's): BPE over the 256 byte symbols with no
merges, so any text encodes to one token per byte, and the family's specials as added tokens after them;
`tokenizer_config.json` names Llama 3's bos/eos as the real checkpoints' do."""

from __future__ import annotations

import json
from pathlib import Path

from .text_tokenizer import bytes_to_unicode


def write_tokenizer(out: Path, specials: tuple[str, ...]) -> dict[str, int]:
    """Byte-level BPE with no merges (one token per byte), `specials` at 256.. as added tokens."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers

    vocab = {ch: i for i, ch in enumerate(bytes_to_unicode().values())}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in specials])
    tok.save(str(out / "tokenizer.json"))
    ids = {t: tok.token_to_id(t) for t in specials}
    conf = {
        "bos_token": "<|begin_of_text|>",
        "eos_token": "<|eot_id|>",
        "pad_token": "<|eot_id|>",
        "tokenizer_class": "PreTrainedTokenizerFast",
        "model_max_length": 131072,
        "added_tokens_decoder": {
            str(i): {
                "content": t,
                "special": True,
                "normalized": False,
                "lstrip": False,
                "rstrip": False,
                "single_word": False,
            }
            for t, i in ids.items()
        },
    }
    (out / "tokenizer_config.json").write_text(json.dumps(conf, indent=2))
    return ids

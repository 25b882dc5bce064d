"""Text that is not text (lone surrogates, bytes that are not UTF-8, only control characters) is one
sentence from every source, and `threads` is bounded by the machine."""

from __future__ import annotations

import io

import pytest

from voxcli.config import ConfigError, EngineConfig, machine_cpus
from voxcli.text import TextInputError, parse_batch_lines, read_say_text
from voxcli.textstream import open_stdin_text


@pytest.mark.parametrize(("arg", "needle"), [
    ("Hi \udcff there.", "the argument is not UTF-8 text (byte 0xff at character 3)"),  # argv's raw byte
    ("Hi \ud800 there.", "unpaired UTF-16 surrogate (U+D800"),
    ("\x01\x02\x1b", "only control characters"),
    ("\u200b\x07", "only control characters"),
])
def test_say_argument(arg, needle):
    with pytest.raises(TextInputError) as e:
        read_say_text(arg)
    assert needle in str(e.value)


def test_say_text_file_and_stdin_of_control_characters(tmp_path):
    f = tmp_path / "t.txt"
    f.write_bytes(b"\x01\x02\x03\n")
    with pytest.raises(TextInputError, match="only control characters"):
        read_say_text(None, text_file=f)
    with pytest.raises(TextInputError, match="only control characters"):
        read_say_text("-", stdin=io.TextIOWrapper(io.BytesIO(b"\x00\x01 \x7f")))
    with pytest.raises(TextInputError, match="standard input holds only control characters"):
        open_stdin_text(io.TextIOWrapper(io.BytesIO(b"\x01\x02\x1b\n")))
    assert "".join(open_stdin_text(io.TextIOWrapper(io.BytesIO(b"\x01 Hello.")))) == "\x01 Hello."


def test_batch_lines_of_control_characters_fail_alone():
    items = parse_batch_lines([b"\x01\x02", b"ok\tFine words.", b"t\t\x1b\x07"], "in.txt")
    assert [i.error is None for i in items] == [False, True, False]
    assert "in.txt:1 holds only control characters" in items[0].error


def test_threads_bounded_by_the_machine():
    cpus = machine_cpus()
    assert EngineConfig(threads=cpus).validate().threads == cpus
    with pytest.raises(ConfigError, match=f"threads must be at most {cpus}"):
        EngineConfig(threads=100000).validate()
    with pytest.raises(ConfigError, match="threads must be at most"):
        EngineConfig().with_overrides(["threads=100000"])

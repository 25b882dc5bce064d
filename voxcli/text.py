"""Text in: the `say` argument or stdin, sentence splitting for long text, and batch input parsing.

Batch inputs are read line by line and each line decides its own format, so one file may mix them:

    plain text            one utterance; its id is the line number (`0007`)
    id<TAB>text           TSV; a first line `id<TAB>text` is a header and skipped
    {"id": ..., ...}      JSONL with `text` and optional voice/language/instructions/seed, and
                          `options`: an object of the model family's own options (e.g. Qwen3-TTS
                          {"sub_temperature": 0.7}); the model refuses keys it does not know

A line that cannot be used (empty, bad JSON, unknown field, duplicate id) becomes an item that carries
its error, so the batch records that one failure and goes on with the rest.
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from voxcli.request_fields import RequestFieldError, check_seed, check_text_fields


class TextInputError(ValueError):
    """Text that cannot be read or used; the message is a sentence for the user."""


# --- `vox say` input ------------------------------------------------------------------------------


def read_say_text(arg: str | None, stdin: IO[str] | None = None, text_file: Path | None = None) -> str:
    """The text to speak: from `--text-file`, the argument, or stdin (`-`, or no argument while stdin
    is not a terminal). A terminal with no text is a usage error: waiting silently for input that the
    user does not know we want is the worse experience."""
    stdin = stdin if stdin is not None else sys.stdin
    if text_file is not None:
        if arg is not None:
            raise TextInputError("give the text either as an argument or with --text-file, not both.")
        text = _read_file(text_file)
        where = str(text_file)
    elif arg == "-" or (arg is None and not _is_tty(stdin)):
        where = "standard input"
        text = _decode(_read_stream(stdin), where)
    elif arg is None:
        raise TextInputError('no text to say: give it as an argument (vox say "Hello.") or pipe it in '
                             '(echo Hello. | vox say -).')
    else:
        text = arg
        where = "the argument"
    text = text.strip()
    if not text:
        raise TextInputError(f"the text from {where} is empty; give some words to say.")
    check_speakable(text, where)
    return text


_SURROGATE = re.compile("[\ud800-\udfff]")


def unpaired_surrogate(text: str) -> int | None:
    """The index of the first lone UTF-16 surrogate in `text` (a JSON "\\ud800" escape, or a byte that
    is not UTF-8 in a command-line argument, which Python keeps as U+DC80..U+DCFF), else None."""
    m = _SURROGATE.search(text)
    return None if m is None else m.start()


def has_words(text: str) -> bool:
    """True when `text` holds something to say: a character that is neither white space nor a control,
    format or unassigned code point."""
    return any(not ch.isspace() and unicodedata.category(ch)[0] != "C" for ch in text)


def check_speakable(text: str, where: str) -> None:
    """One sentence (TextInputError) for text no tokenizer should see: lone surrogates, or nothing but
    control characters. `where` names the source ("the argument", "field input")."""
    check_real_text(text, where)
    if text.strip() and not has_words(text):
        raise TextInputError(f"{where} holds only control characters; give some words to say.")


def check_real_text(text: str, where: str) -> None:
    """TextInputError when `text` holds a lone surrogate (it cannot even be written as UTF-8)."""
    i = unpaired_surrogate(text)
    if i is not None:
        code = ord(text[i])
        if 0xDC80 <= code <= 0xDCFF and where == "the argument":  # a raw byte the OS passed through
            raise TextInputError(f"{where} is not UTF-8 text (byte 0x{code - 0xDC00:02x} at character {i}); "
                                 "convert it (iconv -t utf-8).")
        raise TextInputError(f"{where} holds an unpaired UTF-16 surrogate (U+{code:04X} at character {i}), "
                             "which is not text; send valid UTF-8.")


def _is_tty(stream: IO[str]) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def _read_stream(stream: IO[str]) -> bytes | str:
    """The raw bytes behind a text stream when there are some (so bad UTF-8 gets our message, not the
    decoder's); the text otherwise."""
    buffer = getattr(stream, "buffer", None)
    if buffer is not None:
        return buffer.read()
    try:
        return stream.read()
    except UnicodeDecodeError as e:
        raise TextInputError(f"standard input is not UTF-8 text ({_bad_byte(e)}); convert it "
                             "(iconv -t utf-8).") from None


def _bad_byte(e: UnicodeDecodeError) -> str:
    return f"byte 0x{e.object[e.start]:02x} at offset {e.start}"


def _decode(data: bytes | str, where: str) -> str:
    if isinstance(data, str):
        return data
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise TextInputError(f"{where} is not UTF-8 text ({_bad_byte(e)}); convert it "
                             "(iconv -t utf-8).") from None


def _read_bytes(path: Path) -> bytes:
    try:
        return Path(path).read_bytes()
    except FileNotFoundError:
        raise TextInputError(f"input file {path} does not exist; check the path.") from None
    except IsADirectoryError:
        raise TextInputError(f"input {path} is a directory; give a text file.") from None
    except OSError as e:
        raise TextInputError(f"cannot read input file {path}: {e.strerror or e}; check its "
                             "permissions.") from None


def _read_file(path: Path) -> str:
    return _decode(_read_bytes(path), f"input file {path}")


# --- sentence splitting ---------------------------------------------------------------------------

# A sentence ends at . ! ? … (plus closing quotes/brackets) followed by whitespace, or at CJK full-width
# terminators which need no space after them.
_SENTENCE_END = re.compile(r"[.!?…]+[\"'”’)\]]*(?=\s)|[。！？]+[\"'”’）」』]*")
_ABBREVIATIONS = {"mr.", "mrs.", "ms.", "dr.", "prof.", "sr.", "jr.", "st.", "vs.", "etc.", "e.g.", "i.e.",
                  "no.", "fig.", "approx.", "inc.", "ltd.", "co.", "mt.", "u.s.", "a.m.", "p.m."}
_CLAUSE_END = re.compile(r"(?<=[,;:—，；：])\s*")


def split_sentences(text: str, max_chars: int = 300, min_chars: int = 12) -> list[str]:
    """Cut text into sentence-sized segments, in order, losing no words.

    Why: a SpeechLM's prompt and generation length grow with the text, and the first audio of a
    short segment comes sooner; consecutive segments are streamed back to back. Segments shorter than
    `min_chars` are joined to their neighbour (a lone "Yes." sounds clipped); a sentence longer than
    `max_chars` is cut at clause marks, then at spaces."""
    text = " ".join(text.split())  # newlines inside a paragraph are not pauses
    if not text:
        return []
    pieces: list[str] = []
    start = 0
    for m in _SENTENCE_END.finditer(text):
        candidate = text[start:m.end()].strip()
        last_word = candidate.rsplit(" ", 1)[-1].lower()
        if last_word in _ABBREVIATIONS or re.fullmatch(r"[a-z]\.", last_word):
            continue  # "Dr. Smith", "J. R. R." — not a sentence end
        if candidate:
            pieces.append(candidate)
        start = m.end()
    tail = text[start:].strip()
    if tail:
        pieces.append(tail)

    bounded: list[str] = []
    for p in pieces:
        bounded.extend(_cut_long(p, max_chars))

    merged: list[str] = []
    for p in bounded:
        if merged and (len(merged[-1]) < min_chars or len(p) < min_chars) \
                and len(merged[-1]) + 1 + len(p) <= max_chars:
            merged[-1] = _join(merged[-1], p)
        else:
            merged.append(p)
    return merged


def _join(a: str, b: str) -> str:
    # CJK text has no spaces between sentences; adding one would be read as a pause or a symbol.
    return a + b if a[-1] in "。！？」』）" else f"{a} {b}"


def _cut_long(sentence: str, max_chars: int) -> list[str]:
    if len(sentence) <= max_chars:
        return [sentence]
    out: list[str] = []
    current = ""
    for clause in (c for c in _CLAUSE_END.split(sentence) if c):
        for part in _cut_words(clause, max_chars):
            if current and len(current) + 1 + len(part) > max_chars:
                out.append(current)
                current = part
            else:
                current = f"{current} {part}" if current else part
    if current:
        out.append(current)
    return out


def _cut_words(clause: str, max_chars: int) -> list[str]:
    if len(clause) <= max_chars:
        return [clause.strip()]
    out: list[str] = []
    current = ""
    for word in clause.split(" "):
        while len(word) > max_chars:  # a "word" with no spaces at all (CJK, URLs): cut it hard
            if current:
                out.append(current)
                current = ""
            out.append(word[:max_chars])
            word = word[max_chars:]
        if current and len(current) + 1 + len(word) > max_chars:
            out.append(current)
            current = word
        else:
            current = f"{current} {word}" if current else word
    if current:
        out.append(current)
    return out


# --- batch input ----------------------------------------------------------------------------------

JSONL_FIELDS = ("id", "text", "voice", "language", "lang", "instructions", "seed", "cfg_scale",
               "options")
_SAFE_ID = re.compile(r"[^A-Za-z0-9._-]+")


@dataclass
class BatchItem:
    """One utterance of a batch job. `error` set means the line could not be used (the item fails
    with that reason and is never sent to the engine)."""

    id: str
    text: str
    source: str  # "file.txt:7" for messages
    voice: str | None = None
    language: str | None = None
    instructions: str | None = None
    seed: int | None = None
    cfg_scale: float | None = None
    options: dict[str, Any] | None = None  # SynthesisRequest.options (the model family's own)
    error: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    duplicate: bool = False  # its id repeats an earlier line's: it fails under a key of its own

    def fingerprint(self) -> str:
        """What the output depends on; resume regenerates an item whose fingerprint changed."""
        parts: list[Any] = [self.text, self.voice, self.language, self.instructions, self.seed]
        if self.options:  # absent options keep the fingerprints of files written before they existed
            parts.append(self.options)
        if self.cfg_scale is not None:  # likewise an absent cfg_scale
            parts.append({"cfg_scale": self.cfg_scale})
        key = json.dumps(parts, sort_keys=True)
        return hashlib.sha1(key.encode()).hexdigest()[:16]


def read_batch_inputs(paths: list[str], stdin: IO[str] | None = None) -> list[BatchItem]:
    """All items of all inputs (`-` = stdin) in order. Ids from line numbers get the file's stem as a
    prefix when there is more than one input so they stay unique."""
    stdin = stdin if stdin is not None else sys.stdin
    if not paths:
        raise TextInputError("no batch input given: name one or more text/TSV/JSONL files, or - for stdin.")
    items: list[BatchItem] = []
    for path in paths:
        if path == "-":
            data, name, stem = _read_stream(stdin), "stdin", "stdin"
        else:
            data, name, stem = _read_bytes(Path(path)), path, Path(path).stem
        items.extend(parse_batch_lines(split_lines(data), name, prefix=f"{stem}-" if len(paths) > 1 else ""))
    if not items:
        raise TextInputError(f"the batch input ({', '.join(paths)}) has no lines; nothing to do.")
    mark_duplicates(items)
    return items


def split_lines(data: bytes | str) -> list[str | bytes]:
    """Lines, each still bytes when the input was bytes: every line is decoded on its own, so one line
    that is not UTF-8 fails that line alone."""
    if not data:
        return []
    if isinstance(data, bytes):
        if data.startswith(b"\xef\xbb\xbf"):
            data = data[3:]  # a UTF-8 byte-order mark (Windows editors)
        return list(data.split(b"\n")[:-1] if data.endswith(b"\n") else data.split(b"\n"))
    return list(data.splitlines())


def mark_duplicates(items: list[BatchItem]) -> None:
    """A later line whose (sanitised) id an earlier line already has fails, and its manifest record gets
    a key of its own (`<id>@<file>:<line>`) so it can never replace the earlier line's record."""
    seen: dict[str, str] = {}
    for item in items:
        if item.id in seen:
            if item.error is None:
                item.error = (f"{item.source}: id {item.id!r} is already used by {seen[item.id]}; ids must "
                              "be unique (after unsafe characters become _).")
            # "@" never survives safe_id, so this key cannot clash with a real id
            item.id = f"{item.id}@{Path(item.source).name}"
            item.duplicate = True
        else:
            seen[item.id] = item.source


def parse_batch_lines(lines: Iterable[str | bytes], source: str, prefix: str = "") -> list[BatchItem]:
    items: list[BatchItem] = []
    for number, raw in enumerate(lines, start=1):
        where = f"{source}:{number}"
        if isinstance(raw, bytes):
            try:
                raw = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                items.append(BatchItem(f"{prefix}{number:04d}", "", where,
                                       error=f"{where} is not UTF-8 text ({_bad_byte(e)}); convert it "
                                             "(iconv -t utf-8)."))
                continue
        line = raw.rstrip("\r\n")
        if "\x00" in line:
            items.append(BatchItem(f"{prefix}{number:04d}", "", where,
                                   error=f"{where} holds NUL bytes (UTF-16?); convert the file to UTF-8."))
            continue
        if number == 1 and line.strip().lower() == "id\ttext":
            continue  # TSV header
        default_id = f"{prefix}{number:04d}"
        if not line.strip():
            items.append(BatchItem(default_id, "", where, error=f"{where} is empty; nothing to say."))
        elif line.lstrip().startswith("{"):
            items.append(_parse_json_line(line, where, default_id))
        elif "\t" in line:
            ident, text = line.split("\t", 1)  # split on the first tab only; the text may hold tabs
            items.append(_make_item(ident.strip() or default_id, text, where))
        else:
            items.append(_make_item(default_id, line, where))
    for item in items:
        item.id = safe_id(item.id)
    return items


def safe_id(ident: str) -> str:
    """An id usable as a file name on every OS (no separators, no leading dot)."""
    return _SAFE_ID.sub("_", ident).strip("._")[:120] or "item"


def _make_item(ident: str, text: str, where: str, **fields: Any) -> BatchItem:
    item = BatchItem(ident, text.strip(), where, **fields)
    if not item.text:
        item.error = f"{where} has no text; nothing to say."
    elif not has_words(item.text):
        item.error = f"{where} holds only control characters; give some words to say."
    return item


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _parse_json_line(line: str, where: str, default_id: str) -> BatchItem:
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as e:
        # some messages end in "at" themselves ("Unterminated string starting at"): one "at", not two
        reason = e.msg.removesuffix(" at")
        return BatchItem(default_id, "", where,
                         error=f"{where} is not valid JSON ({reason} at column {e.colno}).")
    if not isinstance(obj, dict):
        return BatchItem(default_id, "", where, error=f"{where} must be a JSON object with a \"text\" field.")
    unknown = sorted(set(obj) - set(JSONL_FIELDS))
    if unknown:
        return BatchItem(str(obj.get("id", default_id)), "", where,
                         error=f"{where} has unknown field(s) {', '.join(unknown)}; known fields: "
                               f"{', '.join(JSONL_FIELDS)}.")
    for name, value in obj.items():
        if isinstance(value, str) and not _encodable(value):
            return BatchItem(default_id, "", where,
                             error=f"{where}: {name} holds an unpaired UTF-16 surrogate escape; fix it.")
    text = obj.get("text")
    if not isinstance(text, str):
        return BatchItem(str(obj.get("id", default_id)), "", where,
                         error=f"{where} needs a \"text\" string field.")
    ident = obj.get("id")
    if ident is not None and not isinstance(ident, str | int) or isinstance(ident, bool):
        return BatchItem(default_id, "", where, error=f"{where}: id must be a string or a number.")
    seed, cfg_scale, options = obj.get("seed"), obj.get("cfg_scale"), obj.get("options")
    try:  # the same checks and sentences as a Python call's fields (voxcli.request_fields)
        check_seed(seed)
        check_text_fields(obj)
    except RequestFieldError as e:
        return BatchItem(str(obj.get("id", default_id)), "", where, error=f"{where}: {e}")
    return _make_item(str(obj.get("id") or default_id), text, where, voice=obj.get("voice"),
                      language=obj.get("language", obj.get("lang")), instructions=obj.get("instructions"),
                      seed=seed, options=options,
                      cfg_scale=None if cfg_scale is None else float(cfg_scale))

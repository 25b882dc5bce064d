"""Benchmark text workloads shipped with voxcli (see `data/SOURCES.md` for origin and licences).

The files are tab-separated with a header `id<TAB>text` and are NOT CSV-quoted: many LibriTTS lines
start with a double quote that is part of the text. Every line is therefore split on its first tab,
never parsed with CSV quoting rules.

Output lengths: random-weight and simulated models cannot decide when to stop, so each utterance gets
a fixed number of frames from its word count (`estimate_audio_seconds`). The estimator is a straight
line through the two published workload means of the design paper (LibriTTS test-clean: 18.674 words
-> 7.8 s of audio; Seed-TTS en: 10.853 words -> 4.7 s):

    audio_s = 0.398 s + 0.3964 s/word * words

It reproduces both means by construction; per utterance it is an estimate (speaking rate varies), and
its LibriTTS chunk count can be checked against the paper's 10.2 chunks per request.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

# name -> file in voxcli/bench/data
WORKLOADS: dict[str, str] = {
    "libritts": "libritts_test_clean.tsv",
    "seed-tts": "seed_tts_eval_en.tsv",
}
# Workloads built from the shipped files (see `long_form` and `chat`): name -> what they are
DERIVED: dict[str, str] = {
    "libritts-long": "paragraphs of 15-60 s: consecutive LibriTTS test-clean sentences of one chapter",
    "chat": "short replies: Seed-TTS en sentences of at most 12 words (about 1-5 s)",
}
LONG_MIN_S, LONG_MAX_S = 15.0, 60.0
CHAT_MAX_WORDS = 12

# The estimator's two anchor points (words, audio seconds) from the paper's workload descriptions.
_ANCHORS = ((18.674, 7.8), (10.853, 4.7))
SECONDS_PER_WORD = (_ANCHORS[0][1] - _ANCHORS[1][1]) / (_ANCHORS[0][0] - _ANCHORS[1][0])
SECONDS_OFFSET = _ANCHORS[0][1] - SECONDS_PER_WORD * _ANCHORS[0][0]


def default_frame_rate() -> float:
    """Frames per second of audio when the caller names no model: the default family's sim spec."""
    from voxcli.models.registry import default_family

    return default_family().sim.frame_rate


class WorkloadError(ValueError):
    """A workload name or file that cannot be used; the message says which and what to do."""


@dataclass(frozen=True)
class Utterance:
    id: str
    text: str

    @property
    def words(self) -> int:
        return len(self.text.split())


def estimate_audio_seconds(text: str) -> float:
    """Expected seconds of speech for `text` (see the module docstring for the estimator)."""
    return SECONDS_OFFSET + SECONDS_PER_WORD * max(1, len(text.split()))


def estimate_frames(text: str, frame_rate: float | None = None) -> int:
    """Frames the backbone generates for `text` at `frame_rate` frames per second of audio (default:
    `default_frame_rate()`)."""
    rate = default_frame_rate() if frame_rate is None else frame_rate
    return max(1, round(estimate_audio_seconds(text) * rate))


def parse_tsv(text: str, source: str = "<text>") -> list[Utterance]:
    """Parse `id<TAB>text` lines (header first). Splits on the first tab only and keeps quotes."""
    lines = text.split("\n")
    if not lines or lines[0].rstrip("\r") != "id\ttext":
        raise WorkloadError(f"{source}: the first line must be the header 'id<TAB>text'")
    out: list[Utterance] = []
    for number, line in enumerate(lines[1:], start=2):
        line = line.rstrip("\r")
        if not line:
            continue
        if "\t" not in line:
            raise WorkloadError(f"{source}:{number}: no tab between id and text")
        uid, body = line.split("\t", 1)
        if not uid or not body:
            raise WorkloadError(f"{source}:{number}: empty id or text")
        out.append(Utterance(uid, body))
    if not out:
        raise WorkloadError(f"{source}: no utterances after the header")
    return out


def long_form(utterances: list[Utterance], seed: int = 0, min_s: float = LONG_MIN_S,
              max_s: float = LONG_MAX_S) -> list[Utterance]:
    """Paragraphs read aloud: LibriTTS ids are speaker_chapter_paragraph_sentence, so the sentences of
    one chapter, in id order, are consecutive text. Each paragraph takes sentences in order until its
    estimated audio reaches a length drawn uniformly from [min_s, max_s] (seeded), never passing max_s;
    a chapter's tail shorter than min_s is dropped. Long requests make later chunks' deadlines bind
    (the player drains 15-60 s of audio while the codec keeps up) so stalls can happen."""
    rng = random.Random(seed)
    chapters: dict[str, list[tuple[tuple[int, ...], str]]] = {}
    for u in utterances:
        parts = u.id.split("_")
        if len(parts) != 4 or not all(p.isdigit() for p in parts):
            raise WorkloadError("long-form needs LibriTTS ids speaker_chapter_paragraph_sentence, got "
                                f"{u.id!r}")
        chapters.setdefault("_".join(parts[:2]), []).append((tuple(int(p) for p in parts[2:]), u.text))
    out: list[Utterance] = []
    for chapter in sorted(chapters):
        sentences = sorted(chapters[chapter])
        i = 0
        while i < len(sentences):
            goal, words, j = rng.uniform(min_s, max_s), [], i
            while j < len(sentences):
                more = words + sentences[j][1].split()
                if words and SECONDS_OFFSET + SECONDS_PER_WORD * len(more) > max_s:
                    break
                words = more
                j += 1
                if estimate_audio_seconds(" ".join(words)) >= goal:
                    break
            if estimate_audio_seconds(" ".join(words)) >= min_s:
                first, last = sentences[i][0], sentences[j - 1][0]
                out.append(Utterance(f"{chapter}_{first[0]}.{first[1]}-{last[0]}.{last[1]}", " ".join(words)))
            i = j
    if not out:
        raise WorkloadError(f"no chapter has {min_s:g} s of consecutive text for a long-form workload")
    return out


def chat(utterances: list[Utterance], max_words: int = CHAT_MAX_WORDS) -> list[Utterance]:
    """Short assistant-style replies: the workload's sentences of at most `max_words` words."""
    out = [u for u in utterances if u.words <= max_words]
    if not out:
        raise WorkloadError(f"no sentence of at most {max_words} words for a chat workload")
    return out


def load_workload(name: str) -> list[Utterance]:
    """A shipped workload by name (`libritts`, `seed-tts`, `libritts-long`, `chat`) or a path to a TSV
    file of the same format."""
    if name == "libritts-long":
        return long_form(load_workload("libritts"))
    if name == "chat":
        return chat(load_workload("seed-tts"))
    if name in WORKLOADS:
        ref = resources.files("voxcli.bench").joinpath("data", WORKLOADS[name])
        return parse_tsv(ref.read_text(encoding="utf-8"), source=WORKLOADS[name])
    path = Path(name)
    if path.is_file():
        return parse_tsv(path.read_text(encoding="utf-8"), source=str(path))
    choices = ", ".join([*WORKLOADS, *DERIVED])
    if path.suffix or "/" in name:  # meant as a file
        what = "is not a file" if path.exists() else "does not exist"
        raise WorkloadError(f"workload file {name} {what}; give an id<TAB>text file or one of {choices}")
    raise WorkloadError(f"unknown workload {name!r}: use one of {choices} or a path to an id<TAB>text file")


def seeded_order(utterances: list[Utterance], seed: int) -> list[Utterance]:
    """The utterances in a random order fixed by `seed` (each seed draws its own order)."""
    order = list(utterances)
    random.Random(seed).shuffle(order)
    return order


def mean_chunks(utterances: list[Utterance], first: int | None = None, steady: int | None = None,
                frame_rate: float | None = None) -> float:
    """Average codec chunks per request under the estimator (first chunk `first` frames, then `steady`;
    defaults: the default family's sim chunk schedule and frame rate)."""
    if first is None or steady is None:
        from voxcli.models.registry import default_family

        chunk = default_family().sim.chunk
        first = chunk.first if first is None else first
        steady = chunk.steady if steady is None else steady
    total = 0
    for u in utterances:
        frames = estimate_frames(u.text, frame_rate)
        total += 1 + (math.ceil(max(0, frames - first) / steady) if frames > first else 0)
    return total / len(utterances)

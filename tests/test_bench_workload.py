"""Workload files and the open-loop schedule."""

from __future__ import annotations

import statistics

import pytest

from voxcli.bench.client import burst, poisson_times, schedule
from voxcli.bench.workloads import (
    WorkloadError,
    estimate_audio_seconds,
    load_workload,
    mean_chunks,
    parse_tsv,
)


def test_parsing_keeps_quotes_and_splits_on_the_first_tab_only():
    utts = parse_tsv('id\ttext\na\t"Go to her," he said.\nb\tx\ty\n', source="t")
    assert utts[0].text == '"Go to her," he said.'
    assert utts[1].text == "x\ty"


def test_bad_files_fail_with_a_clear_message():
    with pytest.raises(WorkloadError, match="header"):
        parse_tsv("a\tb\n")
    with pytest.raises(WorkloadError, match="no tab"):
        parse_tsv("id\ttext\nnotab\n")
    with pytest.raises(WorkloadError, match="unknown workload"):
        load_workload("nope")


def test_shipped_workloads_match_their_published_statistics():
    libri, seed = load_workload("libritts"), load_workload("seed-tts")
    assert len(libri) == 4837 and len(seed) == 1088
    assert sum(u.text.startswith('"') for u in libri) == 961  # quotes survive (SOURCES.md)
    assert statistics.mean(u.words for u in libri) == pytest.approx(18.674, abs=1e-3)
    # the length estimator reproduces the paper's means (7.8 s, 4.7 s) and ~10.2 chunks per request
    assert statistics.mean(estimate_audio_seconds(u.text) for u in libri) == pytest.approx(7.8, abs=0.01)
    assert statistics.mean(estimate_audio_seconds(u.text) for u in seed) == pytest.approx(4.7, abs=0.01)
    assert mean_chunks(libri) == pytest.approx(10.2, abs=0.3)


def test_poisson_schedule_is_absolute_seeded_and_has_the_right_rate():
    a = poisson_times(20.0, 60.0, seed=1)
    assert a == poisson_times(20.0, 60.0, seed=1)
    assert a != poisson_times(20.0, 60.0, seed=2)
    assert all(0 <= x < 60 for x in a) and a == sorted(a)
    assert len(a) == pytest.approx(1200, rel=0.1)
    gaps = [y - x for x, y in zip(a, a[1:], strict=False)]
    assert statistics.mean(gaps) == pytest.approx(1 / 20, rel=0.1)
    assert statistics.pstdev(gaps) == pytest.approx(1 / 20, rel=0.15)  # exponential: sd == mean


def test_schedule_draws_a_seeded_utterance_order():
    utts = load_workload("seed-tts")
    s1, s2, s3 = schedule(5, 10, 3, utts), schedule(5, 10, 3, utts), schedule(5, 10, 4, utts)
    assert [a.utterance.id for a in s1] == [a.utterance.id for a in s2]
    assert [a.utterance.id for a in s1] != [a.utterance.id for a in s3][: len(s1)]
    assert all(a.frames >= 1 for a in s1)
    w = burst(8, utts, seed=0)
    assert len(w) == 8 and all(a.at == 0.0 for a in w)


def test_long_form_paragraphs_are_consecutive_sentences_of_one_chapter_within_15_to_60_s():
    from voxcli.bench.workloads import estimate_audio_seconds, load_workload, long_form

    lib = load_workload("libritts")
    paras = load_workload("libritts-long")
    assert len(paras) > 500 and paras == long_form(lib)  # seeded: the same paragraphs every time
    secs = [estimate_audio_seconds(p.text) for p in paras]
    assert min(secs) >= 15.0 and max(secs) <= 60.0 and 30 < sum(secs) / len(secs) < 45
    # the first paragraph is chapter 1089_134686's sentences, in id order, joined
    first = paras[0]
    chapter = sorted((u for u in lib if u.id.startswith("1089_134686_")), key=lambda u: u.id)
    joined = ""
    for u in chapter:
        joined = (joined + " " + u.text).strip()
        if joined == first.text:
            break
    assert joined == first.text and first.id.startswith("1089_134686_")


def test_chat_is_short_replies_and_long_form_needs_libritts_ids():
    import pytest

    from voxcli.bench.workloads import Utterance, WorkloadError, load_workload, long_form

    replies = load_workload("chat")
    assert replies and all(u.words <= 12 for u in replies)
    with pytest.raises(WorkloadError, match="speaker_chapter_paragraph_sentence"):
        long_form([Utterance("abc", "hello")])

"""Kyutai TTS, text arriving at typing speed: time to first audio when the words are fed as they are typed
(one request, `Engine.submit(text_feed=...)`) vs when the text is sent whole once typed.

    .venv/bin/python -m benchmarks bench_kyutai_text_in [--cpm 200] [--executors sim,cpu] [--gpu h100]

Typing (assumption, stated): `--cpm` characters per minute, 200 by default (about 40 words a minute, an
average typist); a word is there when the space after it is typed (the last one when the text ends).
Two ways to send it:
  fed    submitted before the first key; each word added to its feed when typed, the feed closed at the end
  whole  submitted once the whole text is typed
For each: the engine's TTFA (fed: from its first word's arrival, as the engine counts it; whole: from its
submit) and the time from the first key to the first audio (what the typist waits); ratio = whole / fed of
the latter. Executors:
  sim    the simulated `--gpu` serving kyutai-tts-1.6b (recipes/kyutai-tts-1.6b.toml) on the engine's
         virtual clock: the words are added between `engine.run(until=t)` calls (no wall time)
  cpu    the tiny random Kyutai checkpoint (moshi's own classes write it: the Kyutai oracle interpreter,
         VOX_KYUTAI_ORACLE_PYTHON or .oracle-kyutai-venv) on the cpu executor, typed in real time (a
         thread sleeping between words: the text takes len(text) / cpm minutes)
"""

from __future__ import annotations

import argparse
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

TEXT = ("Thanks for calling. Your order shipped this morning and should arrive on Thursday before noon, "
        "so keep an eye on the door.")


def typed(text: str, cpm: float) -> list[tuple[float, str]]:
    """(when the word is there, the word with its space) at `cpm` characters per minute from t=0."""
    per_char = 60.0 / cpm
    out, chars = [], 0
    for word in text.split(" "):
        chars += len(word) + 1  # the space after it completes it (the final one: the end of the text)
        out.append((chars * per_char, word + " "))
    return out


def sim_run(text: str, cpm: float, gpu: str) -> dict[str, float]:
    from voxcli.models.base import SynthesisRequest
    from voxcli.models.text_feed import TextFeed

    from voxcli.engine.engine import Engine
    from voxcli.session import EngineOptions, engine_config
    from voxcli.sim.synthetic import SyntheticProgram

    config = engine_config(EngineOptions(model="kyutai-tts-1.6b", executor="sim", gpu=gpu))
    words = typed(text, cpm)
    t_end = words[-1][0]
    out: dict[str, float] = {}
    for mode in ("fed", "whole"):
        engine = Engine(SyntheticProgram.for_model("kyutai-tts-1.6b", streams_text=True), config)
        if mode == "fed":
            feed = TextFeed()
            stream = engine.submit(SynthesisRequest(text=""), at=0.0, text_feed=feed)
            for t, word in words:
                engine.run(until=t)
                feed.add(word)
            feed.close()
        else:
            stream = engine.submit(SynthesisRequest(text=text), at=t_end)
        engine.run()
        tl = stream.timeline
        assert tl.status == "done" and tl.first_audio is not None, (tl.status, tl.reason)
        out[f"{mode}_ttfa_s"] = tl.ttfa
        out[f"{mode}_from_first_key_s"] = tl.first_audio
        engine.close()
    out["typing_s"] = t_end
    return out


def cpu_run(text: str, cpm: float) -> dict[str, float]:
    from voxcli.models import load_model
    from voxcli.models.base import SamplingParams, SynthesisRequest
    from voxcli.models.registry import get_tiny
    from voxcli.models.text_feed import TextFeed

    from voxcli.config import EngineConfig
    from voxcli.engine.engine import Engine

    folder = Path(tempfile.mkdtemp(prefix="kyutai-text-in-"))
    program = load_model(str(get_tiny("kyutai_tts").build(folder / "ckpt")))
    voice = program.spec.voices[0]
    config = EngineConfig(executor="cpu", policy="full", kv_pages=256, kv_page_size=8, codec_slots=4,
                          max_running=8, threads=1)
    request = SynthesisRequest(text="", voice=voice, sampling=SamplingParams(greedy=True), max_frames=1500)
    words = typed(text, cpm)
    out: dict[str, float] = {}
    engine = Engine(program, config)
    try:
        feed = TextFeed()
        t0 = time.perf_counter()
        stream = engine.submit(request, text_feed=feed)

        def typist() -> None:
            for t, word in words:
                time.sleep(max(0.0, t0 + t - time.perf_counter()))
                feed.add(word)
            feed.close()

        thread = threading.Thread(target=typist, daemon=True)
        thread.start()
        first = None
        for _chunk in stream:
            first = first or time.perf_counter()
        thread.join()
        tl = stream.timeline
        assert tl.status == "done" and first is not None, (tl.status, tl.reason)
        out["fed_ttfa_s"] = tl.ttfa
        out["fed_from_first_key_s"] = first - t0
        out["typing_s"] = words[-1][0]
        # the whole text, sent once typed: its TTFA from submit, plus the typing it waited for
        whole = engine.submit(SynthesisRequest(text=text, voice=voice, sampling=SamplingParams(greedy=True)))
        whole.wait(timeout=600)
        out["whole_ttfa_s"] = whole.timeline.ttfa
        out["whole_from_first_key_s"] = words[-1][0] + whole.timeline.ttfa
    finally:
        engine.close()
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cpm", type=float, default=200.0, help="typing speed, characters per minute")
    ap.add_argument("--executors", default="sim,cpu")
    ap.add_argument("--gpu", default="h100")
    ap.add_argument("--text", default=TEXT)
    args = ap.parse_args()
    n_words = len(args.text.split())
    print(f"text: {n_words} words, {len(args.text)} characters, typed at {args.cpm:g} characters/min "
          f"({args.cpm / 5:g} words/min at 5 characters a word)")
    for executor in args.executors.split(","):
        if executor == "sim":
            r = sim_run(args.text, args.cpm, args.gpu)
            where = f"sim executor, simulated {args.gpu}, kyutai-tts-1.6b recipe"
        elif executor == "cpu":
            r = cpu_run(args.text, args.cpm)
            where = "cpu executor, tiny random Kyutai checkpoint, 1 torch thread"
        else:
            raise SystemExit(f"unknown executor {executor!r}: sim or cpu")
        print(f"\n{where} (typing takes {r['typing_s']:.1f} s)")
        print(f"  fed word by word  TTFA {r['fed_ttfa_s'] * 1000:7.0f} ms from its first word; first audio "
              f"{r['fed_from_first_key_s']:6.2f} s after the first key")
        print(f"  sent whole        TTFA {r['whole_ttfa_s'] * 1000:7.0f} ms from its submit;     first audio "
              f"{r['whole_from_first_key_s']:6.2f} s after the first key")
        ratio = r["whole_from_first_key_s"] / r["fed_from_first_key_s"]
        print(f"  ratio (whole / fed, from the first key): {ratio:.1f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Seeded generators of bad `vox` inputs for the fuzz tests: every case is wrong in exactly one place
(the rest of the command is valid and minimal), so a case that succeeds is a finding, not noise.

A case is (label, argv, stdin, files): `files` maps a name to bytes written into the case's own folder
before the run; `{d}` in argv stands for that folder."""
# ruff: noqa: E501 - case tables read best one case per line

from __future__ import annotations

import json
import math
import random
import struct
from dataclasses import dataclass, field

import numpy as np


@dataclass
class Case:
    label: str
    argv: list[str]
    stdin: bytes | None = None
    files: dict[str, bytes] = field(default_factory=dict)
    needs_model: bool = False  # the mistake can only be seen once the model is loaded


SAY = ["say", "-m", "demo", "--quiet", "--greedy", "--max-frames", "4"]
BENCH = ["bench", "--executor", "sim", "--gpu", "h100", "--rates", "2", "--duration", "1", "--warmup", "0",
         "--no-plot", "--out", "{d}/bo"]
PROFILE = ["profile", "--gpu", "h100", "--out", "{d}/po"]


# --- building blocks ----------------------------------------------------------------------------------
def _bad_floats(rng: random.Random) -> list[str]:
    return ["nan", "NaN", "inf", "-inf", "abc", "", "1e999", f"{-rng.uniform(0.001, 100):.4g}", "0x10", "1,5"]


def _bad_ints(rng: random.Random) -> list[str]:
    return ["abc", "1.5", "", "nan", "1e3", f"{-rng.randint(1, 10**6)}", "0x", "--"]


def _bad_bytes(rng: random.Random, n: int = 6) -> bytes:
    """Bytes that are not UTF-8 (a lone continuation byte, an invalid lead byte, a truncated sequence)."""
    bad = rng.choice([b"\xff", b"\xfe", b"\x80", b"\xc3", b"\xe2\x82", b"\xf0\x9f\x98", b"\xed\xa0\x80", b"\xc0\xaf"])
    good = bytes(rng.choice(b"abcdefghij klmnop") for _ in range(n))
    return good[: n // 2] + bad + good[n // 2:]


def wav_bytes(samples: np.ndarray, sr: int = 24000, float32: bool = False) -> bytes:
    """A minimal RIFF/WAVE file (PCM16 or IEEE float32)."""
    if float32:
        data, fmt, bits = samples.astype("<f4").tobytes(), 3, 32
    else:
        data, fmt, bits = (np.clip(samples, -1, 1) * 32767).astype("<i2").tobytes(), 1, 16
    block = bits // 8
    return (b"RIFF" + struct.pack("<I", 36 + len(data)) + b"WAVE" + b"fmt "
            + struct.pack("<IHHIIHH", 16, fmt, 1, sr, sr * block, block, bits) + b"data"
            + struct.pack("<I", len(data)) + data)


# --- say ----------------------------------------------------------------------------------------------
def say_option_cases(rng: random.Random) -> list[Case]:
    out: list[Case] = []
    for opt in ("--temperature", "--top-p", "--repetition-penalty"):
        for v in _bad_floats(rng) + ["0", "-0.0"] + (["1.5", "2"] if opt == "--top-p" else []):
            out.append(Case(f"say {opt} {v}", [*SAY, "Hello.", "-o", "{d}/x.wav", opt, v]))
    for opt in ("--top-k", "--max-frames", "--seed"):
        for v in _bad_ints(rng) + ["0"] * (opt == "--max-frames") + ["-1"]:
            out.append(Case(f"say {opt} {v}", [*SAY, "Hello.", "-o", "{d}/x.wav", opt, v]))
    for v in (str(2**64), str(2**63), str(2**100), str(-(2**63))):
        out.append(Case(f"say --seed {v}", [*SAY, "Hello.", "-o", "{d}/x.wav", "--seed", v]))
    for fmt in ("aac", "WAVX", "", "mp4", "flac"):  # flac: against -o x.wav
        out.append(Case(f"say --format {fmt!r}", [*SAY, "Hello.", "-o", "{d}/x.wav", "--format", fmt]))
    out.append(Case("say --raw --format flac", [*SAY, "Hello.", "-o", "{d}/x.pcm", "--raw", "--format", "flac"]))
    for name in ("x.xyz", "x.wav.bak", "sub/../x.mp4a"):
        out.append(Case(f"say -o {name}", [*SAY, "Hello.", "-o", "{d}/" + name]))
    out.append(Case("say -o a directory", [*SAY, "Hello.", "-o", "{d}"]))
    out.append(Case("say -o below a file", [*SAY, "Hello.", "-o", "{d}/blocker/x.wav"], files={"blocker": b"x"}))
    out.append(Case("say -o - (stdout) with --format flac",
                    [*SAY, "Hello.", "-o", "-", "--format", "flac"]))
    for policy in ("fast", "FULL", "", "sync3"):
        out.append(Case(f"say --policy {policy!r}", [*SAY, "Hello.", "-o", "{d}/x.wav", "--policy", policy]))
    for ex in ("cuda", "tpu", "gpu", ""):
        out.append(Case(f"say --executor {ex!r}", [*SAY, "Hello.", "-o", "{d}/x.wav", "--executor", ex]))
    for dev in ("cuda", "cuda:1", "tpu", "mps:x", ""):
        out.append(Case(f"say --device {dev!r}", [*SAY, "Hello.", "-o", "{d}/x.wav", "--device", dev]))
    for recipe in ("nosuch", "{d}/bad.toml", "{d}/missing.toml"):
        out.append(Case(f"say --recipe {recipe}", [*SAY, "Hello.", "-o", "{d}/x.wav", "--recipe", recipe],
                        files={"bad.toml": b"[engine\npolicy = "}))
    out.append(Case("say -m a folder that is no checkpoint", ["say", "-m", "{d}", "--quiet", "Hello.", "-o",
                                                             "{d}/x.wav"]))
    out.append(Case("say -m an uncached hub id", ["say", "-m", "nobody/nothing-TTS", "--quiet", "Hello.", "-o",
                                                 "{d}/x.wav"]))
    out.append(Case("say unknown option", [*SAY, "Hello.", "-o", "{d}/x.wav", "--sedd", "1"]))
    out.append(Case("say option without value", [*SAY, "Hello.", "-o"]))
    return out


def say_text_cases(rng: random.Random) -> list[Case]:
    out: list[Case] = []
    for i in range(40):
        out.append(Case(f"say stdin not UTF-8 #{i}", [*SAY, "-", "-o", "{d}/x.wav"], stdin=_bad_bytes(rng, 4 + i)))
    for i in range(15):
        out.append(Case(f"say --text-file not UTF-8 #{i}", [*SAY, "-f", "{d}/t.txt", "-o", "{d}/x.wav"],
                        files={"t.txt": _bad_bytes(rng, 8 + i)}))
    for blank in ("", " ", "\n\n", "\t \r\n", "\u3000"):
        out.append(Case(f"say empty stdin {blank!r}", [*SAY, "-", "-o", "{d}/x.wav"], stdin=blank.encode()))
        out.append(Case(f"say empty argument {blank!r}", [*SAY, blank, "-o", "{d}/x.wav"]))
    out.append(Case("say --text-file missing", [*SAY, "-f", "{d}/none.txt", "-o", "{d}/x.wav"]))
    out.append(Case("say --text-file is a folder", [*SAY, "-f", "{d}", "-o", "{d}/x.wav"]))
    out.append(Case("say text and --text-file", [*SAY, "Hi.", "-f", "{d}/t.txt", "-o", "{d}/x.wav"],
                    files={"t.txt": b"Hello."}))
    out.append(Case("say UTF-16 text file", [*SAY, "-f", "{d}/t.txt", "-o", "{d}/x.wav"],
                    files={"t.txt": "Hello there.".encode("utf-16")}))
    return out


def _control_only(rng: random.Random) -> str:
    return "".join(rng.choice("\x00\x01\x02\x03\x07\x08\x0b\x0c\x0e\x1b\x7f\u200b\u2060\ufeff\u202e \t")
                   for _ in range(rng.randint(1, 20))).replace("\x00", "\x01") or "\x01"


def say_hostile_text_cases(rng: random.Random) -> list[Case]:
    """Text that is not text, from every source: lone surrogates (a JSON escape, or a byte that is not
    UTF-8 in argv, which Python keeps as U+DC80..U+DCFF), and text that is only control characters."""
    out: list[Case] = []
    for i in range(20):
        pos = rng.randint(0, 8)
        code = rng.choice([0xD800, 0xDBFF, 0xDC00, 0xDFFF, 0xDC80 + rng.randrange(128)])
        text = "Hello there."[:pos] + chr(code) + "Hello there."[pos:]
        out.append(Case(f"say argv with U+{code:04X} #{i}", [*SAY, text, "-o", "{d}/x.wav"]))
    for i in range(20):
        text = _control_only(rng)
        if not text.strip():
            text = "\x01" + text
        out.append(Case(f"say argv only controls #{i}", [*SAY, text, "-o", "{d}/x.wav"]))
        out.append(Case(f"say stdin only controls #{i}", [*SAY, "-", "-o", "{d}/x.wav"], stdin=text.encode()))
        out.append(Case(f"say file only controls #{i}", [*SAY, "-f", "{d}/t.txt", "-o", "{d}/x.wav"],
                        files={"t.txt": text.encode()}))
    for v in ("100000", "4096", str(2**31), "99999999"):
        out.append(Case(f"say --set threads={v}", [*SAY, "Hello.", "-o", "{d}/x.wav", "--set", f"threads={v}"]))
    return out


def say_model_cases(rng: random.Random) -> list[Case]:
    """Mistakes only the loaded model can see (its voices, languages, modes)."""
    out: list[Case] = []
    for v in ("nosuch", "Ryan2", "ALICE", "x" * 50):
        out.append(Case(f"say --voice {v}", [*SAY, "Hello.", "-o", "{d}/x.wav", "--voice", v], needs_model=True))
    for lang in ("klingon", "en-US", "zz"):
        out.append(Case(f"say --lang {lang}", [*SAY, "Hello.", "-o", "{d}/x.wav", "--lang", lang], needs_model=True))
    out.append(Case("say --instructions on a model without them",
                    [*SAY, "Hello.", "-o", "{d}/x.wav", "--instructions", "whisper"], needs_model=True))
    clip = wav_bytes((0.1 * np.sin(np.arange(24000) / 9)).astype(np.float32))
    out.append(Case("say --ref-audio on a model that does not clone",
                    [*SAY, "Hello.", "-o", "{d}/x.wav", "--ref-audio", "{d}/ref.wav"], files={"ref.wav": clip},
                    needs_model=True))
    return out


def reference_clip_cases(rng: random.Random) -> list[Case]:
    """Bad --ref-audio files: each fails while reading, before any model load."""
    clips: list[tuple[str, bytes]] = [("empty file", b""), ("text", b"this is not audio\n"),
                                      ("RIFF only", b"RIFF"), ("truncated header", wav_bytes(np.zeros(10))[:30]),
                                      ("no frames", wav_bytes(np.zeros(0)))]
    for i in range(20):
        clips.append((f"random bytes #{i}", bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 400)))))
    for i in range(6):
        x = np.zeros(2400, np.float32)
        x[rng.randrange(2400)] = rng.choice([math.nan, math.inf, -math.inf])
        clips.append((f"non-finite sample #{i}", wav_bytes(x, float32=True)))
    for i in range(6):  # a valid header with a lying data size
        good = wav_bytes((0.1 * np.sin(np.arange(2400) / 7)).astype(np.float32))
        clips.append((f"cut data #{i}", good[: 44 + rng.randint(0, 1)] if i % 2 else good[:40]))
    out = [Case(f"ref clip: {name}", [*SAY, "Hello.", "-o", "{d}/x.wav", "--ref-audio", "{d}/ref.wav"],
                files={"ref.wav": data}) for name, data in clips]
    out.append(Case("ref clip: missing", [*SAY, "Hello.", "-o", "{d}/x.wav", "--ref-audio", "{d}/none.wav"]))
    out.append(Case("ref clip: a folder", [*SAY, "Hello.", "-o", "{d}/x.wav", "--ref-audio", "{d}"]))
    return out


# --- --set ----------------------------------------------------------------------------------------
_NUMERIC = ("background_min_batch", "max_running", "max_queue", "kv_page_size", "kv_pages", "codec_slots",
            "max_frames", "max_prefill_batch", "max_prefill_tokens", "threads", "seed")
_SECONDS = ("urgent_margin_s", "max_defer_s", "ttfa_target_s")
QUOTED_7, QUOTED_X = '"7"', '"x"'  # TOML strings where numbers belong


def set_cases(rng: random.Random, n: int) -> list[Case]:
    def one() -> str:
        kind = rng.randrange(10)
        if kind == 0:
            return f"{rng.choice(_NUMERIC)}={rng.choice(['abc', '1.5', '-3', 'true', '[1]', QUOTED_7])}"
        if kind == 1:
            return f"{rng.choice(_SECONDS)}={rng.choice(['nan', 'inf', '-0.5', QUOTED_X, 'true', '[0.1]'])}"
        if kind == 2:
            return f"chunk.{rng.choice(['first', 'steady'])}={rng.choice(['abc', '0', '-2', '1.5', '[2]', 'true'])}"
        if kind == 3:
            return f"chunk.ramp={rng.choice(['5', 'abc', '[0]', '[2, -1]', '[1.5]', '{a=1}'])}"
        if kind == 4:
            return f"{rng.choice(['dtype', 'device', 'policy', 'admission', 'executor'])}=" \
                   f"{rng.choice(['bogus', 'tpu', '5', 'FULL', 'cuda:x', '[1]'])}"
        if kind == 5:
            name = "".join(rng.choice("abcdefghijklmnopqrstuvwxyz_.") for _ in range(rng.randint(1, 12)))
            return f"{name}=1"
        if kind == 6:
            return rng.choice(["policy", "=5", "", "==", "kv_pages", " = ", "chunk.=2", "chunk.size=3"])
        if kind == 7:
            return f"{rng.choice(['urgent_buckets', 'decode_buckets', 'background_buckets'])}=" \
                   f"{rng.choice(['[4, 2]', '[0, 1]', '[]', '5x', '[1, true]', '[1.5]'])}"
        if kind == 8:
            return f"{rng.choice(_NUMERIC[:9])}={rng.choice(['0', '-1', '-100'])}"
        return f"lm_sms={rng.choice(['-1', 'x', '1.5'])}"

    return [Case(f"--set {s}", [*SAY, "Hello.", "-o", "{d}/x.wav", "--set", s])
            for s in (one() for _ in range(n))]


# --- batch -----------------------------------------------------------------------------------------
def _bad_batch_line(rng: random.Random, k: int) -> bytes:
    kind = k % 18
    if kind == 16:  # only control characters, as plain text, TSV or JSONL
        text = _control_only(rng).replace("\t", " ").replace("\x0b", "\x01").replace("\x0c", "\x01")
        text = text if text.strip() else "\x01" + text
        return rng.choice([text.encode(), b"ctl\t" + text.encode(), json.dumps({"text": text}).encode()])
    if kind == 17:  # a lone surrogate escape in a JSONL field
        return rng.choice([b'{"text": "Hi \\udfff."}', b'{"text": "Hi.", "voice": "\\ud800"}',
                           b'{"text": "Hi.", "instructions": "x\\udc80"}'])
    if kind == 0:
        return _bad_bytes(rng, 10)
    if kind == 1:
        return rng.choice([b"", b"   ", b"\t", b"\r"])
    if kind == 2:
        return rng.choice([b"{", b"{\"text\": }", b"{\"text\": \"a\",}", b"{'text': 'single quotes'}", b"{]"])
    if kind == 3:
        return rng.choice([b"{\"text\": true}", b"{\"text\": 5}", b"{\"text\": null}", b"{\"id\": \"x\"}",
                           b"{\"text\": [\"a\"]}"])
    if kind == 4:
        return json.dumps({"text": "Hi.", rng.choice(["speed", "Text", "voice_id", "pitch"]): 1}).encode()
    if kind == 5:
        return json.dumps({"text": "Hi.", "seed": rng.choice([2**64, 2**63, -1, True, False, 1.5, "7", [1],
                                                              10**30])}).encode()
    if kind == 6:
        return json.dumps({"text": "Hi.", rng.choice(["voice", "language", "instructions"]):
                           rng.choice([5, True, ["a"], {"a": 1}])}).encode()
    if kind == 7:
        return json.dumps({"text": "Hi.", "voice": rng.choice(["nosuch", "Ryan9", "ALIC"])}).encode()
    if kind == 8:
        return json.dumps({"text": "Hi.", "language": rng.choice(["klingon", "xx", "en-GB"])}).encode()
    if kind == 9:
        return b"{\"text\": \"bad \\ud800 surrogate\"}"
    if kind == 10:
        return b"tsv-empty\t" + rng.choice([b"", b"   "])
    if kind == 11:
        return b"h\x00i\x00" if rng.random() < 0.5 else b"a\x00b"
    if kind == 12:
        return json.dumps({"text": "Hi.", "instructions": "speak softly"}).encode()
    if kind == 13:
        return json.dumps({"text": "Hi.", "id": rng.choice([True, {"a": 1}, [1, 2]])}).encode() \
            if rng.random() < 0.5 else json.dumps({"text": "  "}).encode()
    if kind == 14:
        return b"\xef\xbb\xbf" + _bad_bytes(rng, 5)  # a BOM then garbage
    return json.dumps({"text": "Hi.", "seed": rng.choice([2**64 + 1, -(2**63) - 1])}).encode()


def batch_cases(rng: random.Random, files: int, bad_per_file: int) -> list[tuple[Case, int, list[str]]]:
    """(case, number of bad lines, ids of the good lines) per generated input file. Good lines are plain
    text, TSV or JSONL; the bad ones are spread among them; the last file repeats ids."""
    out = []
    for f in range(files):
        lines: list[bytes] = []
        good_ids: list[str] = []
        n_good = 1 + (f % 2)
        slots = ["bad"] * bad_per_file + ["good"] * n_good
        rng.shuffle(slots)
        for k, slot in enumerate(slots):
            if slot == "bad":
                lines.append(_bad_batch_line(rng, f * bad_per_file + k))
            else:
                gid = f"good{f}-{k}"
                style = rng.randrange(3)
                if style == 0:
                    lines.append(f"{gid}\tGood line {k}.".encode())
                else:
                    lines.append(json.dumps({"id": gid, "text": f"Good line {k}.", "seed": rng.randrange(2**63)})
                                 .encode())
                good_ids.append(gid)
        data = b"\n".join(lines) + b"\n"
        if f % 5 == 4:  # CRLF line ends on some files
            data = data.replace(b"\n", b"\r\n")
        out.append((Case(f"batch file #{f}", ["batch", "-m", "demo", "--greedy", "--max-frames", "4", "-c", "4",
                                              "{d}/in.txt", "-o", "{d}/out"], files={"in.txt": data}),
                    bad_per_file, good_ids))
    return out


def batch_duplicate_case() -> tuple[Case, int, list[str]]:
    data = b"same\tfirst\nsame\tsecond\na/b\tthird\na_b\tfourth\n"
    return (Case("batch duplicate ids", ["batch", "-m", "demo", "--greedy", "--max-frames", "4", "{d}/in.tsv",
                                         "-o", "{d}/out"], files={"in.tsv": data}), 2, ["same", "a_b"])


def batch_command_cases(rng: random.Random) -> list[Case]:
    base = ["batch", "-m", "demo", "-q", "--greedy", "--max-frames", "4"]
    out = [Case("batch no input lines", [*base, "{d}/in.txt", "-o", "{d}/out"], files={"in.txt": b""}),
           Case("batch missing input", [*base, "{d}/none.txt", "-o", "{d}/out"]),
           Case("batch input is a folder", [*base, "{d}", "-o", "{d}/out"]),
           Case("batch -o is a file", [*base, "{d}/in.txt", "-o", "{d}/in.txt"], files={"in.txt": b"Hi.\n"}),
           Case("batch --format bogus", [*base, "{d}/in.txt", "-o", "{d}/out", "--format", "bogus"],
                files={"in.txt": b"Hi.\n"}),
           Case("batch no -o", [*base, "{d}/in.txt"], files={"in.txt": b"Hi.\n"})]
    for c in ("0", "-3", "x", "1.5"):
        out.append(Case(f"batch -c {c}", [*base, "{d}/in.txt", "-o", "{d}/out", "-c", c], files={"in.txt": b"Hi.\n"}))
    for s in ("-1", str(2**64), "x"):
        out.append(Case(f"batch --seed {s}", [*base, "{d}/in.txt", "-o", "{d}/out", "--seed", s],
                        files={"in.txt": b"Hi.\n"}))
    for t in ("nan", "-1", "0"):
        out.append(Case(f"batch --temperature {t}", [*base, "{d}/in.txt", "-o", "{d}/out", "--temperature", t],
                        files={"in.txt": b"Hi.\n"}))
    out.append(Case("batch --voice nosuch (command-wide)", [*base, "{d}/in.txt", "-o", "{d}/out", "--voice",
                                                          "nosuch"], files={"in.txt": b"Hi.\n"}, needs_model=True))
    return out


# --- bench and profile ------------------------------------------------------------------------------
def bench_cases(rng: random.Random) -> list[Case]:
    out: list[Case] = []

    def with_opt(opt: str, value: str, files: dict[str, bytes] | None = None) -> Case:
        argv = list(BENCH)
        if opt in argv:
            argv[argv.index(opt) + 1] = value
        else:
            argv += [opt, value]
        return Case(f"bench {opt} {value!r}", argv, files=files or {})

    for v in ("inf", "nan", "-1", "0", "a:b:c", "1:2", "1:1000000:0.001", "", ",", "5:1:1", "1:5:0", "1:5:-1",
              "1e9", "2,nan", "inf:inf:1", "0:5:1"):
        out.append(with_opt("--rates", v))
    for opt in ("--duration", "--timeout", "--frames-scale"):
        for v in ("0", "-1", "nan", "inf", "abc"):
            out.append(with_opt(opt, v))
    for opt, vals in (("--seeds", ("0", "-1", "x")), ("--warmup", ("-1", "x", str(10**7))),
                      ("--max-frames", ("-1", "x")), ("--seed", ("-1", "x"))):
        for v in vals:
            out.append(with_opt(opt, v))
    for v in ("tpu", "cuda", "", "SIM"):
        out.append(with_opt("--executor", v))
    for v in ("nosuch", "a100", ""):
        out.append(with_opt("--gpu", v))
    for v in ("fast", "full,fast", ",", "sync3"):
        out.append(with_opt("--policy", v))
    for v in ("nosuch-model", "{d}"):
        out.append(with_opt("--model", v))
    out.append(with_opt("--workload", "{d}/none.tsv"))
    out.append(with_opt("--workload", "{d}/w.tsv", {"w.tsv": b"id\ttext\n" + _bad_bytes(rng) + b"\tx\n"}))
    out.append(with_opt("--workload", "{d}/w.tsv", {"w.tsv": b"no header\n"}))
    out.append(with_opt("--workload", "{d}/w.tsv", {"w.tsv": b"id\ttext\n"}))
    out.append(with_opt("--workload", "{d}/w.tsv", {"w.tsv": b"id\ttext\nnotab\n"}))
    out.append(with_opt("--workload", "{d}", {}))
    out.append(with_opt("--out", "{d}/f", {"f": b"x"}))
    for s in ("policy=fast", "kv_pages=0", "urgent_margin_s=nan", "chunk.first=abc", "nosuch=1"):
        out.append(with_opt("--set", s))
    sim_no_gpu = [a for a in BENCH]
    i = sim_no_gpu.index("--gpu")
    del sim_no_gpu[i:i + 2]
    out.append(Case("bench sim without --gpu", sim_no_gpu))
    return out


def profile_cases(rng: random.Random) -> list[Case]:
    out = [Case("profile without --gpu on a CPU machine", ["profile", "--out", "{d}/po"])]
    for v in ("nosuch", "a100", "", "../h100"):
        out.append(Case(f"profile --gpu {v!r}", ["profile", "--gpu", v, "--out", "{d}/po"]))
    for v in ("0", "-1", "x"):
        out.append(Case(f"profile --gpus {v}", [*PROFILE, "--gpus", v]))
    for v in ("-1", "nan", "inf", "-inf", "x"):
        out.append(Case(f"profile --target-rate {v}", [*PROFILE, "--target-rate", v]))
    for v in ("nosuch", "qwen3-tts-9b", "{d}/none"):
        out.append(Case(f"profile --model {v}", [*PROFILE, "--model", v]))
    out.append(Case("profile --workload missing", [*PROFILE, "--workload", "{d}/none.tsv"]))
    out.append(Case("profile --workload not UTF-8", [*PROFILE, "--workload", "{d}/w.tsv"],
                    files={"w.tsv": b"id\ttext\n\xff\tx\n"}))
    out.append(Case("profile --out a file", ["profile", "--gpu", "h100", "--out", "{d}/f"], files={"f": b"x"}))
    return out

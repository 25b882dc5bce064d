"""Seeded generators of hostile `vox serve` clients for tests/test_fuzz_server.py: HTTP bodies wrong in one
field, raw bodies that are not JSON objects, methods and paths, raw protocol garbage, slow and stalled
clients, clients that leave mid-stream, and WebSocket sessions wrong in every state.

A case is (kind, label, payload); `expect` says what a correct server does with it:
    "4xx"    a 4xx JSON error whose message is a sentence (HTTP), or an error message then a close with a
             reason (WebSocket)
    "close"  the client leaves; nothing to read, the server just has to free everything
    "ok"     a well-formed session (a WebSocket that ends cleanly with `done`)
`schema_cases(model, schema)`: every option of a family's schema (models/<family>/options.py) at every
hostile value of tests/support/option_cases.py, in an HTTP body and as a WebSocket start, and the shared
numeric fields' extremes; the suite runs them against every demo family."""
# ruff: noqa: E501 - case tables read best one case per line

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from typing import Any

from voxcli.models.options import REQUEST_FIELDS, OptionSchema

from support.option_cases import NUMBER_CASES, WHOLE_ONLY, option_cases

MODEL = "demo"
GOOD = {"model": MODEL, "input": "Hello there.", "greedy": True, "max_frames": 4, "response_format": "pcm"}


@dataclass
class ServerCase:
    kind: str  # "json" | "raw_body" | "method" | "raw" | "slow" | "leave" | "ws"
    label: str
    payload: Any
    expect: str = "4xx"
    extra: dict[str, Any] = field(default_factory=dict)


def _text_garbage(rng: random.Random) -> str:
    return rng.choice(["", " ", "\t\n", "\x00\x01\x02", "\u200b\u200b", "\x1b[31m\x07", "\x7f" * 5])


# --- JSON bodies wrong in one field ----------------------------------------------------------------
_TYPE_JUNK: list[Any] = [5, -1, 1.5, True, None, [], ["a"], {}, {"a": 1}, "x"]


def json_field_cases(rng: random.Random, n_random: int = 150) -> list[ServerCase]:
    out: list[ServerCase] = []

    def case(label: str, body: dict[str, Any] | str) -> None:
        out.append(ServerCase("json", label, body))

    for v in ["tts-2", "", "Demo", "x" * 300, 5, None, [], {"a": 1}]:
        case(f"model {v!r:.40}", {**GOOD, "model": v})
    for v in ["", "   ", "\n\t", 5, None, [], {}, True, "x" * 4097, "word " * 1000]:
        case(f"input {v!r:.40}", {**GOOD, "input": v})
    for _ in range(15):
        case("input only controls", {**GOOD, "input": "".join(rng.choice("\x00\x01\x02\x03\x07\x08\x0b\x0c\x0e\x1b\x7f\u200b\u2060\ufeff") for _ in range(rng.randint(1, 30)))})
    for esc in ["\\ud800", "\\udfff", "\\udc80", "\\ud83d", "a\\ud800b\\udc00"]:
        for where in ("input", "voice", "instructions", "language"):
            other = {k: v for k, v in GOOD.items() if k != where}
            text = json.dumps(other)[:-1] + f', "{where}": "x {esc} y"}}'
            case(f"{where} holds {esc}", text)
        case(f"option key {esc}", json.dumps(GOOD)[:-1] + f', "options": {{"k{esc}": 1}}}}')
    for v in ["nosuch", "Ryan", "x" * 200, *_TYPE_JUNK[:4]]:
        case(f"voice {v!r:.40}", {**GOOD, "voice": v})
    for v in ["klingon", "en-US", "x" * 100, *_TYPE_JUNK[:4]]:
        case(f"language {v!r:.40}", {**GOOD, "language": v})
    for v in ["aac", "WAVX", "", "opus", "ogg", 5, None]:
        case(f"response_format {v!r}", {**GOOD, "response_format": v})
    case("sse with flac", {**GOOD, "response_format": "flac", "stream_format": "sse"})
    for v in ["video", "", "SSE", 1, None]:
        case(f"stream_format {v!r}", {**GOOD, "stream_format": v})
    for v in [0, -1, 2, 0.5, 1.01, "fast", None, [1]]:
        case(f"speed {v!r}", {**GOOD, "speed": v})
    for name, values in (("temperature", [0, -0.5, "hot", []]), ("top_k", [-1, -100, "x", 1.5]),
                         ("top_p", [0, -0.1, 1.5, "x"]), ("max_frames", [0, -1, "x", 1.5]),
                         ("fixed_frames", [0, -5, "x"]), ("seed", [-1, 2**64, -(2**63), "x", [1], 1.5]),
                         ("greedy", [2, "maybe", [], {}]), ("cfg_scale", ["x", [], {}]),
                         ("instructions", [5, [], {}]), ("options", [5, "x", [], True])):
        for v in values:
            case(f"{name} {v!r:.30}", {**GOOD, name: v})
    for k in ["sub_topk", "x", "", "speed", "voice", "temperature", "a" * 100]:
        case(f"unknown option {k!r:.30}", {**GOOD, "options": {k: 1}})
    for name in ["Voice", "text", "stream", "format", "voice_id", "pitch", "x" * 50, ""]:
        case(f"unknown field {name!r:.30}", {**GOOD, name: 1})
    for missing in ("model", "input"):
        case(f"missing {missing}", {k: v for k, v in GOOD.items() if k != missing})
    for i in range(n_random):  # a field replaced by junk that no field accepts
        name = rng.choice(["model", "input", "voice", "language", "response_format", "stream_format", "speed",
                           "greedy", "seed", "temperature", "top_k", "top_p", "max_frames", "instructions"])
        junk: Any = rng.choice([[], ["a"], {}, {"a": 1}, [None], {"": ""}])
        if name in ("top_k", "top_p", "temperature", "max_frames") and rng.random() < 0.5:
            junk = -rng.randint(1, 10**6)  # below every bound these fields have
        elif name in ("voice", "language", "model") and rng.random() < 0.5:
            junk = "".join(rng.choice("qxzjkv") for _ in range(rng.randint(3, 12)))  # no such name
        elif name == "input" and rng.random() < 0.5:
            junk = _text_garbage(rng)
        case(f"random junk #{i} in {name}", {**GOOD, name: junk})
    return out


# --- raw bodies --------------------------------------------------------------------------------------
def raw_body_cases(rng: random.Random, n_random: int = 60) -> list[ServerCase]:
    good = json.dumps(GOOD).encode()
    bodies: list[tuple[str, bytes, str]] = [
        ("empty", b"", "application/json"),
        ("not json", b"hello", "application/json"),
        ("truncated", good[: len(good) // 2], "application/json"),
        ("trailing comma", good[:-1] + b",}", "application/json"),
        ("single quotes", good.replace(b'"', b"'"), "application/json"),
        ("array", b"[" + good + b"]", "application/json"),
        ("number", b"5", "application/json"),
        ("string", b'"Hello."', "application/json"),
        ("null", b"null", "application/json"),
        ("text/plain", good, "text/plain"),
        ("form", b"model=demo&input=Hello", "application/x-www-form-urlencoded"),
        ("multipart", b"--x\r\n\r\nhi\r\n--x--", "multipart/form-data; boundary=x"),
        ("deep nesting", b'{"model":"demo","input":' + b"[" * 5000 + b"]" * 5000 + b"}", "application/json"),
        ("deep objects", b'{"model":"demo","input":"Hi.","options":' + b'{"a":' * 3000 + b"1" + b"}" * 3001, "application/json"),
        ("duplicate keys", b'{"model":"demo","model":"x","input":"Hi."}', "application/json"),
        ("NaN speed", good[:-1] + b',"speed":NaN}', "application/json"),
        ("Infinity", good[:-1] + b',"top_p":Infinity}', "application/json"),
        ("over the size limit", b'{"model":"demo","input":"' + b"a" * 70000 + b'"}', "application/json"),
    ]
    for i in range(n_random):
        n = rng.randint(1, 300)
        bodies.append((f"random bytes #{i}", bytes(rng.getrandbits(8) for _ in range(n)), "application/json"))
    for i in range(20):
        pos = rng.randrange(len(good))
        bad = rng.choice([b"\xff", b"\xc3", b"\xed\xa0\x80", b"\x00", b"\x80\x80"])
        bodies.append((f"bad UTF-8 at {pos} #{i}", good[:pos] + bad + good[pos:], "application/json"))
    for i in range(20):  # JSON cut at a random place
        bodies.append((f"cut at random #{i}", good[: rng.randrange(1, len(good) - 1)], "application/json"))
    out = [ServerCase("raw_body", label, body, extra={"content_type": ct}) for label, body, ct in bodies]
    out.append(ServerCase("raw_body", "chunked over the size limit", (b"x" * 8192 for _ in range(12)),
                          extra={"content_type": "application/json"}))
    return out


# --- methods and paths -------------------------------------------------------------------------------
def method_cases(rng: random.Random, n_random: int = 50) -> list[ServerCase]:
    out = []
    for m in ("GET", "PUT", "DELETE", "PATCH", "OPTIONS"):
        out.append(ServerCase("method", f"{m} /v1/audio/speech", (m, "/v1/audio/speech")))
    for m in ("POST", "PUT", "DELETE"):
        for path in ("/health", "/metrics", "/v1/models", "/v1/audio/voices"):
            out.append(ServerCase("method", f"{m} {path}", (m, path)))
    for path in ("/", "/v1", "/v1/audio", "/v1/audio/speech/", "/v2/audio/speech", "/admin", "/../etc/passwd",
                 "/%2e%2e/%2e%2e", "/" + "a" * 4000, "/v1/audio/speech%00", "/docs", "/redoc"):
        out.append(ServerCase("method", f"GET {path[:40]}", ("GET", path)))
    for i in range(n_random):
        path = "/" + "".join(rng.choice("abcdefghijklmnopqrstuvwxyz0123456789/%._-~") for _ in range(rng.randint(1, 60)))
        if path in ("/health", "/metrics", "/v1/models", "/v1/audio/voices"):
            continue
        out.append(ServerCase("method", f"GET random path #{i}", ("GET", path)))
    return out


# --- raw protocol ------------------------------------------------------------------------------------
def raw_protocol_cases(rng: random.Random, n_random: int = 60) -> list[ServerCase]:
    body = json.dumps(GOOD).encode()
    post = b"POST /v1/audio/speech HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
    raws: list[tuple[str, bytes | list[bytes]]] = [
        ("garbage line", b"GARBAGE\r\n\r\n"),
        ("no host", b"GET /health HTTP/1.1\r\n\r\n"),
        ("bad header line", b"GET /health HTTP/1.1\r\nhost: x\r\nno colon here\r\n\r\n"),
        ("space before colon", b"GET /health HTTP/1.1\r\nhost : x\r\n\r\n"),
        ("control char in path", b"GET /he\x01alth HTTP/1.1\r\nhost: x\r\n\r\n"),
        ("bad content-length", post + b"content-length: abc\r\n\r\n" + body),
        ("negative content-length", post + b"content-length: -5\r\n\r\n" + body),
        ("two content-lengths", post + b"content-length: 5\r\ncontent-length: 6\r\n\r\n" + body),
        ("CL and TE", post + b"content-length: 5\r\ntransfer-encoding: chunked\r\n\r\n0\r\n\r\n"),
        ("bad chunk size", post + b"transfer-encoding: chunked\r\n\r\nzz\r\n"),
        ("unknown transfer-encoding", post + b"transfer-encoding: gzip\r\n\r\n" + body),
        ("oversized headers", [b"GET /health HTTP/1.1\r\nhost: x\r\nx-big: " + b"a" * 20000, b"a\r\n\r\n"]),
        ("many headers", [b"GET /health HTTP/1.1\r\nhost: x\r\n" + b"".join(b"x-h%d: v\r\n" % i for i in range(1500)), b"\r\n"]),
        ("HTTP/2 preface", b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"),
        ("TLS hello", bytes.fromhex("160301002e0100002a0303") + b"\x00" * 40),
        ("lone LF lines", b"GET /health HTTP/1.1\nhost: x\n\n"),
        ("null bytes", b"\x00" * 64),
        ("CONNECT", b"CONNECT example.com:443 HTTP/1.1\r\nhost: example.com:443\r\n\r\n"),
        ("upgrade h2c", b"GET /health HTTP/1.1\r\nhost: x\r\nconnection: upgrade\r\nupgrade: h2c\r\n\r\n"),
        ("websocket upgrade on speech", b"GET /v1/audio/speech HTTP/1.1\r\nhost: x\r\nconnection: upgrade\r\nupgrade: websocket\r\nsec-websocket-version: 13\r\nsec-websocket-key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n"),
    ]
    for i in range(n_random):
        raws.append((f"random bytes #{i}", bytes(rng.getrandbits(8) for _ in range(rng.randint(8, 200))) + b"\r\n\r\n"))
    for i in range(15):  # a valid request line, then a header mangled at random
        line = bytearray(b"x-junk: value-%d" % i)
        line[rng.randrange(len(line))] = rng.choice(b"\x00\x01\x7f\r :")
        raws.append((f"mangled header #{i}", b"GET /health HTTP/1.1\r\nhost: x\r\n" + bytes(line) + b"\r\n\r\n"))
    return [ServerCase("raw", label, data, expect="4xx-or-ok") for label, data in raws]


def slow_cases(n_slowloris: int, n_stalled: int) -> list[ServerCase]:
    out = [ServerCase("slow", f"slowloris #{i}", "headers", expect="408") for i in range(n_slowloris)]
    out += [ServerCase("slow", f"stalled body #{i}", "body", expect="408") for i in range(n_stalled)]
    return out


def leave_cases(rng: random.Random, n: int) -> list[ServerCase]:
    """Clients that leave: before the answer, after the first bytes, mid-body of a long stream."""
    out = []
    for i in range(n):
        when = rng.choice(["before answer", "after first bytes", "mid-stream"])
        fmt = rng.choice(["pcm", "wav", "sse"])
        out.append(ServerCase("leave", f"leave {when} ({fmt}) #{i}", {"when": when, "fmt": fmt}, expect="close"))
    return out


# --- WebSocket ---------------------------------------------------------------------------------------
WS_START = {"type": "start", "response_format": "pcm", "greedy": True, "max_frames": 4}


def _ws_junk(rng: random.Random) -> str | bytes:
    kind = rng.randrange(9)
    if kind == 0:
        return bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 64)))
    if kind == 1:
        return json.dumps({"type": rng.choice(["start", "x", "", None, 5, "TEXT"]), "text": "Hi. "})
    if kind == 2:
        return json.dumps({"type": "text", "text": rng.choice([5, None, [], {}, True])})
    if kind == 3:
        return '{"type": "text", "text": "bad \\ud800 here"}'
    if kind == 4:
        return json.dumps(rng.choice([[], 5, "x", None]))  # JSON but not an object: spoken as text
    if kind == 5:
        return "{" * rng.randint(1, 4)  # not JSON: plain text
    if kind == 6:
        return "".join(chr(rng.randint(1, 0x2FF)) for _ in range(rng.randint(1, 30)))
    if kind == 7:
        return json.dumps({"type": "end", "text": rng.choice([5, "Last words. "])})
    return "Words that make a sentence here. "


def ws_cases(rng: random.Random, n_random: int) -> list[ServerCase]:
    out: list[ServerCase] = []
    firsts: list[str | bytes] = [b"\x00binary", b"", "not json", "[]", "5", '{"type": "text"}', '{"type": "start", "bogus": 1}',
                                 '{"type": "start", "voice": "nosuch"}', '{"type": "start", "language": "klingon"}',
                                 '{"type": "start", "model": "x"}', '{"type": "start", "voice": "a\\ud800"}',
                                 '{"type": "start", "response_format": "mp3"}', '{"type": "start", "temperature": -1}',
                                 '{"type": "start", "options": {"nosuch": 1}}', "{", json.dumps({"type": "start", "top_p": 2})]
    for f in firsts:
        out.append(ServerCase("ws", f"first frame {f!r:.40}", [f]))
    after: list[list[str | bytes]] = [[b"bin"], ["Hello there. ", b"\xff"], ['{"type": "start"}'], ['{"type": "text", "text": 5}'],
                                      ['{"type": "text", "text": "x \\udc00"}'], ["Some words. ", '{"type": "end"}', "after the end"],
                                      ['{"type": "end"}', b"after the end"], ['{"type": "nope"}'], ["x" * 100_001]]
    for frames in after:
        out.append(ServerCase("ws", f"after start {frames!r:.50}", [json.dumps(WS_START), *frames]))
    out.append(ServerCase("ws", "a clean session", [json.dumps(WS_START), "Hello there, all of you. ", '{"type": "end"}'], expect="ok"))
    out.append(ServerCase("ws", "an empty clean session", [json.dumps(WS_START), '{"type": "end"}'], expect="ok"))
    for i in range(n_random):
        frames: list[str | bytes] = []
        if rng.random() < 0.85:
            frames.append(json.dumps(WS_START))
        frames += [_ws_junk(rng) for _ in range(rng.randint(0 if frames else 1, 5))]
        leave = rng.random() < 0.3
        if not leave and frames[0] == json.dumps(WS_START):
            frames.append('{"type": "end"}')  # else the session waits for more text (its idle bound)
        out.append(ServerCase("ws", f"random session #{i}", frames, expect="any", extra={"leave": leave}))
    return out


# the shared numeric fields a speech body and a WebSocket start carry
SHARED_FIELDS = ("temperature", "top_k", "top_p", "seed", "max_frames", "cfg_scale")


def schema_cases(model: str, schema: OptionSchema) -> list[ServerCase]:
    """Each option of `schema` at each of its hostile values, and each shared numeric field at its
    extremes (a value its range holds is left out: not hostile), over HTTP and as a WebSocket start."""
    good = json.dumps({**GOOD, "model": model})[:-1]
    out: list[ServerCase] = []
    for option, text, case in option_cases(schema):
        out.append(ServerCase("json", f"{model} options.{option} {case}", f'{good}, "options": {{"{option}": {text}}}}}'))
        out.append(ServerCase("ws", f"{model} start options.{option} {case}", ['{"type": "start", "options": {"' + option + '": ' + text + "}}"]))
    for name in SHARED_FIELDS:
        spec = REQUEST_FIELDS.get(name)
        assert spec is not None and spec.range is not None
        for text, case in NUMBER_CASES + (WHOLE_ONLY if spec.kind == "whole" else ()):
            if case == "tiny" and spec.range.lo <= 1e-300:
                continue
            out.append(ServerCase("json", f"{model} {name} {case}", f'{good}, "{name}": {text}}}'))
            out.append(ServerCase("ws", f"{model} start {name} {case}", ['{"type": "start", "' + name + '": ' + text + "}"]))
    return out


def all_cases(seed: int, schema: OptionSchema | None = None) -> list[ServerCase]:
    """The `demo` run: every generator, and `schema`'s cases (the demo family's options)."""
    rng = random.Random(seed)
    return (json_field_cases(rng) + raw_body_cases(rng) + method_cases(rng) + raw_protocol_cases(rng)
            + slow_cases(8, 8) + leave_cases(rng, 40) + ws_cases(rng, 360)
            + (schema_cases(MODEL, schema) if schema is not None else []))

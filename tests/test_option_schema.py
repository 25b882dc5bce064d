"""Every option of every family, and every shared numeric field, is refused at its extremes by every front
end, with a sentence naming the field: the schema each family declares (models/<family>/options.py,
`Family.options`) is enumerated, so an option added there is thrown at here without a new test.

Each demo model (the registry's demos: demo, demo-dia, demo-higgs, demo-speechlm, demo-cosyvoice) runs
on the real cpu engine behind the HTTP app in-process (FastAPI's TestClient) and behind the Python API
on the same session; nothing is queued for a refused request, so no audio is made."""

from __future__ import annotations

import pytest

pytest.importorskip("fastapi", reason="the serve extra is not installed (pip install 'voxcli[serve]')")
pytest.importorskip("httpx", reason="httpx is not installed (the test extra)")

from fastapi.testclient import TestClient  # noqa: E402
from support.option_cases import NUMBER_CASES, WHOLE_ONLY, option_cases, parse  # noqa: E402
from voxcli.models.base import InputError  # noqa: E402
from voxcli.models.options import REQUEST_FIELDS, OptionSchema, OptionSpec, validate_options  # noqa: E402
from voxcli.models.registry import families  # noqa: E402

from voxcli.request_fields import RequestFieldError  # noqa: E402

DEMOS = [(f.demos[0].name, f) for f in families() if f.demos]
# the shared fields an HTTP speech body carries (voxcli/server/routes.py SpeechBody)
HTTP_FIELDS = ("temperature", "top_k", "top_p", "seed", "max_frames", "cfg_scale", "fixed_frames")


def test_every_family_with_options_declares_them_once():
    """The registry lists what the program checks: the same schema object, every option documented."""
    names = {name for name, _ in DEMOS}
    assert names >= {"demo", "demo-dia", "demo-higgs", "demo-speechlm", "demo-cosyvoice"}
    for f in families():
        assert isinstance(f.options, OptionSchema)
        for spec in f.options:
            assert spec.help and spec.describe().startswith(spec.name)
            if spec.kind in ("number", "whole"):
                assert spec.range is not None and spec.range.hi < 1e300


@pytest.mark.parametrize("value", [10 ** 12, float("nan"), float("inf"), True, "abc", 2.5, -1])
def test_max_segments_is_bounded_by_the_schema(value):
    """The option that hung the server (1e12 segments planned one by one on the engine thread)."""
    from voxcli.models.registry import find_family

    schema = find_family("speechlm").options  # type: ignore[union-attr]
    with pytest.raises(InputError, match="options.max_segments must be a whole number from 1 to 64"):
        validate_options(schema, {"max_segments": value})


def test_a_bool_is_never_a_number_and_a_float_never_whole():
    schema = OptionSchema((OptionSpec("k", "whole", "k.", range=REQUEST_FIELDS.get("top_k").range),  # type: ignore[union-attr]
                           OptionSpec("t", "number", "t.", range=REQUEST_FIELDS.get("temperature").range)))  # type: ignore[union-attr]
    for options in ({"k": True}, {"k": 1.0}, {"t": False}, {"t": "0.5"}):
        with pytest.raises(InputError, match=r"options\.[kt] must be"):
            validate_options(schema, options)
    assert validate_options(schema, {"k": 3, "t": 0.5}) == {"k": 3, "t": 0.5}


@pytest.fixture(scope="module", params=DEMOS, ids=[name for name, _ in DEMOS])
def served(request, tmp_path_factory, demo_store):
    """(demo name, its family, an in-process HTTP client, a Python API handle) over one cpu session."""
    import os

    from voxcli.api import TTS
    from voxcli.server.app import create_app
    from voxcli.server.service import SpeechService
    from voxcli.session import EngineOptions, open_session

    name, family = request.param
    old = os.environ.get("VOX_CACHE")
    cache = demo_store.cache(tmp_path_factory.getbasetemp() / "option_schema_cache", name)
    os.environ["VOX_CACHE"] = str(cache)
    session = open_session(EngineOptions(model=name, executor="cpu", device="cpu"))
    try:
        client = TestClient(create_app(SpeechService(session), close_on_shutdown=False))
        yield name, family, client, TTS(session)
    finally:
        session.close()
        if old is None:
            os.environ.pop("VOX_CACHE", None)
        else:
            os.environ["VOX_CACHE"] = old


def _post(client: TestClient, model: str, extra: str) -> tuple[int, str]:
    body = '{"model": "' + model + '", "input": "w1 w2.", "response_format": "pcm", ' + extra + "}"
    r = client.post("/v1/audio/speech", content=body, headers={"content-type": "application/json"})
    return r.status_code, r.text


def test_http_refuses_every_options_extreme_naming_the_option(served):
    name, family, client, _ = served
    failures = []
    cases = option_cases(family.options)
    for option, text, case in cases:
        status, reply = _post(client, name, f'"options": {{"{option}": {text}}}')
        if status != 400 or option not in reply:
            failures.append(f"options.{option}={text} ({case}): {status} {reply[:200]}")
    assert not failures, f"{len(failures)} of {len(cases)} cases not refused naming the option:\n" + \
        "\n".join(failures)


def test_http_refuses_every_shared_fields_extreme_naming_the_field(served):
    name, _, client, _ = served
    failures, tried = [], 0
    for field in HTTP_FIELDS:
        spec = REQUEST_FIELDS.get(field)
        assert spec is not None and spec.range is not None
        cases = NUMBER_CASES + (WHOLE_ONLY if spec.kind == "whole" else ())
        for text, case in cases:
            if case == "tiny" and spec.range.lo <= 1e-300:
                continue  # in range for this field
            tried += 1
            status, reply = _post(client, name, f'"{field}": {text}')
            # 400 whichever refused it (the body's declared types, or the schema), naming the field
            if status != 400 or field not in reply:
                failures.append(f"{field}={text} ({case}): {status} {reply[:200]}")
    assert not failures, f"{len(failures)} of {tried} cases not refused naming the field:\n" + \
        "\n".join(failures)


def test_python_api_refuses_every_options_extreme_naming_the_option(served):
    _, family, _, tts = served
    failures = []
    cases = option_cases(family.options)
    for option, text, case in cases:
        try:
            tts.say("w1 w2.", options={option: parse(text)})
        except (InputError, RequestFieldError) as e:
            if option not in str(e):
                failures.append(f"{option}={text} ({case}): {e}")
        else:
            failures.append(f"{option}={text} ({case}): accepted")
    assert not failures, "\n".join(failures)


def test_websocket_start_refuses_every_options_extreme_naming_the_option(served):
    """The live route's `start` goes through the same check: an error message naming the option."""
    import json

    _, family, client, _ = served
    failures = []
    cases = option_cases(family.options)
    for option, text, case in cases:
        with client.websocket_connect("/v1/audio/speech/live") as ws:
            ws.send_text('{"type": "start", "options": {"' + option + '": ' + text + "}}")
            reply = json.loads(ws.receive_text())
        if reply.get("type") != "error" or reply.get("code") != 400 or option not in reply.get("message", ""):
            failures.append(f"{option}={text} ({case}): {reply}")
    assert not failures, f"{len(failures)} of {len(cases)} cases:\n" + "\n".join(failures)


def test_python_api_lists_the_options_from_the_schema(served):
    _, family, _, tts = served
    assert tts.options() == family.options.describe()

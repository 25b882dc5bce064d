"""Family options and validation in one place: Qwen3-TTS reads its own keys from
`SynthesisRequest.options` (unknown keys and wrong types refused), refuses guidance, and its cheap
`check` (run by the CLI before synthesis) refuses what `prepare` would, with the same sentences."""

from __future__ import annotations

import pytest
from voxcli.models.base import (
    InputError,
    ModelSpec,
    SamplingParams,
    SynthesisRequest,
    check_voice_and_language,
)
from voxcli.models.qwen3_tts.program import Qwen3TTSProgram

from voxcli.errors import VoxError
from voxcli.text import parse_batch_lines


@pytest.fixture(scope="module")
def cv(tiny_custom_voice) -> Qwen3TTSProgram:
    return Qwen3TTSProgram.load(str(tiny_custom_voice))


def refused(program, words: str, **kw) -> None:
    req = SynthesisRequest(text="hello there", **kw)
    for step in (program.check, program.prepare):
        with pytest.raises(InputError, match=words):
            step(req)


def test_unknown_option_names_the_key_and_the_accepted_ones(cv):
    refused(cv, r"no option 'sub_topk'.*sub_greedy, sub_temperature, sub_top_k, sub_top_p, streaming_text",
            options={"sub_topk": 3})


@pytest.mark.parametrize("options, words", [
    ({"sub_top_k": True}, "options.sub_top_k must be a whole number from 0 to 2147483647, got true"),
    ({"sub_top_k": 2.5}, "sub_top_k must be a whole number"),
    ({"sub_temperature": "hot"}, "sub_temperature must be a finite number"),
    ({"streaming_text": 1}, "streaming_text must be true or false"),
    ({"sub_temperature": 0.0}, "sub_temperature must be a finite number from 0.001 to 1000"),
    ({"sub_top_p": 1.5}, "sub_top_p must be a finite number above 0 and at most 1"),
    ({"sub_top_k": -1}, "sub_top_k must be a whole number from 0 to 2147483647"),
    ({"sub_top_k": 10 ** 30}, "sub_top_k must be a whole number from 0 to 2147483647"),
    ({"sub_temperature": 1e-300}, "sub_temperature must be a finite number from 0.001 to 1000"),
])
def test_option_values_are_checked(cv, options, words):
    refused(cv, words, options=options)


def test_options_reach_the_sampler_and_the_text_mode(cv):
    p = cv.prepare(SynthesisRequest(text="hello there", options={"sub_top_k": 7, "sub_temperature": 0.5,
                                                                  "sub_greedy": False}))
    s = p.data.sampling
    assert (s.sub_top_k, s.sub_temperature, s.sub_greedy) == (7, 0.5, False)
    req = SynthesisRequest(text="hello there", sampling=SamplingParams(greedy=True))
    greedy = cv.prepare(req).data.sampling
    assert greedy.greedy and greedy.sub_greedy  # greedy means the deterministic path throughout
    streamed = cv.prepare(SynthesisRequest(text="hello there", options={"streaming_text": True}))
    whole = cv.prepare(SynthesisRequest(text="hello there", options={"streaming_text": False}))
    assert streamed.length < whole.length  # streaming text: the prompt holds only the first token


def test_top_k_zero_means_off_everywhere(cv):
    from voxcli.request_fields import sampling_params

    assert cv.prepare(SynthesisRequest(text="hi", sampling=SamplingParams(top_k=0))).data.sampling.top_k == 0
    refused(cv, "top_k must be a whole number from 0 to", sampling=SamplingParams(top_k=-1))
    assert sampling_params(False, None, 0, None, None).top_k == 0
    with pytest.raises(VoxError, match="--top-k must be >= 0"):
        sampling_params(False, None, -1, None, None, prefix="--")
    with pytest.raises(VoxError, match="^top_k must be >= 0"):  # the Python API's spelling
        sampling_params(top_k=-1)


def test_qwen_refuses_guidance(cv):
    refused(cv, "no classifier-free guidance", cfg_scale=3.0)
    cv.check(SynthesisRequest(text="hi", cfg_scale=1.0))
    assert cv.prepare(SynthesisRequest(text="hi", cfg_scale=1.0)).width == 1


def test_check_names_the_model_and_the_choices(cv):
    refused(cv, r"model tiny-custom-voice has no voice 'nobody'; choose one of .*serena", voice="nobody")
    refused(cv, "does not speak language 'klingon'; choose one of auto", language="klingon")


def test_neutral_check_for_families_without_their_own():
    spec = ModelSpec(name="m", sample_rate=24000, frame_rate=12.5, samples_per_frame=1920, codebooks=16,
                     chunk=None, max_context=64, voices=("Alice",), languages=("english",))  # type: ignore
    check_voice_and_language(spec, SynthesisRequest(text="x", voice="alice", language="AUTO"))
    with pytest.raises(InputError, match="no voice 'zed'; choose one of Alice"):
        check_voice_and_language(spec, SynthesisRequest(text="x", voice="zed"))
    with pytest.raises(InputError, match="choose one of auto, english"):
        check_voice_and_language(spec, SynthesisRequest(text="x", language="fr"))


def test_jsonl_options_reach_the_item_and_its_fingerprint():
    a, b, bad = parse_batch_lines(['{"text": "hi", "options": {"sub_top_k": 3}}', '{"text": "hi"}',
                                   '{"text": "hi", "options": [1]}'], "in.jsonl")
    assert a.options == {"sub_top_k": 3} and b.options is None and a.error is None
    assert a.fingerprint() != b.fingerprint()
    assert "options must be an object" in bad.error

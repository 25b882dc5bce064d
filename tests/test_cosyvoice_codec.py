"""CosyVoice 3 without the oracle: the codec stage's slot rules (engine chunking, interleaving, slot reuse,
batching), the block-cache claim, the loader's errors, voices and the English frontend rules."""

from __future__ import annotations

import shutil

import numpy as np
import pytest
import torch
from voxcli.models.base import CheckpointError, CodecItem, InputError, SamplingParams, SynthesisRequest


@pytest.fixture(scope="module")
def ckpt(cosyvoice_ckpt):  # conftest.py: two speakers
    return cosyvoice_ckpt


@pytest.fixture(scope="module")
def program(ckpt):
    from voxcli.models import load_model

    return load_model(str(ckpt))


def toks(n: int, seed: int) -> np.ndarray:
    return np.random.RandomState(seed).randint(0, 6561, (n, 1)).astype(np.int64)


def decode(program, slot: int, tokens: np.ndarray, cuts: list[int]) -> np.ndarray:
    parts, a = [], 0
    for i, b in enumerate(cuts + [len(tokens)]):
        if b <= a and b != len(tokens):
            continue
        parts.append(
            program.codec([CodecItem(slot=slot, codes=tokens[a:b], first=i == 0, last=b == len(tokens))])[0]
        )
        a = b
    return np.concatenate(parts)


def bind(program, slot: int, voice: str | None = None, mode: str = "stream") -> None:
    program.bind_slot(
        slot, program.prepare(SynthesisRequest(text="hi.", voice=voice, options={"codec_mode": mode}))
    )


def test_engine_chunking_does_not_change_the_audio(program):
    program.init_codec_slots(2)
    t = toks(100, 1)
    outs = []
    for cuts in ([], [28, 78], list(range(3, 100, 9))):
        bind(program, 0)
        outs.append(decode(program, 0, t, cuts))
    assert all(o.shape == outs[0].shape for o in outs) and outs[0].shape[0] == 100 * 960
    for o in outs[1:]:
        assert np.abs(o - outs[0]).max() <= 1e-6


@pytest.mark.parametrize("dtype,tol", [("float64", 1e-9), ("float32", 1e-4)])
def test_cached_block_hops_equal_a_rerun_over_the_history(ckpt, dtype, tol):
    """The hop's DiT over its new frames only (keys/values of earlier blocks from the slot) equals what
    upstream computes: the block-causal flow re-run over the whole history. Exact in float64; in float32
    the random DiT amplifies reduction-order noise over its 10 Euler steps (the mel is O(1))."""
    from voxcli.models import load_model

    program = load_model(str(ckpt), dtype=dtype)
    cs = program.codec_stage
    spk = program.speakers["tiny_speaker"].voice
    flow = cs.flow
    t = torch.from_numpy(toks(91, 2)[:, 0])
    run = flow.new_run(spk.prompt_tokens, spk.prompt_feat, spk.embedding)
    flow.init_caches(run)
    pieces = []
    for end in (35, 85):  # prompt 15 + pad 10: hops of 35 and 50 tokens (block-aligned), + 3 look-ahead
        mu = flow.mu(run, t[: end + 3], finalize=False)
        pieces.append(flow.solve([run], [mu], [run.frames], streaming=True, keep=True)[0])
    cached = torch.cat(pieces)
    fresh = flow.new_run(spk.prompt_tokens, spk.prompt_feat, spk.embedding)
    mu = flow.mu(fresh, t[: 85 + 3], finalize=False)
    rerun = flow.solve([fresh], [mu], [0], streaming=True, keep=False)[0]
    assert cached.shape == rerun.shape == (2 * (15 + 85), 80)
    assert (cached - rerun).abs().max().item() <= tol
    full = flow.solve([fresh], [mu], [0], streaming=False, keep=False)[0]
    assert (full - rerun).abs().max().item() > 1e-5  # the two attentions really differ


def test_stream_hop_ends_follow_upstreams_schedule(program):
    """What `python -m benchmarks bench_cosyvoice_codec` feeds: 25 tokens + the prompt's pad, then 50, then
    100 each, every hop waiting for the flow's 3 look-ahead tokens (prompt 15: pad 10, as above)."""
    hops = program.codec_stage.stream_hop_ends
    assert hops(15, 91) == [35, 85]
    assert hops(15, 87) == [35]  # 85 + 3 look-ahead > 87
    assert hops(25, 400) == [25, 75, 175, 275, 375]  # no pad; hops capped at 100
    assert hops(15, 30) == []


def test_interleaved_requests_and_reused_slots_give_the_same_audio(program):
    program.init_codec_slots(4)
    a, b = toks(100, 3), toks(70, 4)
    bind(program, 0)
    alone_a = decode(program, 0, a, [28, 78])
    bind(program, 1, "second")
    alone_b = decode(program, 1, b, [28, 78])
    # interleaved in shared calls, chunk boundaries differing, then slot 0 reused for b's voice
    bind(program, 2)
    bind(program, 3, "second")
    got = {2: [], 3: []}
    plan = [((2, 0, 30), (3, 0, 20)), ((2, 30, 80), (3, 20, 70)), ((2, 80, 100),)]
    for step in plan:
        items = [
            CodecItem(
                slot=s, codes=(a if s == 2 else b)[x:y], first=x == 0, last=y == (100 if s == 2 else 70)
            )
            for s, x, y in step
        ]
        for (s, *_), pcm in zip(step, program.codec(items), strict=True):
            got[s].append(pcm)
    assert np.abs(np.concatenate(got[2]) - alone_a).max() <= 1e-4
    assert np.abs(np.concatenate(got[3]) - alone_b).max() <= 1e-4
    bind(program, 0, "second")
    again = decode(program, 0, b, [50])
    assert np.abs(again - alone_b).max() <= 1e-4


def test_batching_alone_vs_among_seven_others(program):
    program.init_codec_slots(8)
    target = toks(95, 10)
    bind(program, 0)
    alone = decode(program, 0, target, [28, 78])
    others = [toks(30 + 9 * i, 20 + i) for i in range(7)]
    for s in range(8):
        bind(program, s, "second" if s % 2 else None, "offline" if s == 5 else "stream")
    streams = [target] + others
    outs = {s: [] for s in range(8)}
    cuts = [(0, 28), (28, 78), (78, 10_000)]
    for x, y in cuts:
        items = []
        for s, t in enumerate(streams):
            if x >= len(t):
                continue
            items.append(
                CodecItem(slot=s, codes=t[x : min(y, len(t))], first=x == 0, last=min(y, len(t)) == len(t))
            )
        for it, pcm in zip(items, program.codec(items), strict=True):
            outs[it.slot].append(pcm)
    batched = np.concatenate(outs[0])
    assert batched.shape == alone.shape
    assert np.abs(batched - alone).max() <= 1e-4


def test_loader_names_missing_files_keys_and_shapes(ckpt, tmp_path):
    from voxcli.models import load_model

    bad = tmp_path / "bad"
    shutil.copytree(ckpt, bad)
    (bad / "flow.pt").unlink()
    with pytest.raises(CheckpointError, match="flow.pt is missing"):
        load_model(str(bad))
    shutil.copy(ckpt / "flow.pt", bad / "flow.pt")
    sd = torch.load(bad / "llm.pt", weights_only=True)
    sd["llm_decoder.weight"] = sd["llm_decoder.weight"][:-1]
    torch.save(sd, bad / "llm.pt")
    with pytest.raises(
        CheckpointError, match=r"llm_decoder.weight.*shape.*llm.pt|llm.pt.*llm_decoder.weight"
    ):
        load_model(str(bad))
    del sd["llm_decoder.weight"]
    torch.save(sd, bad / "llm.pt")
    with pytest.raises(CheckpointError, match="llm_decoder.weight.*missing"):
        load_model(str(bad))


def test_voices_default_named_and_missing(ckpt, program, tmp_path):
    from voxcli.models import load_model

    assert program.spec.voices == ("tiny_speaker", "second")
    g = SamplingParams(greedy=True)
    default = program.prepare(SynthesisRequest(text="Hello world.", sampling=g))
    first = program.prepare(SynthesisRequest(text="Hello world.", voice="TINY_SPEAKER", sampling=g))
    other = program.prepare(SynthesisRequest(text="Hello world.", voice="second", sampling=g))
    assert torch.equal(default.data.embeds, first.data.embeds) and default.length != other.length
    with pytest.raises(InputError, match="no voice 'nobody'.*tiny_speaker, second"):
        program.check(SynthesisRequest(text="x", voice="nobody"))
    bare = tmp_path / "bare"
    shutil.copytree(ckpt, bare)
    (bare / "spk2info.pt").unlink()
    with pytest.raises(InputError, match="no saved zero-shot speaker.*--ref-audio"):
        load_model(str(bare)).check(SynthesisRequest(text="Hello."))


def test_request_checks_are_one_sentence(program):
    for req, msg in [
        (SynthesisRequest(text="  "), "empty"),
        (SynthesisRequest(text="a", options={"codec_mode": "fast"}), "codec_mode must be one of stream"),
        (SynthesisRequest(text="a", options={"speed": 2}), "no option 'speed'; its options are codec_mode"),
        (SynthesisRequest(text="a", cfg_scale=2.0), "classifier-free guidance"),
        (SynthesisRequest(text="a", language="german"), "english"),
        (SynthesisRequest(text="a", sampling=SamplingParams(temperature=0.5)), "ras_sampling"),
        (SynthesisRequest(text="你好"), "English only"),
    ]:
        with pytest.raises(InputError, match=msg):
            program.prepare(req)


def test_frontend_rules():
    from voxcli.models.flowlm.frontend import number_to_words, spell_out_numbers, split_paragraph

    assert number_to_words("2024") == "two thousand and twenty-four"
    assert number_to_words("1100") == "one thousand, one hundred"
    assert number_to_words("007") == "seven"
    assert spell_out_numbers("I have 3 cats") == "I have three cats"
    words = lambda s: len(s.split())  # noqa: E731
    assert split_paragraph("Hello there", words) == ["Hello there."]
    long = " ".join(f"Sentence number {w} is here." for w in ["one"] * 30)
    pieces = split_paragraph(long, words)
    assert len(pieces) > 1 and "".join(pieces) == long

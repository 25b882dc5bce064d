"""Dia's host-side pieces without the oracle: the delay tracker (drain, prompt forcing, frame timing),
the EOS delay processor, request validation, and sampled decoding (seeded, batch-independent)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from support.dia_driver import run_alone
from voxcli.models.base import InputError, Row, SamplingParams, SynthesisRequest
from voxcli.models.dia.delay import DelayTracker, delayed_prefix
from voxcli.models.dia.sampling import RowSampling, eos_channel_filter, eos_delay_force, process

BOS, EOS, PAD = 1026, 1024, 1025
DELAY = (0, 2, 3)


def test_delayed_prefix_matches_the_processor_layout():
    codes = np.array([[10, 11, 12], [20, 21, 22]])
    m = delayed_prefix(codes, DELAY, BOS, PAD)
    # channel c: BOS up to position delay[c], then the prompt shifted by delay[c], then PAD (free)
    assert m[:, 0].tolist() == [BOS, 10, 20, PAD, PAD, PAD]
    assert m[:, 1].tolist() == [BOS, BOS, BOS, 11, 21, PAD]
    assert m[:, 2].tolist() == [BOS, BOS, BOS, BOS, 12, 22]


def test_tracker_emits_aligned_frames_and_drains_after_eos():
    t = DelayTracker(None, DELAY, BOS, EOS, PAD, max_frames=100)
    got, done_at = [], None
    for p in range(1, 12):
        ch0 = EOS if p == 5 else 100 + p
        ch1 = EOS if p == 5 + 2 else 200 + p
        ch2 = EOS if p == 5 + 3 else 300 + p
        frames, done = t.record(np.array([ch0, ch1, ch2]))
        got += [(p, f.tolist()) for f in frames]
        if done:
            done_at = p
            break
    # EOS at position 5 -> frames 1..4 (4 frames); frame j needs channel c at 1 + j + delay[c]
    assert [f for _, f in got] == [[101 + j, 201 + j + 2, 301 + j + 3] for j in range(4)]
    assert [p for p, _ in got] == [4, 5, 6, 7]  # one per step after the first 1 + max(delay) steps
    assert done_at == 7  # s + max(delay) - 1: the last frame's slowest channel
    assert t.tokens[6][0] == PAD  # a channel that emitted EOS carries PAD afterwards


def test_tracker_forces_the_prompt_region():
    codes = np.array([[10, 11, 12]])
    t = DelayTracker(codes, DELAY, BOS, EOS, PAD, max_frames=3)
    assert t.first == 2 and t.position == 2
    t.record(np.array([1, 2, 3]))  # position 2: channels 1 and 2 still replay the prompt / BOS
    assert t.tokens[2].tolist() == [1, BOS, BOS]
    t.record(np.array([4, 5, 6]))
    assert t.tokens[3].tolist() == [4, 11, BOS]


def test_eos_delay_force_counts_down_per_channel():
    V = 1028
    scores = torch.zeros(1, 3, V)
    scores[0, 0, EOS] = 5.0  # channel 0 prefers EOS
    active = torch.tensor([False])
    countdown = torch.tensor([list(DELAY)])
    forced_at = {}
    for step in range(5):
        s, active, countdown = eos_delay_force(scores.clone(), EOS, active, countdown, torch.tensor([False]))
        for c in range(3):
            if torch.isinf(s[0, c, :EOS]).all() and s[0, c, EOS] == 0:
                forced_at.setdefault(c, step)
        scores[0, 0, EOS] = -5.0  # later steps: no new EOS wish
    assert forced_at == {0: 0, 1: 2, 2: 3}


def test_channel_filter_only_channel0_may_end():
    s = torch.zeros(1, 2, 1028)
    s[0, 0, EOS] = 3.0
    s[0, 1, EOS] = 3.0
    out = eos_channel_filter(s, EOS)
    assert torch.isinf(out[0, 0, :EOS]).all() and out[0, 0, EOS] == 3.0  # EOS best -> only EOS
    assert torch.isinf(out[0, 1, EOS:]).all() and not torch.isinf(out[0, 1, :EOS]).any()


def test_cfg_top_k_keeps_conditional_logits():
    torch.manual_seed(0)
    cond, unc = torch.randn(1, 9, 1028), torch.randn(1, 9, 1028)
    rs = RowSampling(greedy=True, temperature=1.0, top_k=5, top_p=1.0, guidance=3.0)
    z = torch.zeros(1, dtype=torch.bool)
    out, _, _ = process(cond, unc, [rs], EOS, z, torch.tensor([[0] + [8] * 8]), z, z)
    combined = cond + 3.0 * (cond - unc)
    keep = combined[0, 3].topk(5).indices
    row = out[0, 3]
    assert torch.equal(torch.isfinite(row).nonzero()[:, 0].sort().values, keep.sort().values)
    assert torch.equal(row[keep], cond[0, 3, keep])


@pytest.fixture(scope="module")
def program(tmp_path_factory):
    from voxcli.models import load_model
    from voxcli.models.dia.tiny import build_tiny

    return load_model(str(build_tiny(tmp_path_factory.mktemp("dia_units") / "ckpt", codec=False)))


@pytest.mark.parametrize(
    "kw,needle",
    [
        (dict(cfg_scale=0.5), "cfg_scale"),
        (dict(voice="Ryan"), "voice"),
        (dict(language="german"), "language"),
        (dict(instructions="calm"), "instructions"),
        (dict(options={"sub_top_k": 3}), "options"),
        (dict(ref_text="hi"), "--ref-audio"),
        (dict(sampling=SamplingParams(temperature=0)), "temperature"),
        (dict(sampling=SamplingParams(repetition_penalty=1.2)), "repetition"),
        (dict(text="x" * 200), "at most"),
    ],
)
def test_user_mistakes_are_one_sentence(program, kw, needle):
    req = SynthesisRequest(**{"text": "[S1] hi", **kw})
    with pytest.raises(InputError) as e:
        program.prepare(req)
    assert needle in str(e.value)


def test_sampled_decoding_is_seeded_and_batch_independent(program):
    req = SynthesisRequest(
        text="[S1] Sampled speech. [S2] Yes.", seed=7, max_frames=20
    )  # checkpoint defaults
    prompt = program.prepare(req)
    assert prompt.width == 2 and not prompt.data.sampling.greedy  # CFG 3 and sampling from the config
    a = run_alone(program, prompt, page_size=8)
    b = run_alone(program, program.prepare(req), page_size=8)
    assert a.shape == (20, 9) and np.array_equal(a, b) and a.max() < 1024
    # the same request in a batch with another one gives the same codes
    other = program.prepare(SynthesisRequest(text="[S2] Another one.", seed=1, cfg_scale=1.0, max_frames=25))
    program.init_kv(1, 8)
    need = [-(-program.kv_tokens(p) // 8) for p in (prompt, other)]
    program.init_kv(sum(need), 8)
    r0 = Row(0, program.prepare(req), list(range(need[0])))
    r1 = Row(1, other, list(range(need[0], sum(need))))
    outs, frames = program.prefill([r0, r1]), []
    while not outs[0].done:
        if outs[0].frame is not None:
            frames.append(outs[0].frame)
        outs = program.decode([r0, r1])
    frames.append(outs[0].frame)
    assert np.array_equal(np.stack(frames), a)

"""The SpeechLM phase machine and loader paths the parity runs do not reach: detected modalities (one
without an IO ends the request), the companion's all-pad prefix at a CFG segment's start, the
de-interleaved frame and the end rules, tied embeddings, options."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from voxcli.models.base import InputError, SynthesisRequest
from voxcli.models.speechlm.config import (
    ASSISTANT,
    AUDIO,
    EOS,
    EOT,
    TEXT,
    InferenceConfig,
    Layout,
    SegmentRules,
)
from voxcli.models.speechlm.phases import DETECT, SAMPLE, Phase

S = 3
LAYOUT = Layout(intervals={"special_token": [(0, 256)], "text": [(256, 266)],
                           "discrete_audio": [(266, 271), (271, 276), (276, 281)]},
                vocab_size=281, num_stream=S, text_start=256, text_end=266, audio_io="discrete_audio",
                ssl_streams=0)
TEXT_R = SegmentRules(temperature=0.0, topk=5, cfg=1.0, max_step=4, min_step=1)
AUDIO_R = SegmentRules(temperature=0.0, topk=5, cfg=3.0, max_step=6, min_step=2)


def _phase(enforce=(), width=2, max_segments=3) -> Phase:
    inf = InferenceConfig(rules={"text": TEXT_R, "audio": AUDIO_R}, enforce_modality=tuple(enforce))
    return Phase(inference=inf, layout=LAYOUT, width=width, audio_rules=AUDIO_R, text_rules=TEXT_R,
                 gen=torch.Generator(), max_segments=max_segments)


def _tok(t0: int, rest: tuple[int, ...] = (0, 0)) -> np.ndarray:
    return np.array([t0, *rest], dtype=np.int64)


def test_detected_modality_then_the_companion_restarts_as_pads():
    ph = _phase()
    prompt = np.zeros((5, S), dtype=np.int64)
    p = ph.first_pass(prompt)
    assert p.action == DETECT and p.cond.shape == (6, S) and p.cond[-1, 0] == ASSISTANT and p.uncond is None
    ph.fed(p)
    p = ph.detected(AUDIO)  # audio has cfg 3: the companion starts now, pads as long as the cond context
    assert p.action == SAMPLE and p.uncond_restart and ph.cfg_on
    assert p.cond.tolist() == [[AUDIO, 0, 0]]
    assert p.uncond.shape == (7, S) and not p.uncond[:6].any() and p.uncond[6].tolist() == [AUDIO, 0, 0]
    ph.fed(p)
    assert ph.cond_len == 7 and ph.uncond_len == 7


def test_a_modality_without_an_io_ends_the_request():
    ph = _phase()
    ph.fed(ph.first_pass(np.zeros((2, S), dtype=np.int64)))
    assert ph.detected(9) is None and ph.done and "'image'" in ph.end_reason  # <|image|>


def test_interleaved_audio_yields_the_diagonal_and_eot_starts_another_segment():
    ph = _phase(enforce=("audio", "text"))
    p = ph.first_pass(np.zeros((2, S), dtype=np.int64))
    assert p.action == SAMPLE and p.cond[-2:, 0].tolist() == [ASSISTANT, AUDIO]  # forced: rides along
    ph.fed(p)
    frames = []
    seq = [_tok(267, (0, 0)), _tok(268, (272, 0)), _tok(269, (273, 277)), _tok(270, (274, 278))]
    for t in seq:
        f = ph.sampled(t)
        frames.append(None if f is None else f.tolist())
        ph.fed(ph.pending)
    assert frames == [None, None, [267, 272, 277], [268, 273, 278]]  # frame j: stream n of position j + n
    f = ph.sampled(_tok(EOT, (275, 279)))  # eot on stream 0 ends the segment; nothing past the diagonal
    assert f is None and not ph.done and ph.segment == 1
    p = ph.pending
    assert p.cond[:, 0].tolist() == [EOT, ASSISTANT, TEXT] and not p.cond[0, 1:].any()  # streams >= 1 zeroed
    assert p.uncond is None and ph.modality == "text"  # text has cfg 1: the companion idles
    ph.fed(p)
    ph.sampled(_tok(260))
    ph.fed(ph.pending)
    ph.sampled(_tok(EOS))
    assert ph.done and ph.end_reason == "eos" and ph.texts == [[260]]


def test_max_step_ends_a_segment_and_max_segments_stops_the_loop():
    ph = _phase(enforce=(), width=1, max_segments=1)
    ph.fed(ph.first_pass(np.zeros((2, S), dtype=np.int64)))
    ph.fed(ph.detected(TEXT))
    for i in range(TEXT_R.max_step - 1):
        ph.sampled(_tok(256 + i))
        assert not ph.done
        ph.fed(ph.pending)
    ph.sampled(_tok(EOT))  # the 4th token, max_step: and it is an eot, but no segment is left
    assert ph.done and ph.end_reason == "max_segments"


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory):
    from voxcli.models.speechlm.tiny import build_tiny

    return build_tiny(tmp_path_factory.mktemp("speechlm_units") / "ckpt")


def test_tied_embeddings_load_without_an_lm_head(ckpt, tmp_path):
    import shutil

    import yaml
    from voxcli.models import load_model

    tied = tmp_path / "tied"
    shutil.copytree(ckpt, tied)
    sd = torch.load(tied / "model.pt", weights_only=True)["module"]
    del sd["lm_head.weight"]
    torch.save({"module": sd}, tied / "model.pt")
    train = yaml.safe_load((tied / "train_tiny.yaml").read_text())
    train["model"]["model_conf"]["tie_word_embeddings"] = True
    (tied / "train_tiny.yaml").write_text(yaml.safe_dump(train, sort_keys=False))
    program = load_model(str(tied))
    assert torch.equal(program.lm.lm_head.weight, program.lm.model.embed_tokens.weight)


def test_text_phase_options_are_checked(ckpt):
    from voxcli.models import load_model

    program = load_model(str(ckpt))
    text, _ = program._rules(SynthesisRequest(text="w1", options={"text_temperature": 0.5, "text_top_k": 3}))
    assert text.temperature == 0.5 and text.topk == 3
    # the schema's sentences (models/speechlm/options.py); a greedy text phase is --greedy's
    for options, words in (({"text_top_k": 0}, "options.text_top_k must be a whole number from 1"),
                           ({"text_temperature": "hot"}, "options.text_temperature must be a finite number"),
                           ({"text_temperature": 0}, "options.text_temperature must be a finite number from "
                                                     "0.001"),
                           ({"max_segments": 10 ** 12}, "options.max_segments must be a whole number from 1 "
                                                        "to 64")):
        with pytest.raises(InputError, match=words):
            program.prepare(SynthesisRequest(text="w1", options=options))


def test_seq_positions_is_one_sum_per_enforced_segment_whatever_max_segments(ckpt):
    """The closed form equals the per-segment loop it replaced (which, with max_segments 10^12, held the
    engine thread for ever), for every max_segments the schema allows, with and without fixed_frames."""
    from voxcli.models import load_model
    from voxcli.models.speechlm.options import MAX_SEGMENTS

    program = load_model(str(ckpt))
    inf, N = program.cfg.inference, program.cfg.layout.audio_streams

    def looped(prompt):  # the loop before issue 34
        ph = prompt.data.phase
        total = prompt.length
        for n in range(ph.max_segments):
            if n < len(inf.enforce_modality):
                m = inf.enforce_modality[n]
                steps = ph.fixed_frames + N - 1 if m == "audio" and ph.fixed_frames is not None \
                    else ph.rules(m).max_step
            else:
                steps = max(ph.rules(m).max_step for m in inf.rules)
            total += steps + 3
        return total

    for fixed in (None, 5):
        for n in (1, 2, 3, 17, MAX_SEGMENTS):
            request = SynthesisRequest(text="w1", fixed_frames=fixed, options={"max_segments": n})
            prompt = program.prepare(request)
            assert program.seq_positions(prompt) == looped(prompt)

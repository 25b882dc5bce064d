"""One request's phase machine, as ESPnet's `ParallelLLM.inference` / `inference_segment` run it.

A request is a sequence of segments, each in one modality (text or audio):

    prefill   prompt, then <assistant>
    segment   modality: enforce_modality[n] when listed, else argmax of the <assistant> logits under the
              modality mask (stream 0 may pick audio/text/image/video/toolcall; streams >= 1 pad).
              Step 0 feeds the modality token; step k feeds token k-1 and samples token k under the
              modality's mask (stream s only its own vocabulary interval, unused streams pad 0); eos and
              eot on stream 0 are masked while k < min_step. With the modality's cfg w > 1 the companion
              (the unconditional sequence) restarts from position 0 as `pad` x (cond length) and then
              receives the same tokens; logits = cond * w + uncond * (1 - w), then the mask again.
    end       token[0] == eot (another segment follows), eos, or max_step tokens. Then the last token is
              fed with streams >= 1 zeroed, then <assistant> again. The request stops after a segment
              that does not end in eot once the enforced list is used up (the reference's rule).

What the program batches is one forward pass per engine call: `Pass` holds what each of a row's two
sequences feeds (several positions where the reference runs consecutive passes with nothing sampled in
between: the prompt and <assistant>; the last token, <assistant> and a forced modality token; the
companion's pad prefix and its first token) and what to do with the logits of the last position.

Audio segments are delay-interleaved: stream n of position p carries frame p - n. Frame j is complete
once position j + N - 1 is sampled (N audio streams), so the first frame costs N - 1 extra steps. At the
end the reference keeps positions 0..T-1 (T = the eos/eot position, or max_step) and de-interleaves them
to T - N + 1 frames: there is no drain, and the last N - 1 positions' streams past the diagonal are
dropped. Codes are clipped into each stream's interval without its pad slot (a pad decodes as code 0).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from .config import ASSISTANT, EOS, EOT, PAD, SPECIAL_ID, InferenceConfig, Layout, SegmentRules

DETECT, SAMPLE = "detect", "sample"


def special(token: int, streams: int) -> np.ndarray:
    row = np.zeros(streams, dtype=np.int64)
    row[0] = token
    return row


class Masks:
    """The reference's `prepare_inference` modality mask, True = forbidden, [S, V] bool (the per-modality
    masks become each stream's candidate ids in head.py)."""

    def __init__(self, layout: Layout, device: torch.device) -> None:
        S, V = layout.num_stream, layout.vocab_size
        mod = torch.ones(S, V, dtype=torch.bool)
        for name in ("audio", "text", "image", "video", "toolcall"):
            mod[0, SPECIAL_ID[name]] = False
        mod[1:, 0] = False
        self.modality = mod.to(device)


@dataclass
class Pass:
    cond: np.ndarray  # [n, S] tokens the conditional sequence feeds next
    uncond: np.ndarray | None  # [m, S] the companion's, or None (idle this pass)
    uncond_restart: bool  # the companion rewrites its sequence from position 0 (a new CFG segment)
    action: str  # DETECT (pick the modality) or SAMPLE (a token of the current segment)


@dataclass
class Phase:
    """A request's position in the phase machine. Owns no tensors except its sampler."""

    inference: InferenceConfig
    layout: Layout
    width: int  # 2: the request has a companion row for CFG
    audio_rules: SegmentRules | None  # this request's audio rules (cfg / sampling overrides applied)
    text_rules: SegmentRules | None
    gen: torch.Generator
    max_segments: int
    fixed_frames: int | None = None
    segment: int = 0
    modality: str | None = None
    step: int = 0
    cfg_on: bool = False
    done: bool = False
    end_reason: str = ""
    cond_len: int = 0
    uncond_len: int = 0
    audio: list[np.ndarray] = field(default_factory=list)  # interleaved positions of this audio segment
    text: list[int] = field(default_factory=list)
    texts: list[list[int]] = field(default_factory=list)  # finished text segments' token ids (global)
    text_steps: int = 0  # steps spent in text segments (what the TTFA estimate learns)
    pending: Pass | None = None

    @property
    def streams(self) -> int:
        return self.layout.num_stream

    def rules(self, modality: str) -> SegmentRules:
        r = self.audio_rules if modality == "audio" else self.text_rules
        assert r is not None
        return r

    def max_step(self) -> int:
        r = self.rules(self.modality or "text")
        if self.modality == "audio" and self.fixed_frames is not None:
            return self.fixed_frames + self.layout.audio_streams - 1
        return r.max_step

    # --- passes -------------------------------------------------------------------------------
    def first_pass(self, prompt: np.ndarray) -> Pass:
        return self._begin(np.concatenate([prompt, special(ASSISTANT, self.streams)[None]]))

    def _begin(self, prefix: np.ndarray) -> Pass:
        """The pass that starts segment `self.segment` after feeding `prefix` [n, S]."""
        enforce = self.inference.enforce_modality
        if self.segment < len(enforce):
            return self._start(enforce[self.segment], prefix)
        self.pending = Pass(cond=prefix, uncond=None, uncond_restart=False, action=DETECT)
        return self.pending

    def _start(self, modality: str, prefix: np.ndarray) -> Pass:
        self.modality, self.step = modality, 0
        self.audio, self.text = [], []
        tok = special(SPECIAL_ID[modality], self.streams)[None]
        cond = np.concatenate([prefix, tok]) if prefix.size else tok
        self.cfg_on = self.width == 2 and self.rules(modality).cfg > 1
        unc = None
        if self.cfg_on:  # the reference's _prepare_cfg_cache: pads as long as the cond cache, then the token
            pads = np.zeros((self.cond_len + cond.shape[0] - 1, self.streams), dtype=np.int64)
            unc = np.concatenate([pads, tok])
        self.pending = Pass(cond=cond, uncond=unc, uncond_restart=self.cfg_on, action=SAMPLE)
        return self.pending

    def fed(self, p: Pass) -> None:
        """The pass ran: the sequences are that much longer."""
        self.cond_len += p.cond.shape[0]
        if p.uncond is not None:
            self.uncond_len = (0 if p.uncond_restart else self.uncond_len) + p.uncond.shape[0]

    def detected(self, token: int) -> Pass | None:
        """The modality the <assistant> logits chose; None (request over) when it has no rules here."""
        name = SPECIALS_BY_ID.get(token)
        if name not in ("text", "audio") or name not in self.inference.rules:
            self.done = True
            self.end_reason = f"the model chose modality {name!r}, which this checkpoint cannot decode"
            return None
        return self._start(name, np.zeros((0, self.streams), dtype=np.int64))

    def sampled(self, tok: np.ndarray) -> np.ndarray | None:
        """Record the token [S] of this step; return the aligned audio frame it completes (global ids of
        the N audio streams), if any. Sets `pending` for the next pass or `done`."""
        k = self.step
        self.step += 1
        end = int(tok[0]) in (EOS, EOT)
        frame = None
        if self.modality == "text":
            self.text_steps += 1
            if not end:
                self.text.append(int(tok[0]))
        elif not end:
            self.audio.append(tok.copy())
            N = self.layout.audio_streams
            if len(self.audio) >= N:
                last = self.audio[-N:]
                frame = np.array([last[n][n] for n in range(N)], dtype=np.int64)
        if end or k + 1 >= self.max_step():
            self._finish(tok, int(tok[0]))
        else:
            self.pending = Pass(cond=tok[None].copy(), uncond=tok[None].copy() if self.cfg_on else None,
                                uncond_restart=False, action=SAMPLE)
        return frame

    def _finish(self, tok: np.ndarray, last: int) -> None:
        if self.modality == "text":
            self.texts.append(list(self.text))
        enforce = self.inference.enforce_modality
        if last != EOT and self.segment >= len(enforce) - 1:
            self.done, self.end_reason = True, "eos" if last == EOS else "max_step"
            return
        if self.segment + 1 >= self.max_segments:
            self.done, self.end_reason = True, "max_segments"
            return
        self.segment += 1
        lastrow = special(int(tok[0]), self.streams)  # the reference zeroes streams >= 1 of the last token
        self._begin(np.stack([lastrow, special(ASSISTANT, self.streams)]))


SPECIALS_BY_ID = {v: k for k, v in SPECIAL_ID.items()}
assert SPECIAL_ID["pad"] == PAD

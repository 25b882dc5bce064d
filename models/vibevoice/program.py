"""VibeVoice-1.5B (transformers `VibeVoiceForConditionalGeneration`) as a voxcli model program.

The codec sits inside the LM loop, so one decode step of a row is one whole `generate` iteration:

1. the LM reads the row's next input (a token's embedding, or the previous frame's acoustic + semantic
   embedding) at its next position on the paged KV pool;
2. with guidance g != 1, `generate`'s token guidance (UnbatchedClassifierFreeGuidanceLogitsProcessor): the
   LM again, on a second sequence of this row holding [last prompt token, generated token ids...], scores
   g * cond + (1 - g) * uncond (log-softmax constants cancel in the argmax) over the four tokens
   {audio_bos, audio_eos, diffusion token, eos};
3. at audio_bos the diffusion negative sequence (the row's third sequence) restarts empty; at the
   diffusion token the negative sequence reads this step's LM input at its next position, the diffusion
   head runs the DPM-Solver (`solver.py`) on the row's own noise with CFG between the two hidden states,
   the latent (divided by the scale, minus the bias) goes through the acoustic decoder's streaming convs
   (`codec.py`) to hop_length samples, the samples through the semantic encoder's, and the latent and
   semantic features make the next input. The samples ARE the frame's audio (no second decode).

Noise: a request owns a torch.Generator seeded with its seed and draws torch.randn(2, latent) per frame,
row 0 used: what the global CPU generator gives after set_seed(seed) when the request is alone in
`generate` (which draws nothing else), whatever the request's neighbours in a batch.

The engine sees each frame as its PCM carried bit-exact in the int64 code array (spec.py); `codec` only
unpacks it. Re-runnable stages (models/base.py): a step computes everything first, the rows' generators
restored if it raises, then commits every row in a loop that cannot raise; KV writes go to a sequence's
own pages at positions >= its length.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from ..base import (
    CodecItem,
    InputError,
    ModelProgram,
    Prompt,
    Row,
    StepOutput,
    SynthesisRequest,
)
from ..checkpoint import checkpoint_entries, fill_module
from ..device_memory import pool_zeros
from ..layers import PagedBatch
from ..locate import read_json, resolve
from ..sampling import request_generator
from .codec import Stream
from .config import GenerationDefaults, VibeVoiceConfig, parse_config
from .options import OPTIONS
from .prompt import TextTokenizer
from .solver import SolverPlan
from .spec import DEFAULT_VOICE, DTYPE_POLICY, model_spec
from .weights import SKIPPED, VibeVoiceWeights

DEFAULT_MAX_TOKENS = 1200  # 160 s at 7.5 Hz when generation_config.json names no length
POS, UNC, NEG = 0, 1, 2  # a row's sequences: the conditional LM, the token guidance's, the diffusion negative


@dataclass
class PreparedVibe:
    ids: list[int]
    seed: int | None
    guidance: float
    steps: int


@dataclass
class VibeState:
    gen: torch.Generator
    guidance: float
    plan: SolverPlan
    next_embed: torch.Tensor  # [H]: the positive sequence's next input
    last_token: int  # the token guidance sequence's next input
    unc_len: int
    neg_len: int  # the diffusion negative's length (0 again at each audio_bos)
    acoustic: Stream  # [1, C, pad] per conv
    semantic: Stream
    tokens: int
    limit: int
    fixed: bool


def pack_pcm(samples: np.ndarray) -> np.ndarray:
    """float32 samples -> int64 codes holding their bits (what the engine carries as a frame)."""
    return np.ascontiguousarray(samples, dtype=np.float32).view(np.int32).astype(np.int64)


def unpack_pcm(codes: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(codes, dtype=np.int64).astype(np.int32).view(np.float32)


class VibeVoiceProgram(ModelProgram):
    option_schema = OPTIONS  # models/vibevoice/options.py

    def __init__(self, root: Path, cfg: VibeVoiceConfig, gen: GenerationDefaults, weights: VibeVoiceWeights,
                 tok: TextTokenizer, device: torch.device, dtype: torch.dtype, name: str) -> None:
        self.root, self.cfg, self.gen, self.weights, self.tok = root, cfg, gen, weights, tok
        self.device, self.dtype = device, dtype
        self.spec = model_spec(read_json(root / "config.json"), name)
        self.k_pool: torch.Tensor | None = None
        self.v_pool: torch.Tensor | None = None
        self.page_size = 0
        self._plans: dict[int, SolverPlan] = {}
        self._choices = torch.tensor(sorted(cfg.choices), device=device)
        with torch.no_grad():
            self._rows4 = weights.choice_rows()[[list(cfg.choices).index(t) for t in sorted(cfg.choices)]]
        self.solver_plan(gen.num_diffusion_steps)  # a bad scheduler config fails the load

    @classmethod
    def load(cls, source: str, device: str = "cpu", dtype: str = "float32") -> VibeVoiceProgram:
        lm_dtype = DTYPE_POLICY.torch_dtype("lm", dtype)
        root = resolve(source)
        cfg = parse_config(read_json(root / "config.json"), str(root / "config.json"))
        gen = GenerationDefaults.read(root / "generation_config.json")
        tok = TextTokenizer(root)
        entries = checkpoint_entries(root)
        own_head = "lm_head.weight" in entries or not cfg.text.tie_word_embeddings
        with torch.device("meta"):
            weights = VibeVoiceWeights(cfg, own_head).to(lm_dtype)
        fill_module(weights, entries, root, device, lm_dtype, ignore_prefixes=SKIPPED)
        name = source if not Path(source).exists() else root.name
        return cls(root, cfg, gen, weights.eval(), tok, torch.device(device), lm_dtype, name)

    def solver_plan(self, steps: int) -> SolverPlan:
        if steps not in self._plans:
            self._plans[steps] = SolverPlan(dict(self.gen.scheduler), steps)
        return self._plans[steps]

    # --- host: requests --------------------------------------------------------------------------
    def check(self, request: SynthesisRequest) -> None:
        from ..base import check_numbers, check_voice_and_language

        check_numbers(request)
        check_voice_and_language(self.spec, request)
        self.options_of(request)
        if not request.text or not request.text.strip():
            raise InputError("the text is empty")
        if request.instructions:
            raise InputError("VibeVoice takes no instructions; pick a speaker with --voice 0..3")
        if request.ref_audio is not None or request.ref_text:
            raise InputError("VibeVoice voice samples are not supported yet; drop --ref-audio / --ref-text")
        if request.language not in (None, "auto"):
            raise InputError(f"VibeVoice picks the language from the text; leave language unset or auto, "
                             f"got {request.language!r}")
        s = request.sampling
        if s.temperature is not None or s.top_k is not None or s.top_p is not None \
                or s.repetition_penalty is not None:
            raise InputError("VibeVoice picks its tokens by argmax (its audio comes from the diffusion "
                             "head and --seed); leave temperature, top_k, top_p and repetition_penalty unset")
        if request.cfg_scale is not None and request.cfg_scale < 1:
            raise InputError(f"cfg_scale must be >= 1 for VibeVoice, got {request.cfg_scale}")

    def prepare(self, request: SynthesisRequest) -> Prompt:
        self.check(request)
        c = self.cfg
        speaker = (DEFAULT_VOICE if request.voice is None
                   else self.spec.resolve_voice(request.voice, request.voice_paths).name)
        ids = self.tok.prompt(request.text, speaker, c.audio_bos_token_id)
        room = c.text.max_position_embeddings - len(ids)
        if room < 2:
            raise InputError(f"the prompt is {len(ids)} tokens long, which leaves no room in the model's "
                             f"context of {c.text.max_position_embeddings}; shorten the text")
        default = min(self.gen.max_new_tokens or DEFAULT_MAX_TOKENS, room)
        limit = request.max_frames if request.max_frames is not None else default
        if limit < 1:
            raise InputError(f"max_frames must be >= 1, got {limit}")
        g = self.gen.guidance_scale if request.cfg_scale is None else float(request.cfg_scale)
        steps = self.options_of(request)["diffusion_steps"] or self.gen.num_diffusion_steps
        data = PreparedVibe(ids=ids, seed=request.seed, guidance=g, steps=int(steps))
        return Prompt(length=len(ids), data=data, max_frames=limit, fixed_frames=request.fixed_frames,
                      width=3 if g != 1.0 else 1)

    # --- device resources ------------------------------------------------------------------------
    def _layout(self, prompt: Prompt) -> tuple[int, int]:
        """(pages of the conditional sequence, pages of each guidance sequence)."""
        steps = prompt.max_frames if prompt.fixed_frames is None else prompt.fixed_frames
        ps = self.page_size or 16
        return -(-(prompt.length + steps + 1) // ps), -(-(steps + 2) // ps)

    def kv_tokens(self, prompt: Prompt) -> int:
        pos, side = self._layout(prompt)
        return (pos + (2 * side if prompt.width == 3 else 0)) * (self.page_size or 16)

    def init_kv(self, num_pages: int, page_size: int) -> None:
        t = self.cfg.text
        shape = (t.num_hidden_layers, num_pages, page_size, t.num_key_value_heads,
                 t.hidden_size // t.num_attention_heads)
        self.k_pool = pool_zeros(shape, self.dtype, self.device)
        self.v_pool = pool_zeros(shape, self.dtype, self.device)
        self.page_size = page_size

    def init_codec_slots(self, num_slots: int) -> None:
        """Nothing to hold: a request's codec state lives in its LM row (the codec runs in the LM step)."""

    # --- stages ----------------------------------------------------------------------------------
    def _seq(self, row: Row, s: int) -> Row:
        pos, side = self._layout(row.prompt)
        if s == POS:
            pages = row.pages[:pos]
        else:
            start = pos + side * (s - 1)
            pages = row.pages[start:start + side]
        return Row(request_id=row.request_id, prompt=row.prompt, pages=pages)

    def _forward(self, rows: list[Row], seqs: list[int], starts: list[int], x: torch.Tensor) -> torch.Tensor:
        """One position per sequence (x [N, H]) -> final-norm hidden [N, H]."""
        if self.k_pool is None:
            raise RuntimeError("the KV pool is not allocated: call init_kv(num_pages, page_size) first")
        views = [self._seq(r, s) for r, s in zip(rows, seqs, strict=True)]
        pb = PagedBatch.for_rows(views, starts, [1] * len(views), self.page_size, self.device)
        return self.weights.hidden_states(x[:, None], pb, self.k_pool, self.v_pool)[:, 0]

    def _tokens(self, h: torch.Tensor, hu: torch.Tensor | None, guid: torch.Tensor) -> list[int]:
        cond = h.float() @ self._rows4.float().T
        if hu is None:
            return self._choices[cond.argmax(-1)].tolist()
        score = guid[:, None] * cond + (1 - guid[:, None]) * (hu.float() @ self._rows4.float().T)
        return self._choices[score.argmax(-1)].tolist()

    def _step(self, rows: list[Row], states: list[VibeState], h: torch.Tensor, x_in: torch.Tensor | None,
              unc_in: list[int]) -> tuple[list[int], torch.Tensor, list, list]:
        """The rest of one generate iteration after the conditional LM pass (h [R, H]): the token guidance,
        the token, and at the diffusion token the negative pass, the solver, the codec."""
        c = self.cfg
        guided = [i for i, s in enumerate(states) if s.guidance != 1.0]
        hu = None
        if guided:
            ids = torch.tensor([unc_in[i] for i in guided], device=self.device)
            hg = self._forward([rows[i] for i in guided], [UNC] * len(guided),
                               [states[i].unc_len for i in guided], self.weights.embed(ids))
            hu = h.clone()
            hu[guided] = hg
        guid = torch.tensor([s.guidance for s in states], device=self.device)
        toks = self._tokens(h, hu, guid)
        nxt = self.weights.embed(torch.tensor(toks, device=self.device))
        audio: list = [None] * len(rows)
        streams: list = [None] * len(rows)
        frames = [i for i, t in enumerate(toks) if t == c.audio_token_id]
        if frames:
            audio_rows, embeds, streams_new = self._frames(rows, states, frames, h, x_in)
            for k, i in enumerate(frames):
                audio[i] = audio_rows[k]
                streams[i] = streams_new[k]
                nxt[i] = embeds[k]
        return toks, nxt, audio, streams

    def _frames(self, rows, states, frames, h, x_in):
        c, w = self.cfg, self.weights
        sts = [states[i] for i in frames]
        neg_rows = [k for k, i in enumerate(frames) if states[i].guidance != 1.0]
        cond = h[frames]
        neg = cond.clone()
        if neg_rows:
            idx = [frames[k] for k in neg_rows]
            bos = w.embed(torch.tensor([c.audio_bos_token_id], device=self.device))[0]
            # the negative reads this step's LM input; in the prefill step (no input yet) audio_bos
            xs = bos.expand(len(idx), -1) if x_in is None else x_in[idx]
            neg[neg_rows] = self._forward([rows[i] for i in idx], [NEG] * len(idx),
                                          [states[i].neg_len for i in idx], xs)
        noise = torch.stack([torch.randn(2, c.head.latent_size, generator=s.gen)[0] for s in sts])
        noise = noise.to(device=self.device, dtype=cond.dtype)
        head = w.model.diffusion_head
        pc, nc = head.project_condition(cond), head.project_condition(neg)
        g = torch.tensor([s.guidance for s in sts], device=self.device, dtype=cond.dtype)[:, None]
        plans = {id(s.plan): s.plan for s in sts}
        latent = torch.empty_like(noise)
        for plan in plans.values():  # rows of one step count share a schedule
            sel = [k for k, s in enumerate(sts) if s.plan is plan]

            def predict(x, t, sel=sel):
                both = head(torch.cat([x, x]), t, torch.cat([pc[sel], nc[sel]]))
                v_c, v_u = both.chunk(2)
                return v_u + g[sel] * (v_c - v_u)

            latent[sel] = plan.sample(noise[sel], predict)
        m = w.model
        scaled = latent / m.latent_scaling_factor - m.latent_bias_factor
        dec = m.audio_tower.decoder
        enc = m.semantic_tokenizer_encoder
        a_state = [torch.cat(parts) for parts in zip(*[s.acoustic for s in sts], strict=True)]
        s_state = [torch.cat(parts) for parts in zip(*[s.semantic for s in sts], strict=True)]
        audio, a_next = dec.run(scaled[:, :, None], a_state)
        sem, s_next = enc.run(audio, s_state)
        embeds = w.next_embedding(latent, sem[:, :, 0])
        pcm = audio[:, 0].float().cpu().numpy()
        split = [([t[k:k + 1] for t in a_next], [t[k:k + 1] for t in s_next]) for k in range(len(sts))]
        return pcm, embeds, split

    def _commit(self, rows: list[Row], states: list[VibeState], toks: list[int], nxt: torch.Tensor,
                audio: list, streams: list) -> list[StepOutput]:
        c = self.cfg
        out = []
        for i, (r, st, t) in enumerate(zip(rows, states, toks, strict=True)):
            st.next_embed = nxt[i]
            st.last_token = t
            st.unc_len += 1
            st.tokens += 1
            if t == c.audio_bos_token_id:
                st.neg_len = 0
            frame = None
            if audio[i] is not None:
                st.acoustic, st.semantic = streams[i]
                if st.guidance != 1.0:
                    st.neg_len += 1
                frame = pack_pcm(audio[i])
                r.frames_emitted += 1
            r.state = st
            end = (t == c.eos_token_id and not st.fixed) or st.tokens >= st.limit
            out.append(StepOutput(frame=frame, done=end))
        return out

    def _guarded(self, states: list[VibeState], step):
        saved = [s.gen.get_state() for s in states]
        try:
            return step()
        except BaseException:
            for s, g in zip(states, saved, strict=True):
                s.gen.set_state(g)
            raise

    @torch.inference_mode()
    def prefill(self, rows: list[Row]) -> list[StepOutput]:
        if not rows:
            return []
        w = self.weights
        states = []
        for r in rows:
            p: PreparedVibe = r.prompt.data
            fixed = r.prompt.fixed_frames is not None
            states.append(VibeState(
                gen=request_generator(p.seed), guidance=p.guidance, plan=self.solver_plan(p.steps),
                next_embed=torch.empty(0), last_token=p.ids[-1], unc_len=0, neg_len=0,
                acoustic=w.model.audio_tower.decoder.zero_state(1, self.dtype, self.device),
                semantic=w.model.semantic_tokenizer_encoder.zero_state(1, self.dtype, self.device),
                tokens=0, limit=r.prompt.fixed_frames if fixed else r.prompt.max_frames, fixed=fixed))
        lengths = [len(r.prompt.data.ids) for r in rows]

        def step():
            ids = torch.zeros(len(rows), max(lengths), dtype=torch.long)
            for b, r in enumerate(rows):
                ids[b, : lengths[b]] = torch.tensor(r.prompt.data.ids)
            x = w.embed(ids.to(self.device))
            if self.k_pool is None:
                raise RuntimeError("the KV pool is not allocated: call init_kv(num_pages, page_size) first")
            views = [self._seq(r, POS) for r in rows]
            pb = PagedBatch.for_rows(views, [0] * len(rows), lengths, self.page_size, self.device)
            hid = w.hidden_states(x, pb, self.k_pool, self.v_pool)
            h = hid[torch.arange(len(rows)), torch.tensor(lengths) - 1]
            return self._step(rows, states, h, None, [p.data.ids[-1] for p in (r.prompt for r in rows)])

        toks, nxt, audio, streams = self._guarded(states, step)
        for r, n in zip(rows, lengths, strict=True):
            r.kv_len = n
            r.frames_emitted = 0
        return self._commit(rows, states, toks, nxt, audio, streams)

    @torch.inference_mode()
    def decode(self, rows: list[Row]) -> list[StepOutput]:
        if not rows:
            return []
        states: list[VibeState] = [r.state for r in rows]

        def step():
            x = torch.stack([s.next_embed for s in states])
            h = self._forward(rows, [POS] * len(rows), [r.kv_len for r in rows], x)
            return self._step(rows, states, h, x, [s.last_token for s in states])

        toks, nxt, audio, streams = self._guarded(states, step)
        for r in rows:
            r.kv_len += 1
        return self._commit(rows, states, toks, nxt, audio, streams)

    def codec(self, items: list[CodecItem]) -> list[np.ndarray]:
        """The frames' audio was decoded in the LM step: unpack it (nothing runs here)."""
        return [unpack_pcm(it.codes).reshape(-1) for it in items]

    def release(self, row: Row) -> None:
        row.state = None

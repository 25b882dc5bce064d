"""CosyVoice 3 cloning figures against upstream (the CosyVoice oracle venv): max |ours - upstream| of the
prompt features (speech tokens, prompt mel, embedding) from `frontend_zero_shot` and of the float waveform
of greedy zero-shot / instruct2 synthesis, both upstream modes, fp32, on a tiny checkpoint with tiny random
ONNX models (the tests assert these through 16-bit WAVs: tests/test_cosyvoice_clone_parity.py).

usage: VOX_COSYVOICE_ORACLE_PYTHON=... python -m benchmarks figures_cosyvoice_clone [WORKDIR]
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import numpy as np
from voxcli.models import load_model
from voxcli.models.base import CodecItem, Row, SamplingParams, SynthesisRequest
from voxcli.models.registry import get_tiny

from tests.oracle.drive_cosyvoice import run_cases
from tests.support.cosyvoice_clone_case import (
    INSTRUCTION,
    REF_TEXT,
    TEXT,
    UPSTREAM_INSTRUCT,
    UPSTREAM_PROMPT,
    write_clip,
)


def synthesize(program, req: SynthesisRequest) -> np.ndarray:
    """Batch-1 greedy LM, then the codec through one slot in the engine's chunks (28, 50, 100...)."""
    prompt = program.prepare(req)
    page = 16
    n = -(-program.kv_tokens(prompt) // page)
    program.init_kv(num_pages=n, page_size=page)
    program.init_codec_slots(1)
    row = Row(request_id=0, prompt=prompt, pages=list(range(n)), slot=0)
    outs = [program.prefill([row])[0]]
    while not outs[-1].done:
        outs.append(program.decode([row])[0])
    toks = np.array([int(o.frame[0]) for o in outs if o.frame is not None], dtype=np.int64)[:, None]
    edges, i = [0], 0
    while edges[-1] < len(toks):
        edges.append(min(len(toks), edges[-1] + (28, 50, 100)[min(i, 2)]))
        i += 1
    parts = [
        program.codec([CodecItem(slot=0, codes=toks[a:b], first=a == 0, last=b == len(toks))])[0]
        for a, b in zip(edges, edges[1:], strict=False)
    ]
    return np.concatenate(parts)


def main() -> None:
    import soundfile as sf

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("workdir", nargs="?", help="for the checkpoint, the clip and upstream outputs (default: "
                    "a new temporary folder)")
    args = ap.parse_args()
    work = Path(args.workdir or tempfile.mkdtemp(prefix="cosy-clone-fig-"))
    ckpt = get_tiny("cosyvoice3").build(work / "ckpt", clone_models=True)  # + tiny random ONNX models
    clip = work / "c44.wav"
    write_clip(clip, 44100, 2)
    cases = [{"name": "fe", "kind": "frontend", "wav": str(clip), "prompt_text": UPSTREAM_PROMPT}]
    for stream in (True, False):
        tag = "stream" if stream else "offline"
        cases.append(
            {
                "name": f"clone_{tag}",
                "kind": "tts",
                "text": TEXT,
                "wav": str(clip),
                "prompt_text": UPSTREAM_PROMPT,
                "stream": stream,
            }
        )
        cases.append(
            {
                "name": f"instruct_{tag}",
                "kind": "tts",
                "text": TEXT,
                "wav": str(clip),
                "instruct": UPSTREAM_INSTRUCT,
                "stream": stream,
            }
        )
    ref = run_cases(ckpt, cases, work)
    program = load_model(str(ckpt))
    data, rate = sf.read(str(clip), dtype="float32", always_2d=True)
    wav = np.ascontiguousarray(data.mean(axis=1), dtype=np.float32)
    got = program.clips.get(program.root, wav, rate, program.mel_params)  # what a clone request runs
    fe = ref["fe"]
    print(
        f"prompt: {len(got.tokens)} tokens, equal: {got.tokens == fe['llm_tokens']}; "
        f"mel max diff {float((got.feat - fe['feat'].float()).abs().max()):.2e}; "
        f"embedding max diff {float((got.embedding - fe['embedding'].float()).abs().max()):.2e}"
    )
    for tag in ("stream", "offline"):
        opts = {"codec_mode": tag}
        g = SamplingParams(greedy=True)
        for name, req in (
            (
                "clone",
                SynthesisRequest(
                    text=TEXT,
                    ref_audio=wav,
                    ref_sample_rate=rate,
                    ref_text=REF_TEXT,
                    sampling=g,
                    options=opts,
                ),
            ),
            (
                "instruct",
                SynthesisRequest(
                    text=TEXT,
                    ref_audio=wav,
                    ref_sample_rate=rate,
                    instructions=INSTRUCTION,
                    sampling=g,
                    options=opts,
                ),
            ),
        ):
            ours, want = synthesize(program, req), ref[f"{name}_{tag}"]["wav"]
            diff = float(np.abs(ours - want).max()) if ours.shape == want.shape else float("nan")
            print(
                f"{name:8s} {tag:7s} {len(ref[f'{name}_{tag}']['raw_tokens'])} tokens, "
                f"{want.shape[0]} samples, max |ours - upstream| {diff:.2e}"
            )


if __name__ == "__main__":
    main()

"""Parity at real size (issue 23): `vox say --greedy --max-frames N` on a real-size random-weight
Qwen3-TTS checkpoint against the official `qwen-tts` on the same weights.

    python scripts/parity_realsize.py /work/cache/realsize-0.6b-cv [--frames 8] [--text "Hello there."]

Three processes, one after another (each holds a real-size model; never two at once):
1. the oracle (official qwen-tts 0.1.1, greedy, float32, eager attention: tests/oracle/run_talker.py
   under $VOX_ORACLE_PYTHON, default /work/oracle-venv/bin/python) -> codes, talker / predictor
   logits, the waveform of one full decoder forward;
2. `vox say -m CKPT --greedy --max-frames N --dtype float32 TEXT -o out.wav` (the CLI, streaming
   codec chunks) -> a 16-bit WAV;
3. this process: the same request through the engine's own stages at batch 1
   (models/qwen3_tts/reference.generate) -> codes and a full decode.

Checks: codes identical (a mismatch at a reference tie, margin < 1e-3, is reported as such); the CLI's
WAV and our full decode within 1e-4 of the reference waveform (the WAV also carries 16-bit rounding,
<= 1.6e-5); teacher-forced talker / predictor logits within 1e-4 relative. Exit 1 on any miss.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
ORACLE_DIR = REPO / "tests" / "oracle"
TIE = 1e-3


def run_oracle(ckpt: str, text: str, frames: int, work: Path) -> dict:
    import torch

    py = os.environ.get("VOX_ORACLE_PYTHON", "/work/oracle-venv/bin/python")
    if not Path(py).exists():
        raise SystemExit(f"oracle interpreter {py} not found: set VOX_ORACLE_PYTHON (bash "
                         "scripts/setup_oracle.sh makes one)")
    # `vox say` on a CustomVoice model: the first voice by name, language auto, text given whole
    speakers = json.loads((Path(ckpt) / "config.json").read_text())["talker_config"]["spk_id"]
    case = dict(name="say", text=text, language="Auto", speaker=sorted(speakers)[0], stream=False,
                max_new=frames + 1)
    (work / "cases.json").write_text(json.dumps([case]))
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", PYTHONHASHSEED="0",
               OMP_NUM_THREADS="2", TOKENIZERS_PARALLELISM="false")
    env.pop("PYTHONPATH", None)
    proc = subprocess.run([py, str(ORACLE_DIR / "run_talker.py"), ckpt, str(work / "ref.pt"),
                           str(work / "cases.json")], capture_output=True, text=True, env=env,
                          cwd=str(ORACLE_DIR))
    if proc.returncode != 0:
        raise SystemExit(f"the oracle failed ({proc.returncode}):\n{proc.stderr[-4000:]}")
    return torch.load(work / "ref.pt", weights_only=False)["say"]


def run_cli(ckpt: str, text: str, frames: int, out: Path) -> None:
    cmd = [sys.executable, "-m", "voxcli.cli", "say", "-m", ckpt, "--greedy", "--max-frames", str(frames),
           "--dtype", "float32", text, "-o", str(out)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"vox say failed ({proc.returncode}):\n{proc.stderr[-4000:]}")
    sys.stderr.write(proc.stderr)


def _margin(row) -> float:
    top = row.topk(2).values
    return float(top[0] - top[1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("checkpoint")
    ap.add_argument("--frames", type=int, default=8)
    ap.add_argument("--text", default="Hello there.")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="vox-parity-"))
    ok = True
    t0 = time.monotonic()
    ref = run_oracle(args.checkpoint, args.text, args.frames, work)
    t_oracle = time.monotonic() - t0
    ref_codes, ref_wav = ref["codes"].numpy(), ref["wav"].numpy()
    print(f"oracle (qwen-tts): {ref_codes.shape[0]} frames x {ref_codes.shape[1]} codebooks, "
          f"{ref_wav.shape[0]} samples in {t_oracle:.0f} s")

    t0 = time.monotonic()
    run_cli(args.checkpoint, args.text, args.frames, work / "say.wav")
    import soundfile as sf

    cli_wav, sr = sf.read(str(work / "say.wav"), dtype="float32")
    n = min(len(cli_wav), len(ref_wav))
    cli_err = float(np.abs(cli_wav[:n] - ref_wav[:n]).max()) if n else float("inf")
    same_len = len(cli_wav) == len(ref_wav)
    ok &= same_len and cli_err <= 1e-4
    print(f"vox say (CLI, streamed chunks, 16-bit WAV): {len(cli_wav)} samples at {sr} Hz vs reference "
          f"{len(ref_wav)}; max |diff| {cli_err:.2e} (<= 1e-4) in {time.monotonic() - t0:.0f} s")

    from voxcli.models import load_model
    from voxcli.models.base import SamplingParams, SynthesisRequest
    from voxcli.models.registry import get_reference

    reference = get_reference("qwen3_tts")
    program = load_model(args.checkpoint, "cpu", "float32")
    req = SynthesisRequest(text=args.text, sampling=SamplingParams(greedy=True), max_frames=args.frames)
    trace = reference.Trace(prompt=None)  # type: ignore[arg-type]
    codes, _ = reference.generate(program, req, with_wav=False, trace=trace)
    prefill = trace.prompt.data.emb.embeds
    pre_err = float((prefill - ref["prefill"]).abs().max()) if prefill.shape == ref["prefill"].shape else -1
    ok &= 0 <= pre_err <= 1e-5
    print(f"prefill embeddings: shape {tuple(prefill.shape)} vs {tuple(ref['prefill'].shape)}, "
          f"max |diff| {pre_err:.2e} (<= 1e-5)")
    if codes.shape == ref_codes.shape and np.array_equal(codes, ref_codes):
        print(f"codes: identical ({codes.shape[0]} frames x {codes.shape[1]} codebooks)")
    else:
        m = min(len(codes), len(ref_codes))
        diff = np.argwhere(codes[:m] != ref_codes[:m])
        if len(diff) == 0:
            ok = False
            print(f"codes: frame counts differ: ours {codes.shape}, reference {ref_codes.shape}")
        else:
            t, g = (int(x) for x in diff[0])
            cb = ref["cp_logits"].shape[-1]
            row = ref["talker_logits"][t][:cb] if g == 0 else ref["cp_logits"][t * 15 + g - 1]
            tie = _margin(row) < TIE
            ok &= tie
            print(f"codes: first difference at frame {t}, codebook {g}; reference margin {_margin(row):.2e} "
                  f"({'a tie' if tie else 'NOT a tie'})")
    tl, pl = reference.teacher_forced(program, trace.prompt, ref_codes)
    rt, rp = ref["talker_logits"], ref["cp_logits"].view(-1, 15, ref["cp_logits"].shape[-1])
    t_err = float((tl - rt).abs().max() / rt.abs().max())
    p_err = float((pl - rp).abs().max() / rp.abs().max())
    ok &= t_err <= 1e-4 and p_err <= 1e-4
    print(f"teacher-forced logits: talker {t_err:.2e}, predictor {p_err:.2e} relative (<= 1e-4)")
    ours = reference.decode_full(program, ref_codes)
    w_err = float(np.abs(ours - ref_wav).max()) if ours.shape == ref_wav.shape else float("inf")
    ok &= w_err <= 1e-4
    print(f"waveform (our full decode of the reference codes): max |diff| {w_err:.2e} (<= 1e-4)")
    print("PARITY OK" if ok else "PARITY FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

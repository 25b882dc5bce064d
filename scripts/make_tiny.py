"""Build a deterministic random-weight checkpoint of a registered family, in its released layout.

usage: python scripts/make_tiny.py OUT [--family NAME] [--size SIZE] [--seed N] [family options]
       --family qwen3_tts (default)  --size tiny|cpu-bench|0.6b|1.7b
                                     [--variant custom_voice|base|voice_design]
                                     [--proj]  (1.7B-like: predictor narrower than the talker)
       --family dia                  --size tiny|...
       --family higgs|higgs-v3       --size tiny|v2-3b|v3-4b|real
       --family cosyvoice3           --size tiny|bench|real [--clone-models]  (upstream's layout;
                                     --clone-models adds tiny random speech_tokenizer_v3.onnx and
                                     campplus.onnx, which needs `onnx`, so --ref-audio runs)
       --family cosyvoice2           --size tiny|real [--clone-models]  (CosyVoice2-0.5B's layout;
                                     --clone-models adds tiny random speech_tokenizer_v2.onnx, campplus.onnx)
       --family speechlm             --size tiny|real  (OpusLM-like, ESPnet's layout; real = OpusLM-Dialogue's
                                     SmolLM2-1.7B backbone, 9 streams, ESPnet DAC)
       --family kyutai_tts           --size tiny|bench|real  (moshi's layout in plain torch; real = the
                                     published 1.6B in bfloat16 + moshi's Mimi, streamed: ~0.5 GB peak)
       --family vibevoice            --size tiny|bench|real  (the transformers layout, plain torch; real =
                                     VibeVoice-1.5B in bf16, 6 shards, 3 GB peak RSS to build)

The builders are the families' `Family.tiny` registrations (models/registry.py `Tiny`); `--list` prints
them with their sizes. 0.6b / 1.7b: the real Qwen3-TTS architectures (random weights, talker stored in
bfloat16; the 0.6b is 2.4 GB); scripts/ci_realsize.sh caches a 0.6b build by this builder's source hash.
"""

from __future__ import annotations

import argparse

from voxcli.models.registry import find_tiny, tinies


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", nargs="?")
    ap.add_argument("--family", default="qwen3_tts", choices=[t.name for t in tinies()])
    ap.add_argument("--size", default="tiny")
    # 1234 for every family: the seed this script always passed (so a rebuilt checkpoint is the one CI cached)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--variant", default=None, choices=["custom_voice", "base", "voice_design"])
    ap.add_argument("--proj", action="store_true",
                    help="qwen3_tts 1.7B-like: predictor narrower than the talker")
    ap.add_argument("--clone-models", action="store_true", help="cosyvoice3: tiny random ONNX clone models")
    ap.add_argument("--list", action="store_true", help="print the builders and their sizes")
    a = ap.parse_args()
    if a.list:
        for t in tinies():
            print(f"{t.name}: {', '.join(t.sizes())}")
        return
    if a.out is None:
        ap.error("give the output folder")
    tiny = find_tiny(a.family)
    assert tiny is not None  # argparse's choices
    given = {"variant": a.variant, "proj": a.proj or None, "clone_models": a.clone_models or None}
    options = {k: v for k, v in given.items() if v is not None}
    unknown = sorted(set(options) - set(tiny.options))
    if unknown:
        ap.error(f"--{unknown[0].replace('_', '-')} is not an option of --family {a.family}")
    if a.size not in tiny.sizes():
        ap.error(f"--size must be one of {', '.join(tiny.sizes())} for {a.family}, got {a.size!r}")
    print(tiny.build(a.out, size=a.size, seed=a.seed, **options))


if __name__ == "__main__":
    main()

"""Build a deterministic random-weight Qwen3-TTS checkpoint in the official layout.

usage: python scripts/make_tiny.py OUT [--variant custom_voice|base|voice_design] [--proj]
                                       [--size tiny|cpu-bench|0.6b|1.7b] [--seed N]
       python scripts/make_tiny.py OUT --family higgs|higgs-v3 [--size tiny|v2-3b|v3-4b|real] [--seed N]
       python scripts/make_tiny.py OUT --family cosyvoice3 [--size tiny|bench|real] [--clone-models]
              (upstream's layout; --clone-models adds tiny random speech_tokenizer_v3.onnx and campplus.onnx,
              which needs `onnx`, so --ref-audio runs)
       python scripts/make_tiny.py OUT --family speechlm [--size tiny|real]   (OpusLM-like, ESPnet's layout;
                                   real = OpusLM-Dialogue's SmolLM2-1.7B backbone, 9 streams, ESPnet DAC)

0.6b / 1.7b: the real architectures (random weights, talker stored in bfloat16; the 0.6b is 2.4 GB);
scripts/ci_realsize.sh caches a 0.6b build by this builder's source hash.
"""

from __future__ import annotations

import argparse

from voxcli.models.qwen3_tts.tiny import ALL_SIZES, SEED, build_tiny


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--variant", default="custom_voice", choices=["custom_voice", "base", "voice_design"])
    ap.add_argument("--proj", action="store_true", help="1.7B-like: predictor narrower than the talker")
    ap.add_argument("--size", default="tiny")
    ap.add_argument("--seed", type=int, default=SEED)
    ap.add_argument("--family", default="qwen3_tts",
                    choices=["qwen3_tts", "higgs", "higgs-v3", "cosyvoice3", "speechlm"])
    ap.add_argument("--clone-models", action="store_true", help="cosyvoice3: tiny random ONNX clone models")
    a = ap.parse_args()
    if a.clone_models and a.family != "cosyvoice3":
        ap.error("--clone-models is for --family cosyvoice3 only")
    if a.family == "speechlm":  # ESPnet's release layout, see models/speechlm/tiny_opuslm.py
        from voxcli.models.speechlm.tiny_opuslm import build_opuslm

        print(build_opuslm(a.out, size=a.size, seed=a.seed))
        return
    if a.family == "cosyvoice3":  # upstream's layout, see models/cosyvoice3/tiny.py
        from voxcli.models.cosyvoice3.tiny import build_tiny as build_cosyvoice

        out = build_cosyvoice(a.out, size=a.size, seed=a.seed)
        if a.clone_models:
            from voxcli.models.cosyvoice3.tiny_onnx import write_tiny_onnx

            write_tiny_onnx(out, seed=a.seed)
        print(out)
        return
    if a.family != "qwen3_tts":  # Higgs Audio v2 (transformers layout) or v3, see models/higgs_audio/tiny.py
        from voxcli.models.higgs_audio.tiny import build_sized

        print(build_sized(a.out, a.family, a.size, a.seed))
        return
    if a.size not in ALL_SIZES:
        ap.error(f"--size must be one of {', '.join(sorted(ALL_SIZES))} for qwen3_tts, got {a.size!r}")
    print(build_tiny(a.out, variant=a.variant, proj=a.proj, size=a.size, seed=a.seed))


if __name__ == "__main__":
    main()

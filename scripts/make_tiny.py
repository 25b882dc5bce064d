"""Build a deterministic random-weight Qwen3-TTS checkpoint in the official layout.

usage: python scripts/make_tiny.py OUT [--variant custom_voice|base|voice_design] [--proj]
                                       [--size tiny|cpu-bench|0.6b|1.7b] [--seed N]

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
    ap.add_argument("--size", default="tiny", choices=sorted(ALL_SIZES))
    ap.add_argument("--seed", type=int, default=SEED)
    a = ap.parse_args()
    print(build_tiny(a.out, variant=a.variant, proj=a.proj, size=a.size, seed=a.seed))


if __name__ == "__main__":
    main()

"""The offline `demo` model: the tiny random-weight CustomVoice checkpoint, built from the calibration
shipped in demo_calibration.json so the first `vox say -m demo` does not spend ~20 s re-running the two
calibrations (decoder output scale, EOS stop rate) that always arrive at the same numbers.

Regenerate the JSON after changing the demo recipe (then bump the demo's version in family.py):
    python -m voxcli.models.qwen3_tts.demo --write
tests/test_demo_model.py checks that a calibrating build still matches the shipped numbers."""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

# The demo recipe: a modest cap (250 frames = 20 s) and an EOS stop rate of 0.08 per frame on the greedy
# path: sampled runs mostly end within a few seconds (measured median ~2 s; some hit the cap).
DEMO_RECIPE = dict(variant="custom_voice", max_new_tokens=250, eos_hazard=0.08)
CALIBRATION_FILE = Path(__file__).with_name("demo_calibration.json")


def shipped_calibration():
    from .tiny import Calibration

    data = json.loads(CALIBRATION_FILE.read_text())
    return Calibration(float(data["decoder_scale"]), tuple(float(x) for x in data["eos_row"]))


def build_demo(out: Path, calibrate: bool = False) -> Path:
    """The demo checkpoint at `out`; `calibrate=True` measures instead of using the shipped numbers."""
    from .tiny import build_tiny

    return build_tiny(out, **DEMO_RECIPE, calibration=None if calibrate else shipped_calibration())


def _write() -> None:
    import torch

    from .tiny import measure_calibration

    torch.set_num_threads(2)  # as the tests (tests/conftest.py): the same reduction order, the same bits
    with tempfile.TemporaryDirectory() as tmp:
        cal = measure_calibration(build_demo(Path(tmp) / "demo", calibrate=True))
    CALIBRATION_FILE.write_text(json.dumps({"decoder_scale": cal.decoder_scale, "eos_row": list(cal.eos_row)},
                                           indent=0) + "\n")
    print(f"wrote {CALIBRATION_FILE}")


if __name__ == "__main__":
    if sys.argv[1:] != ["--write"]:
        sys.exit("usage: python -m voxcli.models.qwen3_tts.demo --write")
    _write()

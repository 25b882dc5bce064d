"""The demo model is built from shipped calibration numbers (fast first use); they must still be what a
calibrating build arrives at, or the demo would silently drift from its recipe."""

from __future__ import annotations

from safetensors.torch import load_file
from voxcli.models.qwen3_tts.demo import build_demo, shipped_calibration


def _tensors(ckpt):
    out = {f"talker.{k}": v for k, v in load_file(str(ckpt / "model.safetensors")).items()}
    st = load_file(str(ckpt / "speech_tokenizer" / "model.safetensors"))
    out.update({f"st.{k}": v for k, v in st.items()})
    return out


def test_shipped_calibration_builds_the_same_checkpoint_as_calibrating(tmp_path):
    fast = _tensors(build_demo(tmp_path / "fast"))
    slow = _tensors(build_demo(tmp_path / "slow", calibrate=True))
    assert fast.keys() == slow.keys()
    # (reduction order alone moves a calibrating build by ~1e-7; a stale number moves whole rows)
    differ = [k for k in fast
              if not (fast[k].shape == slow[k].shape and (fast[k] - slow[k]).abs().max() <= 1e-5)]
    assert not differ, f"the shipped calibration is stale for {differ[:5]}; run python -m " \
                       "voxcli.models.qwen3_tts.demo --write and bump DEMO_VERSION"
    assert len(shipped_calibration().eos_row) > 0

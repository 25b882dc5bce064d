"""Every demo family speaks in float32 and in bfloat16 on the CPU, whatever the CPU.

`--dtype auto` is bfloat16 on a CPU with bfloat16 instructions (avx512_bf16 / amx_bf16), so a family that
breaks in bfloat16 breaks every default request there, and nothing else in the suite runs bfloat16 on a CPU
without those instructions (where auto is float32). Here bfloat16 is asked for explicitly: torch runs it on
any x86 CPU (slower without the instructions), so this matrix fails the same way on every machine. The
families come from the registry: a new family is in the matrix by registering a demo.
"""

from __future__ import annotations

import numpy as np
import pytest
from voxcli.models.registry import demos

from voxcli.api import TTS
from voxcli.config import resolve_dtype
from voxcli.session import EngineOptions, open_session

DEMOS = [d.name for d in demos()]
TEXT = "Hello there, how are you today."


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("demo", DEMOS)
def test_demo_speaks_in_dtype(demo, dtype, demo_store):
    import torch

    checkpoint = demo_store.built(demo)
    session = open_session(EngineOptions(model=str(checkpoint), executor="cpu", dtype=dtype,
                                         admission="deadline"))
    tts = TTS(session)
    try:
        program = session.engine.program
        assert program.dtype == getattr(torch, dtype), f"{demo} loaded in {program.dtype}, asked {dtype}"
        audio = tts.say(TEXT, seed=1, max_frames=24)
    finally:
        tts.close()
    assert audio.samples.size > 0, f"{demo} in {dtype} wrote no audio"
    assert np.isfinite(audio.samples).all(), f"{demo} in {dtype} wrote NaN or inf samples"
    assert np.abs(audio.samples).max() <= 1.0


def test_auto_is_bfloat16_where_the_cpu_has_the_instructions():
    """The path the matrix above forces is the one `auto` takes on such a CPU."""
    assert resolve_dtype("auto", "cpu", fast_bf16=lambda: True) == "bfloat16"
    assert resolve_dtype("auto", "cpu", fast_bf16=lambda: False) == "float32"

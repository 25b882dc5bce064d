"""Role engines in one process for the role tests: a real-time simulated engine of any role, the front
door's LM -> codec relay on a thread, and a bounded wait for a condition another thread makes true."""

from __future__ import annotations

import threading
import time

from voxcli.models.base import SynthesisRequest

from voxcli.engine.engine import Engine
from voxcli.engine.lanes import lane_layout
from voxcli.engine.roles import CodecEngine, LMEngine, lm_items, relay


def sim_role_engine(role: str = "both", **sets):
    """A real-time simulated H100 engine of `role` over the sim's program (PCM = frame index x 1)."""
    from voxcli.engine.estimates import load_profile
    from voxcli.session import EngineOptions, engine_config
    from voxcli.sim.realtime_executor import RealtimeSimExecutor
    from voxcli.sim.synthetic import SyntheticProgram

    options = EngineOptions(model="qwen3-tts-1.7b", executor="sim", gpu="h100",
                            sets=EngineOptions.sets_from(sets))
    config = engine_config(options).replace(role=role)
    program = SyntheticProgram.for_model(config.model, pcm_scale=1.0)
    profile = load_profile(config)
    executor = RealtimeSimExecutor(program, profile, lane_layout(config))
    cls = {"both": Engine, "lm": LMEngine, "codec": CodecEngine}[role]
    return cls(program, config, executor=executor, profile=profile)


def split_submit(lm: LMEngine, codec: CodecEngine, request: SynthesisRequest, key: str):
    """The front door's job in one process: submit to the LM, relay its chunks to the codec on a thread."""
    out = codec.attach(key)
    lm_stream = lm.submit(request, key=key)
    t = threading.Thread(target=relay, args=(lm_items(lm_stream), codec, lm_stream.cancel), daemon=True)
    t.start()
    return out, lm_stream, t


def one_engine_audio(model: str, gpu: str, frames: list[int]) -> list:
    """Requests of `frames` frames on one "both" sim engine in this process (PCM = frame index x 1): what
    a placement of the same sim program must stream."""
    from voxcli.session import sim_session

    engine = sim_session(model, gpu, pcm_scale=1.0).engine
    try:
        streams = [engine.submit(SynthesisRequest(text="hi", fixed_frames=n)) for n in frames]
        return [s.wait(30) for s in streams]
    finally:
        engine.close()


def wait_until(cond, timeout: float = 10.0) -> None:
    end = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > end:
            raise AssertionError("condition not reached in time")
        time.sleep(0.005)

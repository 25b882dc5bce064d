"""Which lanes a policy uses and how they share the device. Executors read this to set themselves up
(threads, streams + SM partitions, the sim's overlap model); the scheduler reads it to know which lanes
it may fill."""

from __future__ import annotations

from dataclasses import dataclass

from voxcli.config import EngineConfig
from voxcli.engine.executors.base import LaneName


@dataclass(frozen=True)
class LaneLayout:
    policy: str
    lanes: tuple[LaneName, ...]
    sms: dict[str, int | None]  # SMs per lane; None = the whole device (no partition)
    serialized: bool  # sync: never two lanes at once (time sharing)
    # a lane that, when running beside others, keeps its speed and slows them (stream priority)
    priority_lane: LaneName | None = None

    def overlaps(self, a: str, b: str) -> bool:
        """True if lanes a and b compete for the same SMs when they run at once."""
        if a == b:
            return True
        return self.sms[a] is None or self.sms[b] is None

    @property
    def partitioned(self) -> bool:
        return any(v is not None for v in self.sms.values())


def lane_layout(config: EngineConfig) -> LaneLayout:
    policy = config.policy
    if policy == "full":
        return LaneLayout(policy, ("lm", "urgent", "background"),
                          {"lm": config.lm_sms, "background": config.codec_sms, "urgent": None},
                          serialized=False, priority_lane="urgent")
    sms: dict[str, int | None] = {"lm": None, "background": None}
    return LaneLayout(policy, ("lm", "background"), sms, serialized=(policy == "sync"))

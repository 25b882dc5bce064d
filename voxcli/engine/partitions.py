"""SM partitions for the cuda executor: green contexts through `cuda.bindings.driver`.

Two jobs, kept apart so the first is testable anywhere:

1. **SM arithmetic** (`plan_split`, pure). The driver's splitter hands out SMs in groups: on compute
   capability 9.0+ every group is a multiple of 8 SMs (minimum 8), so a request for 100 SMs becomes
   104. We split the device ONCE into equal groups of that granularity and give each partition whole
   groups, which is the only way two partitions out of one split can both be honoured (the outputs of a
   split cannot be split again without an intermediate green context). On a 132-SM H100/H200 that
   gives 96 + 32 with 4 SMs spare, or 104 + 28 where the codec takes 3 groups plus the 4-SM remainder.
   A layout that cannot be granted (100 + 32) is refused with a message listing layouts that can, and
   so is a codec partition made only of the remainder (the driver promises no co-scheduling for it).
   The granularity is the device's own (`minSmPartitionSize`, `smCoscheduledAlignment` of its SM
   resource, `device_granularity`); the compute-capability table is only the fallback when the
   binding does not report them.

2. **Green contexts** (`build_partitions`). The driver call sequence
   `cuDeviceGetDevResource -> cuDevSmResourceSplitByCount -> cuDevResourceGenerateDesc ->
   cuGreenCtxCreate -> cuGreenCtxStreamCreate(priority)`, with the counts the driver actually granted
   read back by `cuGreenCtxGetDevResource`. When green contexts are unavailable (no cuda-bindings,
   driver older than 12.5, a sandbox filtering the calls, MIG) the lanes fall back to plain priority
   streams on the whole device: LOUDLY (a warning naming the reason), ONCE per reason per process,
   and the result says so (`green=False`, `reason`) so status output and benchmarks can show it.

`cuda.bindings` is imported only inside `load_driver()`; tests pass a fake driver module instead.
Nothing here imports torch.cuda state at import time.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

log = logging.getLogger("voxcli.partitions")

_warned_reasons: set[str] = set()


class PartitionError(ValueError):
    """An SM layout this device cannot grant; the message names the request and valid layouts."""


class GreenContextUnavailable(RuntimeError):
    """Green contexts cannot be created here (the message says which call failed and why)."""


# ------------------------------------------------------------------------------------------------
# 1. SM arithmetic
# ------------------------------------------------------------------------------------------------

def sm_granularity(cc_major: int, cc_minor: int = 0) -> tuple[int, int]:
    """(minimum SMs per group, alignment) of `cuDevSmResourceSplitByCount` by compute capability,
    as documented for the driver API: 9.0+ -> (8, 8); 8.x -> (4, 2); older -> (2, 2). Only a fallback:
    `device_granularity` reads the device's own figures, which win whenever the driver reports them."""
    if cc_major >= 9:
        return 8, 8
    if cc_major == 8:
        return 4, 2
    return 2, 2


def round_up_sms(request: int, min_count: int, alignment: int) -> int:
    """What the splitter grants for `request` SMs: at least `min_count`, a multiple of `alignment`."""
    if request < 1:
        raise PartitionError(f"an SM partition needs at least 1 SM, got {request}")
    return max(min_count, alignment * math.ceil(request / alignment))


@dataclass(frozen=True)
class SplitPlan:
    """How one `cuDevSmResourceSplitByCount(groups, sm, 0, group_sms)` call is carved up.

    `lm_groups` / `codec_groups` are counts of equal groups of `group_sms` SMs; `codec_takes_remainder`
    adds the split's remainder (total % group_sms SMs) to the codec partition, which is how 104 + 28
    works on 132 SMs. SMs in no partition (`spare`) stay usable by the whole-device urgent lane."""

    total_sms: int
    group_sms: int
    groups: int
    lm_groups: int
    codec_groups: int
    codec_takes_remainder: bool
    lm_request: int
    codec_request: int

    @property
    def remainder_sms(self) -> int:
        return self.total_sms - self.groups * self.group_sms

    @property
    def lm_sms(self) -> int:
        return self.lm_groups * self.group_sms

    @property
    def codec_sms(self) -> int:
        return self.codec_groups * self.group_sms + (self.remainder_sms if self.codec_takes_remainder else 0)

    @property
    def spare_sms(self) -> int:
        return self.total_sms - self.lm_sms - self.codec_sms

    def describe(self) -> str:
        return (f"backbone {self.lm_sms} SMs (asked {self.lm_request}) + codec {self.codec_sms} SMs "
                f"(asked {self.codec_request}) of {self.total_sms}, {self.spare_sms} spare; "
                f"groups of {self.group_sms}")


def group_size(min_count: int, alignment: int) -> int:
    """SMs per group of the one split: at least `min_count` and a multiple of `alignment`."""
    return max(alignment, 1) * math.ceil(max(min_count, 1) / max(alignment, 1))


def valid_layouts(total_sms: int, min_count: int = 8, alignment: int = 8) -> list[tuple[int, int]]:
    """Every (backbone, codec) pair `plan_split` can grant exactly, largest backbone first. A codec
    partition always holds at least one whole group: the remainder alone carries no co-scheduling
    guarantee, so it never is a partition by itself."""
    g = group_size(min_count, alignment)
    groups, rem = divmod(total_sms, g)
    out = []
    for lm in range(groups, 0, -1):
        left = groups - lm
        out.extend((lm * g, c * g) for c in range(left, 0, -1))
        if rem and left >= 1:
            out.append((lm * g, left * g + rem))
    return sorted(set(out), key=lambda p: (-p[0], -p[1]))


def plan_split(total_sms: int, lm_request: int, codec_request: int, *, min_count: int = 8,
               alignment: int = 8) -> SplitPlan:
    """Round both requests up the way the driver does and check they fit side by side.

    Raises PartitionError naming the rounded counts and a few layouts that would work."""
    if total_sms < 1:
        raise PartitionError(f"the device reports {total_sms} SMs; cannot partition it")
    g = group_size(min_count, alignment)
    groups, rem = divmod(total_sms, g)
    lm_sms = round_up_sms(lm_request, min_count, alignment)
    codec_sms = round_up_sms(codec_request, min_count, alignment)
    lm_groups = math.ceil(lm_sms / g)
    codec_groups = math.ceil(codec_sms / g)
    if lm_groups + codec_groups <= groups:
        return SplitPlan(total_sms, g, groups, lm_groups, codec_groups, False, lm_request, codec_request)
    # The codec may take the leftover groups plus the split's remainder (e.g. 104 + 28 on 132 SMs), but
    # never the remainder alone: the driver makes no co-scheduling promise for it ("unstructured").
    left_groups = groups - lm_groups
    if left_groups >= 1 and rem and left_groups * g + rem >= codec_request:
        return SplitPlan(total_sms, g, groups, lm_groups, left_groups, True, lm_request, codec_request)
    suggestions = ", ".join(f"{a}+{b}" for a, b in _nearby(valid_layouts(total_sms, min_count, alignment),
                                                           lm_request, codec_request))
    raise PartitionError(
        f"cannot split {total_sms} SMs into backbone {lm_request} + codec {codec_request}: the driver "
        f"grants SMs in groups of {g} (minimum {min_count}), so the backbone would get {lm_groups * g} and "
        f"only {max(0, total_sms - lm_groups * g)} would be left for the codec (a codec partition needs at "
        f"least one whole group; the {rem}-SM remainder alone has no co-scheduling guarantee). Set "
        f"lm_sms/codec_sms to a layout that fits, e.g. {suggestions}.")


def _nearby(layouts: list[tuple[int, int]], lm: int, codec: int, n: int = 4) -> list[tuple[int, int]]:
    return sorted(layouts, key=lambda p: abs(p[0] - lm) + abs(p[1] - codec))[:n]


# ------------------------------------------------------------------------------------------------
# 2. Green contexts through the driver
# ------------------------------------------------------------------------------------------------

def load_driver() -> ModuleType:
    """Import `cuda.bindings.driver` (cuda-bindings >= 12.5). Raises GreenContextUnavailable."""
    try:
        import cuda.bindings.driver as driver  # noqa: PLC0415 - lazy on purpose: never on CPU installs
    except Exception as e:  # ImportError, or a broken install raising anything at import
        raise GreenContextUnavailable(
            f"cuda-bindings is not importable ({type(e).__name__}: {e}); install the gpu extra "
            "(pip install 'voxcli[gpu]') with cuda-bindings matching torch's CUDA major") from e
    return driver


def check(driver: Any, result: Any, call: str) -> Any:
    """Unpack a `(CUresult, *outputs)` tuple; raise GreenContextUnavailable naming the call on error."""
    err, *out = result if isinstance(result, tuple) else (result,)
    if err != driver.CUresult.CUDA_SUCCESS:
        try:
            name = driver.cuGetErrorName(err)[1]
            name = name.decode() if isinstance(name, bytes) else str(name)
        except Exception:
            name = "unknown error"
        raise GreenContextUnavailable(f"{call} failed with CUDA driver error {int(err)} ({name})")
    if not out:
        return None
    return out[0] if len(out) == 1 else tuple(out)


def device_granularity(drv: Any, device_index: int) -> tuple[int, int] | None:
    """The device's own (minSmPartitionSize, smCoscheduledAlignment) from its SM resource
    (`cuDeviceGetDevResource(dev, CU_DEV_RESOURCE_TYPE_SM).sm`); None when the binding does not
    expose those fields (older cuda-bindings) or reports zeros. Raises GreenContextUnavailable when the
    query itself fails."""
    check(drv, drv.cuInit(0), "cuInit")
    dev = check(drv, drv.cuDeviceGet(device_index), "cuDeviceGet")
    sm = check(drv, drv.cuDeviceGetDevResource(dev, drv.CUdevResourceType.CU_DEV_RESOURCE_TYPE_SM),
               "cuDeviceGetDevResource")
    try:
        min_size = int(getattr(sm.sm, "minSmPartitionSize", 0) or 0)
        align = int(getattr(sm.sm, "smCoscheduledAlignment", 0) or 0)
    except (TypeError, ValueError):
        return None
    return (min_size, align) if min_size > 0 and align > 0 else None


@dataclass
class LaneStreams:
    """The streams the cuda executor's lanes run on, and what the device actually granted.

    `lm` and `codec` are partition streams (green-context streams wrapped for torch) when `green`,
    else plain priority streams on the whole device. `device` is the whole-device top-priority stream
    for urgent codec work; `prefill` a whole-device stream at the backbone's priority. `priorities`
    maps lane stream -> priority used (lower = more urgent)."""

    lm: Any
    codec: Any
    device: Any
    green: bool
    total_sms: int
    lm_sms: int  # granted (read back from the driver), total_sms when not green
    codec_sms: int
    priorities: dict[str, int]
    plan: SplitPlan | None = None
    prefill: Any = None  # whole-device stream at the backbone's priority (eager prefill)
    reason: str = ""  # why green contexts are not in use ("" when they are)
    # (min SMs per partition, co-scheduling alignment) the split used, and where they came from:
    # "device" (read from the driver) or "cc table" (compute-capability fallback)
    granularity: tuple[int, int] = (0, 0)
    granularity_source: str = ""
    _handles: list[tuple[str, Any]] = field(default_factory=list, repr=False)
    _driver: Any = field(default=None, repr=False)

    def summary(self) -> str:
        if self.green:
            return (f"green contexts: backbone {self.lm_sms} SMs + codec {self.codec_sms} SMs of "
                    f"{self.total_sms} (priorities {self.priorities})")
        return f"plain priority streams on all {self.total_sms} SMs (no SM isolation): {self.reason}"

    def close(self) -> None:
        """Destroy green streams, then their contexts. Graphs captured on them must be released first."""
        handles, self._handles = self._handles, []
        if handles:
            destroy_handles(self._driver, handles)


def warn_fallback_once(reason: str) -> None:
    """Say loudly (log warning) that lanes run without SM isolation, once per distinct reason."""
    if reason in _warned_reasons:
        return
    _warned_reasons.add(reason)
    log.warning("voxcli: green contexts unavailable, falling back to plain priority streams on the "
                "whole GPU (backbone and codec lanes will interfere): %s", reason)


@dataclass
class StreamFactory:
    """How torch streams are made; injected so tests run without CUDA.

    `plain(priority)` -> a whole-device stream; `wrap(handle_int, device_index)` -> a torch stream
    over a driver CUstream; `priority_range()` -> (least, greatest)."""

    plain: Callable[[int], Any]
    wrap: Callable[[int, int], Any]
    priority_range: Callable[[], tuple[int, int]]


def torch_stream_factory(device_index: int = 0) -> StreamFactory:
    import torch  # noqa: PLC0415

    def plain(priority: int) -> Any:
        return torch.cuda.Stream(device=device_index, priority=priority)

    def wrap(handle: int, index: int) -> Any:
        # Priority cannot be passed with an external pointer (torch raises); it was set at creation.
        return torch.cuda.ExternalStream(handle, device=index)

    def prange() -> tuple[int, int]:
        try:
            least, greatest = torch.cuda.Stream.priority_range()
            return int(least), int(greatest)
        except Exception:
            return 0, -1

    return StreamFactory(plain, wrap, prange)


def lane_priorities(least: int, greatest: int) -> dict[str, int]:
    """urgent = greatest; backbone one step below (if the range has room); background codec = least."""
    lm = greatest + 1 if greatest + 1 <= least else greatest
    return {"device": greatest, "lm": lm, "codec": least}


def build_partitions(lm_sms: int, codec_sms: int, *, device_index: int = 0, split: bool = True,
                     driver: Any = None, streams: StreamFactory | None = None,
                     total_sms: int | None = None, cc: tuple[int, int] | None = None) -> LaneStreams:
    """Create the lane streams. With `split` (policy `full`), try green contexts for the backbone and
    codec partitions; on any failure fall back (loudly, once) to plain priority streams.

    `driver` / `streams` / `total_sms` / `cc` are injection points for tests; by default they come
    from `cuda.bindings.driver` and torch.cuda. A layout the device cannot grant raises
    PartitionError (a configuration mistake is not a reason to fall back silently)."""
    if streams is None:
        streams = torch_stream_factory(device_index)
    if total_sms is None or cc is None:
        import torch  # noqa: PLC0415

        props = torch.cuda.get_device_properties(device_index)
        total_sms = total_sms or int(props.multi_processor_count)
        cc = cc or (int(props.major), int(props.minor))
    least, greatest = streams.priority_range()
    prio = lane_priorities(least, greatest)
    granularity, source = sm_granularity(*cc), "cc table"
    drv, driver_error = None, ""
    if split:
        try:
            drv = driver if driver is not None else load_driver()
            reported = device_granularity(drv, device_index)
            if reported is not None:
                granularity, source = reported, "device"
        except GreenContextUnavailable as e:
            driver_error = str(e)
    min_count, alignment = granularity
    # A layout the device cannot grant is the user's to fix: PartitionError, never a silent fallback.
    plan = (plan_split(total_sms, lm_sms, codec_sms, min_count=min_count, alignment=alignment)
            if split else None)

    def fallback(reason: str) -> LaneStreams:
        if split:
            warn_fallback_once(reason)
        lm = streams.plain(prio["lm"])
        return LaneStreams(lm=lm, codec=streams.plain(prio["codec"]), device=streams.plain(prio["device"]),
                           green=False, total_sms=total_sms, lm_sms=total_sms, codec_sms=total_sms,
                           priorities=prio, plan=plan, prefill=lm, reason=reason,
                           granularity=granularity, granularity_source=source)

    if not split:
        return fallback("policy without an SM split")
    if drv is None:
        return fallback(driver_error)
    try:
        res = _green(drv, plan, device_index, prio, streams, total_sms)
    except GreenContextUnavailable as e:
        return fallback(str(e))
    res.granularity, res.granularity_source = granularity, source
    return res


def _green(drv: Any, plan: SplitPlan, device_index: int, prio: dict[str, int], streams: StreamFactory,
           total_sms: int) -> LaneStreams:
    created: list[tuple[str, Any]] = []
    try:
        check(drv, drv.cuInit(0), "cuInit")
        version = check(drv, drv.cuDriverGetVersion(), "cuDriverGetVersion")
        if int(version) < 12050:
            raise GreenContextUnavailable(f"driver CUDA version {int(version)} < 12050: green-context "
                                          "streams with priority (cuGreenCtxStreamCreate) need 12.5+")
        dev = check(drv, drv.cuDeviceGet(device_index), "cuDeviceGet")
        sm_type = drv.CUdevResourceType.CU_DEV_RESOURCE_TYPE_SM
        sm = check(drv, drv.cuDeviceGetDevResource(dev, sm_type), "cuDeviceGetDevResource")
        reported = int(sm.sm.smCount)
        if reported != total_sms:
            # MIG slices and some sandboxes report a different SM resource than the device properties.
            raise GreenContextUnavailable(f"the SM resource has {reported} SMs but the device reports "
                                          f"{total_sms} (MIG or a restricted context?)")
        groups, made, _rest = check(drv, drv.cuDevSmResourceSplitByCount(plan.groups, sm, 0, plan.group_sms),
                                    "cuDevSmResourceSplitByCount")
        made = int(made)
        if made < plan.lm_groups + plan.codec_groups:
            raise GreenContextUnavailable(
                f"cuDevSmResourceSplitByCount made {made} groups of {plan.group_sms} SMs, "
                f"{plan.lm_groups + plan.codec_groups} are needed for {plan.describe()}")
        groups = list(groups)[:made]
        lm_res = groups[:plan.lm_groups]
        codec_res = groups[plan.lm_groups:plan.lm_groups + plan.codec_groups]
        if plan.codec_takes_remainder:
            codec_res = codec_res + [_rest]
        flags = drv.CUgreenCtxCreate_flags.CU_GREEN_CTX_DEFAULT_STREAM
        nonblocking = drv.CUstream_flags.CU_STREAM_NON_BLOCKING
        out: dict[str, tuple[Any, int]] = {}
        for name, res in (("lm", lm_res), ("codec", codec_res)):
            desc = check(drv, drv.cuDevResourceGenerateDesc(res, len(res)), "cuDevResourceGenerateDesc")
            ctx = check(drv, drv.cuGreenCtxCreate(desc, dev, flags), "cuGreenCtxCreate")
            created.append(("ctx", ctx))
            stream = check(drv, drv.cuGreenCtxStreamCreate(ctx, nonblocking, prio[name]),
                           "cuGreenCtxStreamCreate")
            created.append(("stream", stream))
            granted = check(drv, drv.cuGreenCtxGetDevResource(ctx, sm_type), "cuGreenCtxGetDevResource")
            out[name] = (stream, int(granted.sm.smCount))
    except GreenContextUnavailable:
        destroy_handles(drv, created)
        raise
    except Exception as e:  # a binding missing a symbol (AttributeError) or rejecting argument types
        destroy_handles(drv, created)
        raise GreenContextUnavailable(f"green-context call failed: {type(e).__name__}: {e}") from e
    lm_stream = streams.wrap(handle_int(out["lm"][0]), device_index)
    codec_stream = streams.wrap(handle_int(out["codec"][0]), device_index)
    result = LaneStreams(lm=lm_stream, codec=codec_stream, device=streams.plain(prio["device"]), green=True,
                         total_sms=total_sms, lm_sms=out["lm"][1], codec_sms=out["codec"][1], priorities=prio,
                         plan=plan, prefill=streams.plain(prio["lm"]), _handles=created, _driver=drv)
    if (result.lm_sms, result.codec_sms) != (plan.lm_sms, plan.codec_sms):
        log.warning("voxcli: the driver granted backbone %d + codec %d SMs, planned %d + %d",
                    result.lm_sms, result.codec_sms, plan.lm_sms, plan.codec_sms)
    log.info("voxcli: %s", result.summary())
    return result


def handle_int(handle: Any) -> int:
    """A driver handle as the integer torch wants (get_cuda_native_handle where it exists); public: the
    device check wraps streams of its own."""
    try:
        from cuda.bindings.utils import get_cuda_native_handle  # noqa: PLC0415

        return int(get_cuda_native_handle(handle))
    except Exception:
        return int(handle)


def destroy_handles(drv: Any, created: list[tuple[str, Any]]) -> None:
    """Release the green contexts and streams `created` (kind, handle), as a failed build does; public for
    the device check, which builds partitions of its own."""
    # Streams before their contexts: reverse creation order does that.
    for kind, handle in reversed(created):
        try:
            (drv.cuStreamDestroy if kind == "stream" else drv.cuGreenCtxDestroy)(handle)
        except Exception as e:
            log.warning("releasing a half-built green context (%s) failed: %s", kind, e)

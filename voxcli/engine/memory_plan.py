"""The memory plan: how many KV pages and codec slots this device can hold, decided after the weights load.

    budget = measure_budget(device, fraction)          # free memory now x the utilization fraction
    plan = plan_memory(needs, plan_limits(config, needs, max_chunk_frames), budget)
    config, plan = apply_memory_plan(program, config)  # what the engine does: both steps, config updated

The arithmetic (`plan_memory`) is pure: the model program states its per-unit costs (`MemoryNeeds`: bytes
per KV position, per codec slot, per unit of stage workspace), the config its caps (`PlanLimits`), the
device its free bytes (`Budget`), and no tensor is allocated to find the answer, so tests pin the plan
for real model dimensions on any machine.

The rules, in order:
1. usable = free x fraction. Free is measured after the weights are on the device: GPU free memory
   (cudaMemGetInfo) or the host's MemAvailable (/proc/meminfo: what can be allocated without swapping).
   The fraction leaves the rest to the OS and other programs (default: 0.90 of a GPU, 0.50 of the RAM).
2. Stage workspaces come off the top: weights the program still loads (a codec loaded on first use), one
   prefill batch's activations (the worst case: all `max_prefill_tokens` in one row, so the attention
   mask term is quadratic), the largest decode batch's per-row activations and the largest codec
   batch's per-frame activations. They are kept free, not allocated.
3. Codec slots: the config's `codec_slots`, but never more than a tenth of what is left (a slot is
   small next to a request's KV; the guard bites on a small machine with the serving recipe's 256).
4. KV pages: the rest, divided by what one pooled position costs (its K/V in every layer plus the
   eager attention's dense gather of one layer, which grows with the positions in use), capped by
   what `max_running` rows at the context bound need (`max_prefill_tokens + max_frames + 1` positions
   each, plus the model's own extra positions per row) and by the config's `kv_pages`.
5. Codec state that grows with a request (`codec_state_bytes_per_frame`: CosyVoice 3's DiT keys/values of
   every Euler step, ~3.6 MB per mel frame at real size in fp32) gets a byte budget: what is left after
   the slot table is split between the KV pool and that state in proportion to what one request at the
   context bound needs of each, the KV pool keeping at least one such request's pages, and a KV pool
   capped below its share gives the rest to the state (capped by `codec_state_gb` when set). The
   scheduler reserves each request's worst-case state (its own frame cap: a short text reserves little)
   against the budget when it takes a slot, so a long utterance waits for room, or is refused with the
   numbers when it could never fit, instead of exhausting memory mid-request.
6. At least one request's worth of KV (one request at the context bound, every sequence of a CFG pair) and
   two codec slots must fit, else `MemoryPlanError` says so with the numbers, before anything is
   allocated. (A codec state budget below one request at the frame cap is not an error: shorter requests
   still fit; the summary line names the budget.)

Per role (config.role, a disaggregated placement: engine/roles.py) the plan sizes only the role's pool:
- lm: KV pages only. No codec slot, no codec workspace and no codec weights still to load (the LM never
  decodes audio): everything the codec would have had goes to KV (up to the caps of rule 4).
- codec: codec slots only. No KV pool, no prefill or decode workspace: the slots take all that is left
  (no 10% guard), up to the config's `codec_slots`. Growing codec state (rule 5) gets the byte budget the
  slots leave, the slots leaving at least one request's state at the frame cap where memory allows (capped
  by `codec_state_gb` when set); the codec engine reserves each request's worst case (sent by its LM
  engine with the chunks) against it, as the both engine does.

Both pools get one extra unit (a scratch page and a scratch slot that graph padding writes into); the
plan counts their bytes. On a CPU the programs allocate the pools with calloc (models/device_memory.py),
so the plan is a ceiling: a page becomes resident when it is first written.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from voxcli.config import ConfigError
from voxcli.models.device_memory import device_free, host_available

if TYPE_CHECKING:
    from voxcli.config import EngineConfig
    from voxcli.models.base import MemoryNeeds, ModelProgram

# Default share of the free memory the plan may use when `memory_fraction` is 0 (per device kind):
# vLLM's default GPU utilization is 0.90; a CPU host also runs the OS, its page cache and the user's
# other programs, so half of what is available.
DEFAULT_FRACTION = {"cuda": 0.90, "cpu": 0.50}
SLOT_SHARE = 0.10  # codec slots never take more than this share of what is left after the workspaces
GB = 1e9


class MemoryPlanError(ConfigError):
    """The model cannot hold one request's worth of KV and codec state in the memory this device has."""


@dataclass(frozen=True)
class Budget:
    """Free bytes on the device right now (after the weights) and the share of them the plan may use."""

    device: str  # "cpu" | "cuda"
    free_bytes: int
    fraction: float

    @property
    def usable_bytes(self) -> int:
        return int(self.free_bytes * self.fraction)

    def describe(self) -> str:
        what = "free GPU memory" if self.device == "cuda" else "available RAM"
        return f"{self.fraction:.0%} of {self.free_bytes / GB:.1f} GB {what}"


@dataclass(frozen=True)
class PlanLimits:
    """What the config allows: caps, never sizes (0 = no cap of its own)."""

    page_size: int
    kv_pages_cap: int
    codec_slots_cap: int  # >= 1
    max_running: int  # decode rows in flight
    row_positions: int  # KV positions one row may reach: the context bound
    prefill_tokens: int  # positions in one prefill batch at most
    decode_rows: int  # rows of the largest decode batch
    codec_frames: int  # frames of the largest codec batch (items x the largest chunk)
    frames: int = 0  # frames one request may reach (max_frames): its codec state at the cap
    state_cap_bytes: int = 0  # the config's codec_state_gb in bytes (0 = no cap of its own)


@dataclass(frozen=True)
class MemoryPlan:
    pages: int  # KV pages the engine hands out (the program allocates one more: the scratch page)
    page_size: int
    slots: int  # codec slots the engine hands out (plus one scratch slot)
    kv_bytes: int  # the KV pool, scratch page included
    slot_bytes: int  # the codec slot table, scratch slot included
    workspace_bytes: int  # stage workspaces and weights still to load, kept free
    budget: Budget
    limited_by: str  # what set the count of the role's pool: "memory", "max_running x context", "kv_pages"
    # (pages; role both, lm) or "memory", "codec_slots" (slots; role codec)
    role: str = "both"
    state_bytes: int = 0  # budget for per-request codec state that grows with the request (0: none)

    @property
    def positions(self) -> int:
        return self.pages * self.page_size

    @property
    def total_bytes(self) -> int:
        return self.kv_bytes + self.slot_bytes + self.state_bytes + self.workspace_bytes

    def summary(self) -> str:
        """One line: pages, positions, slots and bytes (the serve startup line, the verbose timing line)."""
        tail = (f"workspaces {self.workspace_bytes / GB:.2f} GB; {self.total_bytes / GB:.2f} GB of "
                f"{self.budget.usable_bytes / GB:.2f} GB usable ({self.budget.describe()})")
        if self.role == "lm":
            return (f"memory plan (role lm): {self.pages:,} KV pages x {self.page_size} = "
                    f"{self.positions:,} positions ({self.kv_bytes / GB:.2f} GB, set by {self.limited_by}), "
                    f"no codec slots; {tail}")
        if self.role == "codec":
            return (f"memory plan (role codec): no KV pool, {self.slots:,} codec slots "
                    f"({self.slot_bytes / GB:.2f} GB, set by {self.limited_by}){self._state()}; {tail}")
        return (f"memory plan: {self.pages:,} KV pages x {self.page_size} = {self.positions:,} positions "
                f"({self.kv_bytes / GB:.2f} GB, set by {self.limited_by}), {self.slots:,} codec slots "
                f"({self.slot_bytes / GB:.2f} GB){self._state()}, workspaces "
                f"{self.workspace_bytes / GB:.2f} GB; "
                f"{self.total_bytes / GB:.2f} GB of {self.budget.usable_bytes / GB:.2f} GB usable "
                f"({self.budget.describe()})")

    def _state(self) -> str:
        return f", codec state {self.state_bytes / GB:.2f} GB" if self.state_bytes else ""


def request_state_bytes(needs: MemoryNeeds, frames: int) -> int:
    """Codec state one default request holds at `frames` frames (its voice prompt's frames included)."""
    return needs.codec_state_bytes_per_frame * (frames + needs.codec_state_prefix_frames)


def position_bytes(needs: MemoryNeeds) -> int:
    """What one pooled position costs: its K/V plus its share of the eager attention's dense gather."""
    return needs.kv_bytes_per_position + needs.gather_bytes_per_position


def workspace_bytes(needs: MemoryNeeds, limits: PlanLimits, role: str = "both") -> int:
    """What the role's stages keep free: the LM's (prefill, decode) unless role codec, the codec's (its
    batch, its weights still to load) unless role lm."""
    t = limits.prefill_tokens
    lm = t * needs.prefill_bytes_per_token + t * t * needs.prefill_bytes_per_token_pair \
        + limits.decode_rows * needs.decode_bytes_per_row
    codec = needs.pending_weight_bytes + limits.codec_frames * needs.codec_bytes_per_frame
    return (0 if role == "codec" else lm) + (0 if role == "lm" else codec)


def plan_memory(needs: MemoryNeeds, limits: PlanLimits, budget: Budget, role: str = "both") -> MemoryPlan:
    """The plan (see the module docstring); raises MemoryPlanError when one request does not fit."""
    if role not in ("both", "lm", "codec"):
        raise ValueError(f"role must be one of both, lm, codec, got {role!r}")
    if role == "codec":
        return _plan_codec(needs, limits, budget)
    if role == "lm":  # no codec state: the slot costs nothing here, the codec's workspace is not kept
        needs = dataclasses.replace(needs, codec_slot_bytes=0)
    per_pos = position_bytes(needs)
    page_bytes = limits.page_size * per_pos
    work = workspace_bytes(needs, limits, role)
    rest = budget.usable_bytes - work
    rows = max(1, needs.rows_per_request)
    one_request_pages = rows * math.ceil(limits.row_positions / limits.page_size)
    # role lm keeps no codec state (role codec's: _plan_codec)
    state_one = 0 if role == "lm" else request_state_bytes(needs, limits.frames)
    one_request = (one_request_pages + 1) * page_bytes + 2 * needs.codec_slot_bytes
    if rest < one_request:
        raise MemoryPlanError(
            f"the model needs {work / GB:.2f} GB of workspaces plus {one_request / GB:.2f} GB for one "
            f"request's KV and codec state ({rows * limits.row_positions:,} positions at "
            f"{per_pos / 1e3:.1f} kB each), but only {budget.usable_bytes / GB:.2f} GB is usable "
            f"({budget.describe()}); free memory, lower max_frames / max_prefill_tokens, raise "
            f"memory_fraction or use dtype=bfloat16")
    # a request keeps its slot while the codec drains its tail after its rows are gone, so slots are not
    # bounded by max_running: the config's count, as far as memory allows
    want_slots = 0 if role == "lm" else limits.codec_slots_cap
    if want_slots and needs.codec_slot_bytes:
        want_slots = min(want_slots, max(1, int(rest * SLOT_SHARE) // needs.codec_slot_bytes - 1))
    slot_total = (want_slots + 1) * needs.codec_slot_bytes if want_slots else 0
    left = rest - slot_total
    state = 0
    if state_one:  # rule 5: KV and growing codec state share what is left as one request needs them
        kv_one = (one_request_pages + 1) * page_bytes
        state = min(left * state_one // (state_one + kv_one), left - kv_one)
        if limits.state_cap_bytes:
            state = min(state, limits.state_cap_bytes)
    fit = (left - state) // page_bytes - 1  # the scratch page
    caps = {"memory": fit,
            "max_running x context": limits.max_running * math.ceil(limits.row_positions / limits.page_size)}
    if limits.kv_pages_cap:
        caps["kv_pages"] = limits.kv_pages_cap
    limited_by = min(caps, key=lambda k: caps[k])
    pages = int(caps[limited_by])
    if state_one and limited_by != "memory":  # a capped KV pool leaves its share to the codec state
        spare = left - (pages + 1) * page_bytes
        state = min(spare, limits.state_cap_bytes) if limits.state_cap_bytes else spare
    return MemoryPlan(pages=pages, page_size=limits.page_size, slots=want_slots,
                      kv_bytes=(pages + 1) * limits.page_size * needs.kv_bytes_per_position,
                      slot_bytes=slot_total, workspace_bytes=work + (pages + 1) * limits.page_size
                      * needs.gather_bytes_per_position, budget=budget, limited_by=limited_by, role=role,
                      state_bytes=int(state))


def _plan_codec(needs: MemoryNeeds, limits: PlanLimits, budget: Budget) -> MemoryPlan:
    """Role codec: no KV pool; the codec slots take what the codec's workspaces leave (rule 3's share
    guard is for sharing with KV, and there is none here), up to the config's count, less one request's
    growing state at the frame cap where it has any (rule 5): that state gets the rest."""
    work = workspace_bytes(needs, limits, "codec")
    rest = budget.usable_bytes - work
    per_slot = needs.codec_slot_bytes
    if rest < 2 * per_slot:
        raise MemoryPlanError(
            f"a codec-only engine needs {work / GB:.2f} GB of codec workspaces plus "
            f"{2 * per_slot / GB:.2f} GB for one request's codec slot (and the scratch slot), but only "
            f"{budget.usable_bytes / GB:.2f} GB is usable ({budget.describe()}); free memory or raise "
            f"memory_fraction")
    state_one = request_state_bytes(needs, limits.frames)
    # the slots leave one request's state at the cap, if two slots still fit beside it (else that state
    # budget is smaller: shorter requests fit, as in the both plan)
    for_slots = rest - state_one if rest - state_one >= 2 * per_slot else rest
    fit = for_slots // per_slot - 1 if per_slot else limits.codec_slots_cap  # less the scratch slot
    limited_by = "memory" if fit < limits.codec_slots_cap else "codec_slots"
    slots = int(min(fit, limits.codec_slots_cap))
    state = 0
    if state_one:
        state = rest - (slots + 1) * per_slot
        if limits.state_cap_bytes:
            state = min(state, limits.state_cap_bytes)
    return MemoryPlan(pages=0, page_size=limits.page_size, slots=slots, kv_bytes=0,
                      slot_bytes=(slots + 1) * per_slot, workspace_bytes=work, budget=budget,
                      limited_by=limited_by, role="codec", state_bytes=int(state))


def plan_limits(config: EngineConfig, needs: MemoryNeeds, max_chunk_frames: int) -> PlanLimits:
    """The caps `config` puts on the plan. The context bound of a row is the longest prompt one prefill
    batch admits plus the frame cap plus the step's own position (what `resource_limits` allows)."""
    rows = config.max_running
    decode_rows = max([b for b in config.decode_buckets if b <= rows] or [min(config.decode_buckets)])
    codec_items = max(max(config.background_buckets), max(config.urgent_buckets))
    return PlanLimits(
        page_size=config.kv_page_size, kv_pages_cap=config.kv_pages, codec_slots_cap=config.codec_slots,
        max_running=rows,
        row_positions=config.max_prefill_tokens + config.max_frames + 1 + needs.extra_positions_per_row,
        prefill_tokens=config.max_prefill_tokens, decode_rows=decode_rows,
        codec_frames=codec_items * max_chunk_frames, frames=config.max_frames,
        state_cap_bytes=int(config.codec_state_gb * GB))


# --- measuring the device --------------------------------------------------------------------------------
def mem_available(meminfo: Path = Path("/proc/meminfo")) -> int:
    """The host's available RAM in bytes (MemAvailable); a ConfigError when the host does not say."""
    free = host_available(meminfo)
    if free is None:
        raise ConfigError(f"cannot tell how much memory is available ({meminfo} is unreadable and the "
                          "C library does not say), so the KV pool cannot be sized")
    return free


def measure_budget(device: str, fraction: float) -> Budget:
    """Free memory of `device` ("cpu", "cuda", "cuda:N") now, times `fraction` (0 = the device default)."""
    kind = "cuda" if device.startswith("cuda") else "cpu"
    fraction = fraction or DEFAULT_FRACTION[kind]
    free = device_free(device) if kind == "cuda" else mem_available()
    return Budget(device=kind, free_bytes=free, fraction=fraction)


def apply_memory_plan(program: ModelProgram, config: EngineConfig) -> tuple[EngineConfig, MemoryPlan | None]:
    """The config with `kv_pages` / `codec_slots` set by the plan for `program` on `config.device` (a
    resolved device, chunk schedule in force), and the plan; unchanged and None for a program without
    device memory."""
    needs = program.memory_needs()
    if needs is None:
        return config, None
    chunk = config.chunk or program.spec.chunk
    limits = plan_limits(config, needs, max(chunk.first, *chunk.ramp, chunk.steady))
    role = config.role
    plan = plan_memory(needs, limits, measure_budget(config.device, config.memory_fraction), role)
    # a role's absent pool keeps the config's count: nothing allocates it (Engine skips its init)
    if role == "lm":
        return config.replace(kv_pages=plan.pages), plan
    if role == "codec":
        return config.replace(codec_slots=plan.slots, codec_state_gb=plan.state_bytes / GB), plan
    return config.replace(kv_pages=plan.pages, codec_slots=plan.slots,
                          codec_state_gb=plan.state_bytes / GB), plan

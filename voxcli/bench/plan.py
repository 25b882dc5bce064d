"""An experiment plan: candidates x workloads x rates x seeds on the simulator, read from a TOML file
(voxcli/bench/plans/*.toml, or any file) and run by `vox bench --plan NAME|FILE` (voxcli/bench/plan_run.py).

Contract: `load_plan` returns a `Plan` whose every field is checked (unknown keys, rates, arrivals, tables,
overload references are errors naming the file and the key), or raises `PlanError` with one sentence.
`Plan.runs()` lists the sweeps in order; `Plan.config(candidate)` builds a candidate's EngineConfig (a
ConfigError there names the bad override). Nothing here runs an engine.

The format (every key but `title` and `[[candidates]]` optional; a candidate's keys override the plan's):

    title = "Which policy should ship"
    model = "qwen3-tts-1.7b"       # base = "recipe": the model's shipped recipe (what vox bench reads)
    base = "recipe"                # or "defaults": EngineConfig's defaults (the paper's bare config)
    gpu = "h100"
    set = ["sim_model=honest"]     # engine overrides for every candidate, as `--set`
    workloads = ["libritts"]
    rates = "39:81:3"              # or a table by workload: [rates] libritts = "39:81:3"
    duration = 60.0                # seconds of arrivals per rate and seed
    seeds = 3
    warmup = 64
    arrivals = "by-rate"           # or "by-index" (vox bench's; see SweepSpec.arrivals)
    stop_below = 0.9               # also stop after the first rate whose pooled attainment is under this
    reference = "paper"            # the capacity table's ratio column
    tables = ["capacity"]          # capacity (with the bound), rates (every rate: SLO, late-chunk counts)
    report = "sweep"               # or "breakdown": one seed per rate, where TTFA goes (bench/breakdown.py)

    [[candidates]]
    name = "paper"
    set = { admission = "deadline", lm_sms = 96, codec_sms = 32, "chunk.first" = 10 }
    rates = { libritts = "38:62:4" }   # its own range; also model, gpu, base, workloads, sweep = false

    [overload]                     # then offer multiples of a 90% capacity
    multiples = [1.5, 2.0]
    candidates = ["recipe"]        # default: every swept candidate
    capacity_of = ""               # "": each its own; a candidate's name: that one's (per workload)
    seeds = 0                      # 0: the plan's
    warmup = 64
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from voxcli.bench.sweep import ARRIVALS, parse_rates
from voxcli.config import EngineConfig

TABLES = ("capacity", "rates")
REPORTS = ("sweep", "breakdown")
BASES = ("recipe", "defaults")
PLAN_KEYS = {"title", "about", "model", "base", "gpu", "set", "workloads", "rates", "duration", "seeds",
             "seed", "warmup", "arrivals", "stop_below", "stop_rule", "reference", "tables", "report",
             "candidates", "overload"}
CANDIDATE_KEYS = {"name", "set", "model", "gpu", "base", "workloads", "rates", "sweep"}
OVERLOAD_KEYS = {"multiples", "candidates", "capacity_of", "seeds", "warmup"}


class PlanError(ValueError):
    """A plan that cannot run, in one sentence naming the file and the key."""


@dataclass(frozen=True)
class Candidate:
    """One line of the tables: a config (base + model + gpu + overrides) swept on its workloads."""

    name: str
    overrides: dict[str, Any]
    model: str
    gpu: str
    base: str
    workloads: tuple[str, ...]
    rates: dict[str, str]  # workload -> rates text ("*" for every workload)
    sweep: bool = True  # False: only offered past capacity ([overload])

    def rates_for(self, workload: str) -> list[float]:
        return parse_rates(self.rates.get(workload) or self.rates["*"])


@dataclass(frozen=True)
class Overload:
    multiples: tuple[float, ...]
    candidates: tuple[str, ...]
    capacity_of: str = ""
    seeds: int = 0
    warmup: int = 64


@dataclass(frozen=True)
class Plan:
    path: Path
    title: str
    about: str
    shared: tuple[str, ...]  # `set` for every candidate
    duration: float
    seeds: int
    seed: int
    warmup: int
    arrivals: str
    stop_below: float | None
    stop_rule: bool
    reference: str
    tables: tuple[str, ...]
    report: str
    candidates: tuple[Candidate, ...]
    overload: Overload | None = None

    @property
    def name(self) -> str:
        return self.path.stem

    def runs(self) -> list[tuple[Candidate, str]]:
        """(candidate, workload) of every sweep, workload by workload in the plan's order."""
        order = list(dict.fromkeys(w for c in self.candidates for w in c.workloads))
        return [(c, w) for w in order for c in self.candidates if c.sweep and w in c.workloads]

    def candidate(self, name: str) -> Candidate:
        return next(c for c in self.candidates if c.name == name)

    def config(self, c: Candidate) -> EngineConfig:
        """The candidate's engine settings: its base, the plan's `set`, then its own overrides."""
        if c.base == "recipe":
            from voxcli.bench.targets import model_config

            cfg = model_config(c.model, "sim", c.gpu, list(self.shared))
        else:
            cfg = EngineConfig(executor="sim", gpu=c.gpu, **({"model": c.model} if c.model else {}))
            cfg = cfg.with_overrides(list(self.shared))
        return cfg.with_overrides(_lists_as_tuples(c.overrides))


def _lists_as_tuples(overrides: dict[str, Any]) -> dict[str, Any]:
    """TOML arrays are lists; EngineConfig's sequences (buckets, a chunk ramp) are tuples."""
    return {k: tuple(v) if isinstance(v, list) else v for k, v in overrides.items()}


def _fail(path: Path, message: str) -> PlanError:
    return PlanError(f"plan {path}: {message}")


def _unknown(path: Path, where: str, table: dict[str, Any], known: set[str]) -> None:
    extra = sorted(set(table) - known)
    if extra:
        raise _fail(path, f"{where}: unknown key(s) {', '.join(extra)}; known: {', '.join(sorted(known))}")


def _rates_table(path: Path, where: str, value: Any) -> dict[str, str]:
    """`rates` as a table by workload ("*": all); every entry parsed here so a typo fails before a run."""
    table = dict(value) if isinstance(value, dict) else {"*": value} if value not in (None, "") else {}
    for wl, text in table.items():
        try:
            parse_rates(str(text))
        except ValueError as e:
            raise _fail(path, f"{where} rates of {wl}: {e}") from None
    return {k: str(v) for k, v in table.items()}


def _parse_override(text: str) -> tuple[str, Any]:
    """`key=value` from `--plan-set`, the value a TOML scalar or array (`seeds=1`, `workloads=["chat"]`)."""
    key, sep, raw = text.partition("=")
    if not sep:
        raise PlanError(f"--plan-set {text!r}: use key=value (e.g. duration=5)")
    try:
        value = tomllib.loads(f"v = {raw}")["v"]
    except tomllib.TOMLDecodeError:
        value = raw  # a bare word: a string
    return key.strip(), value


def apply_overrides(data: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    """The plan's table with `--plan-set key=value` on top: a plan key, `rates.WORKLOAD`, or `only`
    (comma-separated candidate names to keep)."""
    data = dict(data)
    for text in overrides:
        key, value = _parse_override(text)
        if key == "only":
            keep = set(str(value).split(","))
            data["candidates"] = [c for c in data.get("candidates", []) if c.get("name") in keep]
            if not data["candidates"]:
                raise PlanError(f"--plan-set only={value}: no candidate of the plan has that name")
            if data.get("reference") not in keep:  # the ratio column's reference was left out
                data.pop("reference", None)
            if "candidates" in data.get("overload", {}):
                data["overload"] = {**data["overload"],
                                    "candidates": [n for n in data["overload"]["candidates"] if n in keep]}
        elif key.startswith("rates."):
            rates = data.get("rates", {})
            data["rates"] = {**({"*": rates} if isinstance(rates, str) else rates), key[6:]: str(value)}
            for c in data.get("candidates", []):  # the command line beats a candidate's own range too
                if isinstance(c.get("rates"), dict):
                    c["rates"] = {k: v for k, v in c["rates"].items() if k != key[6:]}
        else:
            data[key] = value
    return data


# The shipped plans: package data beside this module, so an installed wheel finds them by name as well.
SHIPPED_PLANS = Path(__file__).resolve().parent / "plans"
# Where the plans lived before they became package data: `--plan experiments/late_chunks.toml` in older
# notes and recipe comments still names the same shipped plan.
OLD_PLAN_FOLDER = Path("experiments")


def plan_path(path: Path) -> Path:
    """`path` itself when it is a file; else a shipped plan by its name, so that `--plan late_chunks`,
    `late_chunks.toml` and the old repository-relative `experiments/late_chunks.toml` work from any folder.
    A path into another folder is never redirected: its absence is an error naming it."""
    path = Path(path)
    if path.is_file() or path.parent not in (Path("."), OLD_PLAN_FOLDER):
        return path
    shipped = SHIPPED_PLANS / (path.name if path.suffix == ".toml" else f"{path.name}.toml")
    return shipped if shipped.is_file() else path


def load_plan(path: Path, overrides: list[str] | None = None) -> Plan:
    """Read and check the plan at `path`, or the shipped plan of that name (`plan_path`); `overrides`:
    `--plan-set key=value` on top."""
    path = plan_path(path)
    try:
        data = tomllib.loads(path.read_text())
    except OSError as e:
        raise PlanError(f"cannot read plan {path}: {e.strerror or e}") from None
    except tomllib.TOMLDecodeError as e:
        raise _fail(path, f"not valid TOML: {e}") from None
    data = apply_overrides(data, overrides or [])
    _unknown(path, "the plan", data, PLAN_KEYS)
    if not data.get("candidates"):
        raise _fail(path, "no [[candidates]]: a plan sweeps at least one")
    workloads = tuple(data.get("workloads", ["libritts"]))
    rates = _rates_table(path, "the plan's", data.get("rates", "2:60:2"))
    defaults = {"model": data.get("model", ""), "gpu": data.get("gpu", "h100"),
                "base": data.get("base", "recipe")}
    cands = [_candidate(path, raw, defaults, workloads, rates) for raw in data["candidates"]]
    names = [c.name for c in cands]
    if len(set(names)) != len(names):
        raise _fail(path, f"candidate names repeat: {', '.join(n for n in names if names.count(n) > 1)}")
    plan = Plan(path=path, title=str(data.get("title", path.stem)), about=str(data.get("about", "")),
                shared=tuple(str(s) for s in data.get("set", [])), duration=float(data.get("duration", 60.0)),
                seeds=int(data.get("seeds", 3)), seed=int(data.get("seed", 0)),
                warmup=int(data.get("warmup", 64)), arrivals=str(data.get("arrivals", "by-index")),
                stop_below=data.get("stop_below"), stop_rule=bool(data.get("stop_rule", True)),
                reference=str(data.get("reference", "")), tables=tuple(data.get("tables", ["capacity"])),
                report=str(data.get("report", "sweep")), candidates=tuple(cands))
    _check(plan)
    if "overload" in data:
        plan = replace(plan, overload=_overload(plan, data["overload"]))
    return plan


def _candidate(path: Path, raw: dict[str, Any], defaults: dict[str, str], workloads: tuple[str, ...],
               rates: dict[str, str]) -> Candidate:
    if "name" not in raw:
        raise _fail(path, "a candidate has no name")
    where = f"candidate {raw['name']!r}"
    _unknown(path, where, raw, CANDIDATE_KEYS)
    own = _rates_table(path, where, raw.get("rates", {}))
    base = raw.get("base", defaults["base"])
    model = raw.get("model", defaults["model"])
    if base not in BASES:
        raise _fail(path, f"{where}: base {base!r} is neither {' nor '.join(BASES)}")
    if base == "recipe" and not model:
        raise _fail(path, f"{where}: base = \"recipe\" needs a model (the recipe's name)")
    return Candidate(name=str(raw["name"]), overrides=dict(raw.get("set", {})), model=model,
                     gpu=raw.get("gpu", defaults["gpu"]), base=base,
                     workloads=tuple(raw.get("workloads", workloads)), rates={**rates, **own},
                     sweep=bool(raw.get("sweep", True)))


def _check(plan: Plan) -> None:
    def bad(message: str) -> PlanError:
        return _fail(plan.path, message)

    if plan.duration <= 0 or plan.seeds < 1 or plan.warmup < 0 or plan.seed < 0:
        raise bad("duration must be > 0 s, seeds >= 1, warmup and seed >= 0")
    if plan.arrivals not in ARRIVALS:
        raise bad(f"arrivals {plan.arrivals!r} is neither {' nor '.join(ARRIVALS)}")
    if plan.report not in REPORTS:
        raise bad(f"report {plan.report!r} is neither {' nor '.join(REPORTS)}")
    if unknown := [t for t in plan.tables if t not in TABLES]:
        raise bad(f"tables {unknown}: known tables are {', '.join(TABLES)}")
    if plan.stop_below is not None and not 0 < plan.stop_below <= 1:
        raise bad(f"stop_below must be a fraction in (0, 1], got {plan.stop_below}")
    if plan.reference and plan.reference not in {c.name for c in plan.candidates}:
        raise bad(f"reference {plan.reference!r} names no candidate")
    for c in plan.candidates:
        missing = [w for w in c.workloads if w not in c.rates and "*" not in c.rates]
        if missing:
            raise bad(f"candidate {c.name!r}: no rates for {', '.join(missing)}")


def _overload(plan: Plan, raw: dict[str, Any]) -> Overload:
    _unknown(plan.path, "[overload]", raw, OVERLOAD_KEYS)
    names = {c.name for c in plan.candidates}
    swept = [c.name for c in plan.candidates if c.sweep]
    over = Overload(multiples=tuple(float(m) for m in raw.get("multiples", [])),
                    candidates=tuple(raw.get("candidates", swept)),
                    capacity_of=str(raw.get("capacity_of", "")),
                    seeds=int(raw.get("seeds", 0)), warmup=int(raw.get("warmup", 64)))
    if not over.multiples or any(m <= 0 for m in over.multiples):
        raise _fail(plan.path, "[overload] multiples must be a non-empty list of numbers > 0")
    if unknown := [n for n in over.candidates if n not in names]:
        raise _fail(plan.path, f"[overload] candidates {unknown} are not candidates of the plan")
    if over.capacity_of and over.capacity_of not in swept:
        raise _fail(plan.path, f"[overload] capacity_of {over.capacity_of!r} is no swept candidate")
    if not over.capacity_of and (own := [n for n in over.candidates if n not in swept]):
        raise _fail(plan.path, f"[overload] {own} are not swept, so have no capacity of their own: "
                    "give capacity_of")
    return over

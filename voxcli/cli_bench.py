"""`vox bench` and `vox profile`, registered on the main Typer app by `voxcli.cli` via `register(app)`: the
command-line layer over measurement (voxcli/bench/: sweeps, plans, reports) and simulation (voxcli/sim/:
the split and placement models, the bounds). Options, their checks and the printing live here.

Heavy imports (the engine, torch, matplotlib) happen inside the commands so `vox --help` stays fast."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from voxcli.bench.audio_in import SHARE_HELP as AUDIO_IN_SHARE_HELP
from voxcli.models.registry import default_model

# the registry's default model recipe for the sim (the size the GPU cost profiles were calibrated on)
SIM_DEFAULT_MODEL = default_model(simulated=True)

BENCH_HELP = """Open-loop SLO sweep: Poisson arrivals on an absolute schedule, attainment per offered rate
(TTFA <= 200 ms and no stall >= 10 ms; rejected/failed requests are misses), capacity at 90% / 99%.
"""

PROFILE_HELP = """Per-stage latency per batch and SM count, the backbone/codec SM split, GPU placements.

On a CUDA machine (no --gpu) the stages of --model are measured; elsewhere --gpu loads a calibrated
profile. Prints the tables, plots backbone vs codec throughput per split against time sharing, names
the chosen split and writes an engine recipe with it.
"""


MAX_REQUESTS_PER_RATE = 1_000_000  # rate x duration x seeds beyond this is a typo, and would not fit memory
PLOT_HINT = "plots need matplotlib: pip install 'voxcli[plot]' (or pass --no-plot)"


def _fail(message: str) -> None:
    typer.echo(f"vox: error: {message}", err=True)
    raise typer.Exit(2)


def _console():
    from voxcli.bench.report import table_console

    return table_console()


def _finite(name: str, value: float, lo: float, strict: bool = True) -> None:
    import math

    if not math.isfinite(value) or (value <= lo if strict else value < lo):
        _fail(f"{name} must be a finite number {'above' if strict else 'of at least'} {lo:g}, got {value}")


def _check_out(out: Path) -> None:
    """--out must be (or become) a directory: checked before any work, created only when results exist."""
    if out.exists() and not out.is_dir():
        _fail(f"--out {out} is a file; give a directory for the results")
    parent = out
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        _fail(f"--out {out}: {parent} is a file; give a directory for the results")


def _load_workload(workload: str):
    from voxcli.bench.workloads import WorkloadError, load_workload

    try:
        return load_workload(workload)
    except WorkloadError as e:
        _fail(str(e))
    except UnicodeDecodeError:
        _fail(f"--workload {workload} is not UTF-8 text; give an id<TAB>text file in UTF-8")
    except OSError as e:
        _fail(f"cannot read --workload {workload}: {e.strerror or e}")


def _has_matplotlib() -> bool:
    import importlib.util

    return importlib.util.find_spec("matplotlib") is not None


def bench(
    executor: Annotated[
        str, typer.Option(help="sim (virtual time over a GPU cost profile), cpu or cuda.")
    ] = "sim",
    gpu: Annotated[str, typer.Option(help="Cost profile for the sim: h100, h200 or b200.")] = "",
    model: Annotated[
        str | None,
        typer.Option(
            help="A model recipe (qwen3-tts-1.7b), a checkpoint path/hub id, or "
            f"cpu-bench (random-weight Qwen3-TTS sized for this CPU). Default: {SIM_DEFAULT_MODEL}, or the "
            "model --recipe names."
        ),
    ] = None,
    recipe: Annotated[
        str | None,
        typer.Option(help="Engine recipe (a TOML file such as the one `vox profile` writes, or a shipped "
                     "recipe name); its model is benched unless --model names one."),
    ] = None,
    policy: Annotated[str, typer.Option(help="Comma-separated policies: full, sync2, lanes, sync.")] = "full",
    rates: Annotated[str, typer.Option(help="Offered rates in req/s: start:stop:step or a list.")] = "2:60:2",
    duration: Annotated[float, typer.Option(help="Seconds of arrivals per rate.")] = 60.0,
    workload: Annotated[
        str,
        typer.Option(help="libritts, seed-tts, libritts-long (15-60 s paragraphs), chat (short replies), "
                     "or an id<TAB>text file."),
    ] = "libritts",
    audio_in_share: Annotated[float, typer.Option(help=AUDIO_IN_SHARE_HELP)] = 0.0,
    seed: Annotated[int, typer.Option(help="Arrival/order seed.")] = 0,
    seeds: Annotated[
        int, typer.Option(help="Arrival seeds per rate: capacity is reported as their mean and spread.")
    ] = 3,
    warmup: Annotated[int, typer.Option(help="Uncounted warm-up burst size (0 = none).")] = 64,
    timeout: Annotated[float, typer.Option(help="Max seconds to wait for a rate's last requests.")] = 900.0,
    frames_scale: Annotated[float, typer.Option(help="Scale the estimated output lengths.")] = 1.0,
    max_frames: Annotated[int, typer.Option(help="Cap each request's frames (0 = no cap).")] = 0,
    no_stop: Annotated[bool, typer.Option("--no-stop", help="Run every rate (no stop rule).")] = False,
    ttfa_slo: Annotated[float, typer.Option("--ttfa-slo", help="The SLO's TTFA bound in seconds (a model "
                                            "that writes text before it speaks cannot meet 0.2).")] = 0.2,
    set_: Annotated[
        list[str] | None, typer.Option("--set", help="Engine override key=value (repeatable).")
    ] = None,
    out: Annotated[Path, typer.Option(help="Directory for the JSON and PNG results.")] = Path("out/bench"),
    plot: Annotated[bool, typer.Option(help="Write the PNG plots.")] = True,
    url: Annotated[
        str, typer.Option(help="Drive a running `vox serve` at this URL instead of an in-process engine.")
    ] = "",
    api_key: Annotated[str | None, typer.Option("--api-key", envvar="VOX_API_KEY",
                                                help="Bearer key for --url.")] = None,
    compare: Annotated[bool, typer.Option(help="With --url and --executor sim: also run the in-process "
                                          "engine on the real-time simulated GPU, same workload, same run.")]
    = True,
    plan: Annotated[Path | None, typer.Option(help="Run an experiment plan on the sim: a shipped plan's name "
                                              "(late_chunks, sweep_policies, ...) or a TOML file, "
                                              "instead of the options above; --out gets its JSON.")] = None,
    plan_set: Annotated[
        list[str] | None, typer.Option("--plan-set", help="Override a plan key, e.g. duration=5, seeds=1, "
                                       "rates.libritts=40:50:5, only=recipe,paper (repeatable).")
    ] = None,
) -> None:
    if plan is not None:
        return _run_plan(plan, plan_set or [], out)

    from voxcli.bench.audio_in import share_refusal
    from voxcli.bench.report import (
        audio_in_tables,
        bench_stem,
        bound_table,
        capacity_table,
        late_chunk_tables,
        model_slug,
        rate_tables,
        write_json,
    )
    from voxcli.bench.report import plot as plot_sweep
    from voxcli.bench.sweep import SweepSpec, Variant, parse_rates, run_sweep
    from voxcli.bench.targets import cpu_bench_checkpoint, engine_target, model_config, sim_target
    from voxcli.console import friendly_errors
    from voxcli.models.registry import sim_spec_for

    console = _console()
    with friendly_errors():
        try:
            rate_list = parse_rates(rates)
        except ValueError as e:
            _fail(str(e))
        _finite("--duration", duration, 0.0)
        _finite("--ttfa-slo", ttfa_slo, 0.0)
        _finite("--timeout", timeout, 0.0)
        _finite("--frames-scale", frames_scale, 0.0)
        for name, value, lo in (("--seeds", seeds, 1), ("--warmup", warmup, 0),
                                ("--max-frames", max_frames, 0), ("--seed", seed, 0)):
            if value < lo:
                _fail(f"{name} must be at least {lo}, got {value}")
        if max(rate_list) * duration * seeds > MAX_REQUESTS_PER_RATE:
            _fail(f"--rates up to {max(rate_list):g} req/s for --duration {duration:g} s x --seeds {seeds} "
                  f"sends more than {MAX_REQUESTS_PER_RATE:,} requests per rate; lower them")
        if warmup > MAX_REQUESTS_PER_RATE:
            _fail(f"--warmup must be at most {MAX_REQUESTS_PER_RATE:,}, got {warmup}")
        _check_out(out)
        if (why := share_refusal(audio_in_share, "url" if url else executor,
                                 model or (Path(recipe).stem if recipe else SIM_DEFAULT_MODEL))) is not None:
            _fail(why)
        names = [p.strip() for p in policy.split(",") if p.strip()]
        if not names:
            _fail(f"--policy {policy!r} names no policy; give one or more of full, sync2, lanes, sync")
        if executor not in ("sim", "cpu", "cuda"):
            _fail(f"--executor must be sim, cpu or cuda, got {executor!r}")
        if executor == "sim" and not gpu and not recipe and not (url and not compare):
            _fail("--executor sim needs --gpu h100, h200 or b200 (the cost profile to simulate)")
        if executor == "cuda":
            import torch

            if not torch.cuda.is_available():  # else: an AssertionError deep inside the model load
                _fail(
                    f"--executor cuda needs a CUDA GPU, but torch {torch.__version__} sees none (CUDA "
                    f"build: {torch.version.cuda or 'none'}): run on a GPU machine, or use --executor cpu, "
                    "or --executor sim --gpu h100"
                )
        if recipe is not None and url and executor != "sim":
            _fail("--recipe sets up an in-process engine; with --url the server's own recipe decides (give "
                  "it to `vox serve --recipe`)")
        if recipe is not None:
            from voxcli.config import recipe_path

            recipe_path(recipe)  # a missing file is one sentence, before anything else
        # for the file names: "cpu-bench", not the folder it is built in; a recipe file by its name
        model_name = model or (model_slug(Path(recipe).stem) if recipe else SIM_DEFAULT_MODEL)
        if model is None and recipe is None:
            model = SIM_DEFAULT_MODEL
        if model == "cpu-bench":
            model = str(cpu_bench_checkpoint(Path(".cache")))
        config = model_config(model, executor, gpu, set_, recipe=recipe)
        if executor == "sim" and not config.gpu and not (url and not compare):
            _fail("--executor sim needs --gpu h100, h200 or b200 (the cost profile to simulate)")
        # what the sim names its model by (a model recipe: the --recipe file itself), else the checkpoint
        model = recipe if recipe is not None and executor == "sim" else (model or config.model)
        if url:
            from voxcli.bench.http_target import url_sweep_targets

            names, make_url_target = url_sweep_targets(url, api_key, executor, config.gpu, model, set_,
                                                        compare, seed)
        for name in [] if url else names:
            config.replace(policy=name)  # a clear ConfigError for an unknown policy, before any run
        utts = _load_workload(workload)
        program = None
        if executor != "sim" and not url:  # --url: the server has the model
            from voxcli.models import load_model

            program = load_model(config.model, config.device, config.dtype)
        # Frames per second of audio: the loaded model's, or (sim) its family's registered sim spec.
        frame_rate = program.spec.frame_rate if program is not None else sim_spec_for(config.model).frame_rate
        spec = SweepSpec(
            rates=rate_list,
            duration_s=duration,
            seed=seed,
            seeds=seeds,
            warmup=warmup,
            timeout_s=timeout,
            frames_scale=frames_scale,
            max_frames=max_frames or None,
            stop_rule=not no_stop,
            frame_rate=frame_rate,
            ttfa_target_s=ttfa_slo,
            audio_in_share=audio_in_share,
        )

        def make_target(v: Variant):
            if url:
                return make_url_target(v)
            if executor == "sim":
                return sim_target(config, v, seed)
            return engine_target(config, v, seed, program=program)

        def progress(sw, r) -> None:
            console.print(
                f"[dim]{sw.variant.label:8s} {r.rate:6g} req/s: {r.attainment * 100:5.1f}% SLO, "
                f"p99 TTFA {(r.ttfa_p99 or 0) * 1e3:6.0f} ms, {r.completed_rps:5.1f} done/s[/dim]"
            )

        meta = {
            "executor": executor,
            "gpu": config.gpu if executor == "sim" else gpu,
            "model": model,
            "workload": workload,
            "policies": names,
            "config": {k: v for k, v in config.to_dict().items() if k != "chunk"},
        }
        variants = [Variant(n) for n in names] if url else [Variant.policy(n) for n in names]
        meta["bounds"] = _bounds(config, variants, utts, spec) if executor == "sim" and not url else {}
        if url:
            meta.update(url=url, executor=f"{executor} (real time)" if executor == "sim" else executor)
        if url and len(variants) > 1:  # side by side: the variants take turns at each rate
            from voxcli.bench.http_target import run_paired_sweep

            result = run_paired_sweep(make_target, variants, spec, utts, meta, progress)
        else:
            result = run_sweep(make_target, variants, spec, utts, meta, progress)
        for t in rate_tables(result) + audio_in_tables(result) + late_chunk_tables(result):
            console.print(t)
        console.print(capacity_table(result))
        if (bounds := bound_table(result)) is not None:
            console.print(bounds)
        stem = bench_stem(model_name, executor, config.gpu if executor == "sim" else gpu, bool(url))
        console.print(f"JSON: {write_json(result, out / f'{stem}.json')}")
        if plot and _has_matplotlib():
            title = f"{model} on {executor} {meta['gpu']}"
            console.print(f"plot: {plot_sweep(result, out / f'{stem}.png', title)}")
        elif plot:
            console.print(f"no plot: {PLOT_HINT}", markup=False)


def _run_plan(path: Path, overrides: list[str], out: Path) -> None:
    """`vox bench --plan FILE`: check the plan, run it (voxcli/bench/plan_run.py), print its tables and
    write out/<plan>.json."""
    import json

    from voxcli.bench.plan import PlanError, load_plan
    from voxcli.bench.plan_run import run_plan
    from voxcli.console import friendly_errors

    with friendly_errors():
        _check_out(out)
        try:
            loaded = load_plan(path, overrides)
        except PlanError as e:
            _fail(str(e))
        console = _console()

        def say(what) -> None:  # a line or a figure table; plan and candidate names are text, not markup
            console.print(what, markup=False, highlight=False)

        say(f"plan {loaded.name}: {loaded.title}")
        say(f"  {len(loaded.runs())} sweeps, {loaded.seeds} seeds x {loaded.duration:g} s per rate")
        result = run_plan(loaded, say)
        out.mkdir(parents=True, exist_ok=True)
        dest = out / f"plan-{loaded.name}.json"
        dest.write_text(json.dumps(result, indent=1, default=str))
        say(f"JSON: {dest}")


def _bounds(config, variants, utts, spec) -> dict:
    """Each variant's capacity bound (voxcli/sim/bound.py) as a dict, by label, for the capacity table."""
    from dataclasses import asdict

    from voxcli.sim.config_bound import config_bound

    out = {}
    for v in variants:
        b = config_bound(config.with_overrides(v.overrides), utts, spec.frame_rate, spec.frames_scale,
                         spec.max_frames, ttfa_s=spec.ttfa_target_s)
        if b is not None:
            out[v.label] = asdict(b)
    return out


def profile(
    gpu: Annotated[
        str,
        typer.Option(
            help="Load recipes/gpus/<gpu>.toml (h100, h200, b200) instead of measuring on a CUDA device."
        ),
    ] = "",
    model: Annotated[str, typer.Option(help="Model recipe name or checkpoint.")] = SIM_DEFAULT_MODEL,
    target_rate: Annotated[
        float, typer.Option(help="Target load in req/s (0 = the highest load some split sustains).")
    ] = 0.0,
    workload: Annotated[str, typer.Option(help="Workload whose lengths define the load.")] = "libritts",
    gpus: Annotated[int, typer.Option(help="Rank placements of roles over this many GPUs.")] = 1,
    simulate: Annotated[
        bool,
        typer.Option(help="Choose the split by simulating the best candidates (as `vox bench` would) "
                     "instead of by their capacity bound alone."),
    ] = True,
    keep: Annotated[int, typer.Option(help="Candidates (the highest bounds) kept for simulation.")] = 4,
    sim_rates: Annotated[
        str, typer.Option(help="Offered rates of each simulated sweep (start:stop:step or a list; "
                          "default: a quarter of the best bound, then steps of 1/20 of it or finer from "
                          "half the bound to 1.25x).")
    ] = "",
    sim_duration: Annotated[float, typer.Option(help="Seconds of arrivals per rate (simulation).")] = 10.0,
    sim_seeds: Annotated[int, typer.Option(help="Arrival seeds per rate in the simulation.")] = 3,
    placements: Annotated[
        int, typer.Option(help="With --gpus N > 1: simulate this many placements (the best by the "
                          "throughput model, N x both among them) for their SLO capacity; 0 = rank by the "
                          "model alone.")
    ] = 3,
    set_: Annotated[
        list[str] | None, typer.Option("--set", help="Engine override key=value (repeatable), applied to the "
                                       "model's recipe before anything is chosen (e.g. max_running=4).")
    ] = None,
    out: Annotated[Path, typer.Option(help="Directory for the plot, the recipe and the JSON.")] = Path(
        "out/profile"
    ),
) -> None:
    import json

    from voxcli.bench.workloads import estimate_frames
    from voxcli.config import ConfigError, model_recipe_config
    from voxcli.console import friendly_errors
    from voxcli.models.registry import sim_spec_for
    from voxcli.sim.config_bound import SplitBounds
    from voxcli.sim.cost import CostProfile
    from voxcli.sim.splits import (
        choose_split,
        load_shape,
        max_sustainable_rate,
        plot_splits,
        profile_tables,
        rank_placements,
        recipe_text,
        role_throughputs,
        split_points,
        split_table,
        summary_dict,
        time_sharing,
    )

    console = _console()
    with friendly_errors():
        if gpus < 1:
            _fail(f"--gpus must be >= 1, got {gpus}")
        if placements < 0:
            _fail(f"--placements must be >= 0, got {placements}")
        sets = list(set_ or [])
        _finite("--target-rate", target_rate, 0.0, strict=False)
        _check_profile_model(model)
        _check_out(out)
        if not gpu:
            import torch

            if not torch.cuda.is_available():
                _fail("vox profile measures the stages on a CUDA GPU and this machine has none; pass --gpu "
                      "h100, h200 or b200 to use a calibrated cost profile")
        if gpu:
            from voxcli.sim.splits import gpu_profile_path

            try:
                path = gpu_profile_path(model, gpu)
            except ConfigError:
                _fail(f"no cost profile for --gpu {gpu!r}: use h100, h200 or b200 (recipes/gpus/)")
            prof = CostProfile.from_toml(path)
            source = f"{path.name} (calibrated)"
        else:
            from voxcli.bench.cuda_profile import measure_cuda_profile, write_profile

            data = measure_cuda_profile(model)
            prof = CostProfile.from_dict(data)
            gpu = "measured"
            prof_path = write_profile(data, out / "gpus" / "measured.toml")
            source = f"measured on {data['gpu']['name']} -> {prof_path}"
        utts = _load_workload(workload)
        sim = sim_spec_for(model)  # the model family's frame rate and the chunks its profiles assume
        # The config every split runs with: the model's own recipe (what `vox bench` runs), --set applied,
        # only the split changed. The bound of that config decides "keeps up", the target load and the
        # simulated rates, and that config is what the recipe file holds: one set of assumptions throughout.
        base, base_recipe = model_recipe_config(model)
        base = base.with_overrides(sets)
        # a --set cap on running rows caps the decode batch the throughput model assumes too
        capped = any(s.startswith("max_running=") for s in sets)
        cap = {"max_decode_batch": base.max_running} if capped else {}
        # each request's frames cut by the model's own chunk schedule: the codec's cost per chunk
        shape = load_shape([estimate_frames(u.text, sim.frame_rate) for u in utts], sim.chunk, **cap)
        frames = shape.frames_per_request
        console.print(f"[bold]{model}[/bold] on [bold]{prof.name}[/bold] ({prof.sms} SMs) from {source}")
        console.print(
            f"load shape ({workload}): {frames:.1f} frames and {shape.chunks_per_request:.2f} chunks "
            f"per request (first {shape.first_chunk_frames} frames, then {shape.frames_per_chunk} per "
            "background chunk on average)"
        )
        for t in profile_tables(prof, shape):
            console.print(t)
        bounds = SplitBounds(base, utts, sim.frame_rate, profile=prof)
        best_bound = max_sustainable_rate(prof, shape, capacities=bounds.capacities)
        rate = target_rate or best_bound
        points = split_points(prof, rate, shape, capacities=bounds.capacities)
        chosen = choose_split(points)
        simulated = None
        if simulate:
            simulated, tried, step = _simulate_splits(console, prof, gpu, model, workload, utts, points, keep,
                                                      sim_rates, sim_duration, sim_seeds, best_bound, bounds,
                                                      sets)
            chosen = simulated.point
        console.print(split_table(points, chosen, rate, "the capacity bound (voxcli/sim/bound.py) of the "
                                  "recipe with that split"))  # after the choice: * marks the split chosen
        from voxcli.sim.config_bound import split_bounds_table

        console.print(split_bounds_table(bounds, points))
        out.mkdir(parents=True, exist_ok=True)
        stem = f"{Path(model).name}-{gpu}"
        png = plot_splits(
            points,
            time_sharing(prof, rate, shape),
            chosen,
            out / f"{stem}-splits.png",
            f"{model} on {prof.name} at {rate:.1f} req/s",
        ) if _has_matplotlib() else None
        recipe = out / f"{stem}.toml"
        recipe.write_text(recipe_text(model, gpu, chosen, rate, base, base_recipe, sets))
        summary = summary_dict(points, chosen, rate)
        if simulated is not None:
            summary["simulated"] = {"chosen": simulated.to_dict(), "candidates": [t.to_dict() for t in tried],
                                    "rate_step": step}
            from voxcli.bench.report import capacity_cell

            console.print(
                f"chosen split: {chosen.described}: the highest simulated capacity, "
                f"{capacity_cell(simulated.sweep, 0.90)} req/s at 90% and "
                f"{capacity_cell(simulated.sweep, 0.99)} at 99% (bound: {chosen.sustainable_rps:.1f} req/s)"
            )
        else:
            note = "" if chosen.keeps_up else " (no split sustains this load)"
            console.print(
                f"chosen split: {chosen.described} at a target load of {rate:.1f} req/s: backbone bound "
                f"{chosen.lm_capacity_rps:.1f} req/s, "
                f"codec bound {chosen.codec_capacity_rps:.1f} req/s{note}"
            )
        if not target_rate and simulated is None:
            console.print(
                "[dim]target load = the highest bound of any split (an upper bound); pass "
                "--target-rate with your expected load to size the split for it[/dim]"
            )
        if gpus > 1:
            roles = role_throughputs(prof, chosen, shape)
            ranked = rank_placements(roles, gpus)
            console.print(
                f"per-GPU role throughput (req/s): both {roles['both']:.1f}, LM-only "
                f"{roles['lm_only']:.1f}, codec-only {roles['codec_only']:.1f}"
            )
            for i, p in enumerate(ranked[:8], 1):
                console.print(f"  {i}. {p.describe():40s} {p.rps:7.1f} req/s")
            summary["placements"] = [{"placement": p.describe(), "rps": p.rps} for p in ranked]
            if placements and simulate:
                from voxcli.bench.targets import model_config

                config = model_config(model, "sim", gpu if gpu != "measured" else "", sets).replace(
                    policy="full", lm_sms=chosen.lm_sms, codec_sms=chosen.codec_sms)
                summary["placements_simulated"] = _simulate_placements(
                    console, config, prof, ranked, gpus, placements, utts, sim_duration, sim_seeds,
                    sim.frame_rate)
        (out / f"{stem}.json").write_text(json.dumps(summary, indent=1))
        console.print(f"plot: {png if png is not None else 'none; ' + PLOT_HINT.split(' (or')[0]}",
                      markup=False)
        # unwrapped, one command a line: pasted from an 80-column terminal they still run
        slo = f" --ttfa-slo {base.ttfa_target_s:g}" if base.ttfa_target_s != 0.2 else ""  # the SLO it met
        sim_line = f"  vox bench --gpu {gpu}{slo} --recipe {recipe}\n"  # the sim is bench's default executor
        bench_line = sim_line if gpu != "measured" else ""
        typer.echo(f"recipe with this split: {recipe}\n{bench_line}  vox serve --recipe {recipe}")


def _check_profile_model(model: str) -> None:
    """The model names the recipe `vox profile` writes: a shipped recipe, a checkpoint folder or a known
    hub id; anything else would write a recipe for a model that does not exist."""
    from voxcli.config import ConfigError, recipe_path
    from voxcli.models import known_models

    try:
        recipe_path(model)
        return
    except ConfigError:
        pass
    if model in known_models() or (Path(model) / "config.json").is_file():
        return
    meant_as_folder = model.startswith(("/", ".", "~")) or model.count("/") > 1
    if meant_as_folder and not Path(model).expanduser().exists():
        _fail(f"--model folder {model} does not exist; give a checkpoint folder, a shipped recipe (e.g. "
              "qwen3-tts-1.7b) or a known model id")
    _fail(f"--model {model!r} is neither a shipped recipe (e.g. qwen3-tts-1.7b), a known model id nor a "
          "checkpoint folder")


def _simulate_placements(console, config, prof, ranked, gpus: int, top: int, utts, duration: float,
                         seeds: int, frame_rate: float) -> list[dict]:
    """Last pass of `vox profile --gpus N`: the best placements' SLO capacities (voxcli/sim/placement.py)."""
    from voxcli.sim.profile_placements import candidates, placement_table, predict_placements, summary

    runs = candidates(ranked, gpus, top)
    console.print(f"simulating {len(runs)} placements with the chosen split, each engine as `vox serve "
                  "--placement` runs it, under an optimistic and a pessimistic network:", markup=False)

    def starting(what: str) -> None:
        typer.echo(f"vox profile: simulating placement {what}", err=True)

    def rate_done(sw, r) -> None:
        typer.echo(f"vox profile:   {sw.variant.label} at {r.rate:g} req/s: {r.attainment * 100:.1f}% SLO",
                   err=True)

    rows = predict_placements(config, runs, utts, duration, seeds, frame_rate, prof, starting, rate_done)
    console.print(placement_table(rows, gpus, duration, seeds))
    best = rows[0]
    console.print(f"best placement by SLO capacity: {best[0].describe()} (`vox serve --placement "
                  f"{best[0].describe()}`)", markup=False)
    return summary(rows)


def _simulate_splits(console, prof, gpu: str, model: str, workload: str, utts, points, keep: int,
                     sim_rates: str, duration: float, seeds: int, best_rps: float, bounds,
                     sets: list[str] | None = None):
    """Second pass of `vox profile`: simulate the best `keep` splits by their bound (voxcli/bench/
    split_search.py) on a rate grid fine enough for the bound; returns (the one with the highest simulated
    capacity, all of them, the grid's step)."""
    from voxcli.bench.sweep import SweepSpec, parse_rates
    from voxcli.bench.targets import model_config, sim_target
    from voxcli.sim.split_search import (
        bound_notes,
        choose_simulated,
        prune,
        rate_grid,
        simulate_splits,
        simulated_table,
    )

    if keep < 1:
        _fail(f"--keep must be >= 1, got {keep}")
    if seeds < 1:
        _fail(f"--sim-seeds must be >= 1, got {seeds}")
    if duration <= 0:
        _fail(f"--sim-duration must be > 0 s, got {duration}")
    if best_rps <= 0:
        _fail(f"no split of {prof.name} serves {model} within the TTFA target (every split's capacity bound "
              "is 0 req/s); nothing to simulate")
    try:
        if sim_rates:
            rates = parse_rates(sim_rates)
            step = min((b - a for a, b in zip(rates, rates[1:], strict=False)), default=rates[0])
        else:
            rates, step = rate_grid(best_rps)
    except ValueError as e:
        _fail(f"--sim-rates: {e}")
    # ", " between the rates: a terminal wraps the list between two rates, never inside one (a grid of 20
    # rates written with bare commas is one 100-character word, which rich cuts at the terminal's edge)
    text = ", ".join(f"{r:g}" for r in rates)
    config = model_config(model, "sim", gpu if gpu != "measured" else "", sets)
    from voxcli.models.registry import sim_spec_for

    # request lengths at the model's own frame rate, as `vox bench` sets them
    # the SLO of the recipe (its TTFA target), as the bound of every split counts it (SplitBounds)
    spec = SweepSpec(rates=rates, duration_s=duration, seeds=seeds, frame_rate=sim_spec_for(model).frame_rate,
                     ttfa_target_s=bounds.ttfa_s)
    slo = f" --ttfa-slo {bounds.ttfa_s:g}" if bounds.ttfa_s != 0.2 else ""
    candidates = prune(points, keep)
    own = [p for p in points if p.codec_sms == config.codec_sms]  # the recipe's own split: a baseline
    if own and own[0] not in candidates:
        candidates = sorted([*candidates, own[0]], key=lambda p: p.codec_sms)
    console.print(f"simulating {len(candidates)} splits, each as `vox bench --executor sim --gpu {gpu} "
                  f"--model {model} --workload {workload} --rates R --duration {duration:g} --seeds {seeds}"
                  f"{slo} --set lm_sms=L --set codec_sms=C` runs it, at R = {text} req/s:", markup=False)

    # progress on stderr while it runs (minutes for a full profile): a line per split, then per rate
    def starting(i: int, n: int, p) -> None:
        typer.echo(f"vox profile: simulating split {i}/{n}: {p.name} ({len(rates)} rates x {seeds} seeds)",
                   err=True)

    def rate_done(sw, r) -> None:
        typer.echo(f"vox profile:   {sw.variant.label} at {r.rate:g} req/s: {r.attainment * 100:.1f}% SLO",
                   err=True)

    tried = simulate_splits(config, candidates, utts, spec,
                            lambda cfg, v: sim_target(cfg, v, 0, profile=prof), None, starting, rate_done)
    console.print(simulated_table(tried, bounds, step))  # each split's capacity beside its bound
    for note in bound_notes(tried, bounds, duration):
        console.print(f"  {note}", markup=False)
    return choose_simulated(tried), tried, step


BENCH_EXAMPLES = (
    "vox bench --executor sim --gpu h100 --model qwen3-tts-1.7b --policy full,sync2,lanes,sync "
    "--rates 30,50 --duration 15 --seeds 1",
    "# the real engine on this CPU, with the offline demo model",
    "vox bench --executor cpu --model demo --policy sync,full --rates 0.5,1 --duration 5 --seeds 1 "
    "--warmup 2 --max-frames 24",
    "# a running `vox serve --executor sim --gpu h100`, beside the same engine in-process",
    "vox bench --url http://127.0.0.1:8000 --executor sim --gpu h100 --rates 10,20 --duration 10 --seeds 1",
    "# a shipped experiment plan, by name from any folder: candidates x workloads x rates",
    "vox bench --plan late_chunks --plan-set duration=5 --plan-set seeds=1",
)
PROFILE_EXAMPLES = (
    "vox profile --gpu h100 --model qwen3-tts-1.7b --keep 2 --sim-rates 48,64,80 --sim-seeds 1",
    "vox profile --gpu h100 --model qwen3-tts-1.7b --gpus 2 --set max_running=4 --keep 1 --sim-seeds 1 "
    "--sim-duration 5 --placements 1",
    # uncapped b200 engines serve hundreds of req/s: simulating them takes minutes, so rank by the bounds
    "vox profile --gpu b200 --model qwen3-tts-1.7b --gpus 4 --no-simulate",
)


def register(app: typer.Typer) -> None:
    from voxcli.console import with_examples

    app.command("bench", help=BENCH_HELP, cls=with_examples(*BENCH_EXAMPLES))(bench)
    app.command("profile", help=PROFILE_HELP, cls=with_examples(*PROFILE_EXAMPLES))(profile)

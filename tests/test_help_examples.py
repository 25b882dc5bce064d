"""Every example in every `--help` runs when pasted (issue 32, item 3): rendered at 80 and 200 columns,
each example is one whole line after the `Examples:` heading (never wrapped or padded by rich: no
trailing spaces, no `\\` continuation), a shell line `shlex` parses, and every `vox ...` command in it is
one the CLI accepts (a dry parse of its arguments, nothing run). The curl example of `vox serve` is one
command whose JSON body parses."""

from __future__ import annotations

import functools
import json
import shlex
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from voxcli import cli
from voxcli.console import EXAMPLES_HEADING

ROOT = Path(__file__).resolve().parents[1]


def all_commands() -> list[list[str]]:
    """Every command and subcommand of `vox`, walked from the Typer app (a new command is covered here the
    day it is registered)."""
    out: list[list[str]] = []

    def walk(command, path: list[str]) -> None:
        out.append(path)
        for name, sub in sorted(getattr(command, "commands", {}).items()):
            walk(sub, [*path, name])

    walk(typer.main.get_command(cli.app), [])
    return out


COMMANDS = all_commands()
# the checkout's own folders: a path into one works only from the repository root (`experiments/` was
# where the plans lived); `out/` is where commands write, relative to wherever they run
REPO_FOLDERS = {p.name for p in ROOT.iterdir() if p.is_dir() and not p.name.startswith(".")} - {"out"} | {
    "experiments"}


def render_help(command: list[str], width: int) -> str:
    result = CliRunner().invoke(cli.app, [*command, "--help"], env={"COLUMNS": str(width), "TERM": "xterm"})
    assert result.exit_code == 0, result.output
    return result.stdout


def examples(help_text: str) -> list[str]:
    lines = help_text.splitlines()
    assert lines.count(EXAMPLES_HEADING) == 1, help_text
    out = []
    for line in lines[lines.index(EXAMPLES_HEADING) + 1:]:
        if not line.strip():
            break
        out.append(line)
    return out


def commands_in(line: str) -> list[list[str]]:
    """The simple commands of a shell line (split at |, ;, &&, redirections dropped with their target)."""
    lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    lexer.commenters = "#"
    words = list(lexer)
    out: list[list[str]] = [[]]
    skip = False
    for w in words:
        if skip:
            skip = False
            continue
        if w in ("|", ";", "&&", "||"):
            out.append([])
        elif w in (">", ">>", "<"):
            skip = True
        else:
            out[-1].append(w)
    return [c for c in out if c]


@functools.cache
def vox_command():
    return typer.main.get_command(cli.app)


def dry_parse(args: list[str]) -> None:
    """Parse `vox ARGS` as the CLI would (options, their values' types, arguments), running nothing."""
    command = vox_command()
    ctx = command.make_context("vox", list(args))
    while hasattr(command, "resolve_command"):
        rest = [*getattr(ctx, "_protected_args", []), *ctx.args]
        if not rest:
            break
        name, command, rest = command.resolve_command(ctx, rest)
        ctx = command.make_context(name, rest, parent=ctx)
    assert not ctx.args, (args, ctx.args)  # nothing left over


def test_the_walk_finds_every_command():
    assert {" ".join(c) for c in COMMANDS} >= {"", "say", "batch", "voices", "models", "models pull", "serve",
                                               "bench", "profile", "transcribe", "reply"}


def repo_paths(words: list[str]) -> list[str]:
    """The words of a command that name a path inside the checkout, relative to its root."""
    return [w for w in words if "/" in w and "://" not in w and not w.startswith(("/", "~"))
            and (w.split("/")[0] in REPO_FOLDERS or (ROOT / w).exists())]


def test_the_repo_path_check_can_fail():
    assert repo_paths(["vox", "bench", "--plan", "experiments/late_chunks.toml"])
    assert repo_paths(["vox", "bench", "--recipe", "recipes/qwen3-tts-1.7b.toml"])
    assert not repo_paths(["vox", "batch", "-m", "demo", "lines.txt", "-o", "out/", "http://x/y"])


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c) or "vox")
def test_no_example_names_a_path_of_the_checkout(command):
    """Pasted from any folder (a user's home, /tmp), an example must work: none reads a file that exists only
    at the repository's root."""
    for line in examples(render_help(command, 200)):
        for words in commands_in(line.strip()):
            assert not repo_paths(words), (line, repo_paths(words))


@pytest.mark.parametrize("width", [80, 200])
@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c) or "vox")
def test_every_help_example_pastes_and_parses(command, width):
    lines = examples(render_help(command, width))
    runnable = [x for x in lines if not x.strip().startswith("#")]
    assert runnable, command
    for line in lines:
        assert line == line.rstrip(), f"trailing spaces: {line!r}"
        assert line.startswith("  ") and not line.rstrip().endswith("\\"), line
        for words in commands_in(line.strip()):
            if words[0] == "vox":
                dry_parse(words[1:])


def test_the_curl_example_is_one_command_with_a_json_body():
    lines = [x.strip() for x in examples(render_help(["serve"], 80)) if "curl" in x]
    assert len(lines) == 1
    words = shlex.split(lines[0])
    assert words[0] == "curl" and words[words.index("-o") + 1] == "hello.wav"
    body = json.loads(words[words.index("-d") + 1])
    assert body["input"] and body["model"] == "demo"
    assert "localhost:8000/v1/audio/speech" in lines[0]


def test_the_dry_parse_catches_what_the_cli_refuses():
    """The check itself can fail: an unknown flag or a bad number is refused by the dry parse."""
    with pytest.raises(Exception):  # noqa: B017 - click's own usage error classes
        dry_parse(["say", "--no-such-flag", "hi"])
    with pytest.raises(Exception):  # noqa: B017
        dry_parse(["say", "--seed", "many", "hi"])


def simulated_seconds(words: list[str]) -> float:
    """What a `vox bench` example asks the engine to run: rates x seeds x policies x seconds of arrivals
    (the CLI's defaults: 60 s, 3 seeds, one policy), the measure of its wall time on the sim or a CPU."""
    from voxcli.bench.sweep import parse_rates

    def opt(name: str, default: str) -> str:
        return words[words.index(name) + 1] if name in words else default
    rates = len(parse_rates(opt("--rates", "1")))
    return rates * int(opt("--seeds", "3")) * len(opt("--policy", "full").split(",")) * float(
        opt("--duration", "60"))


def test_bench_examples_are_sized_to_finish_in_about_a_minute():
    """Issue 42: `--rates 2:60:2` (794 s here) and the cpu-bench example (over 15 min) were examples; the
    cpu-bench checkpoint alone takes ~50 s to build on 2 loaded cores, so the cpu example runs the demo."""
    from voxcli.cli_bench import BENCH_EXAMPLES

    sized = [shlex.split(x) for x in BENCH_EXAMPLES if x.startswith("vox bench") and "--plan" not in x]
    assert sized
    for words in sized:
        budget = 40 if "cpu" in words else 200  # the cpu executor runs the real engine, paced by the clock
        assert simulated_seconds(words) <= budget, " ".join(words)


def test_the_plan_example_works_from_any_folder(tmp_path, monkeypatch):
    from voxcli.bench.plan import PlanError, load_plan
    from voxcli.cli_bench import BENCH_EXAMPLES

    monkeypatch.chdir(tmp_path)
    (line,) = [shlex.split(x) for x in BENCH_EXAMPLES if "--plan" in x]
    name = line[line.index("--plan") + 1]
    shipped = load_plan(Path(name))
    assert load_plan(Path(f"experiments/{shipped.path.name}")).path == shipped.path
    assert load_plan(Path(shipped.path.name)).path == shipped.path
    with pytest.raises(PlanError, match="cannot read plan"):
        load_plan(Path("elsewhere") / shipped.path.name)  # another folder is never redirected

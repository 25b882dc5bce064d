"""Run the `vox` CLI in-process against ONE loaded demo model (tests that call it hundreds of times).

`DemoHarness.run(args, input=...)` invokes the real Typer app with CliRunner; model loading is replaced by
a factory that builds a fresh Engine (the real cpu executor, the real config from the CLI flags) over
the demo program loaded once. Everything the CLI validates before a model load runs unchanged."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from voxcli import cli, console, session


@dataclass
class Outcome:
    code: int
    stdout: bytes
    stderr: str
    exception: BaseException | None


class DemoHarness:
    def __init__(self, cache: Path) -> None:
        self._cache_before = os.environ.get("VOX_CACHE")  # close() puts it back for the tests after
        os.environ["VOX_CACHE"] = str(cache)
        from voxcli.models import load_model

        self.program = load_model("demo")
        self.engines = 0
        # Building the click command from the Typer app is most of an in-process call's cost (it
        # introspects every signature): build it once and hand CliRunner the same command each time.
        import typer.main
        import typer.testing

        self._command = typer.main.get_command(cli.app)
        self._saved = typer.testing._get_command  # type: ignore[attr-defined]
        typer.testing._get_command = self._get_command  # type: ignore[attr-defined]

    def close(self) -> None:
        import typer.testing

        typer.testing._get_command = self._saved  # type: ignore[attr-defined]
        if self._cache_before is None:
            os.environ.pop("VOX_CACHE", None)
        else:
            os.environ["VOX_CACHE"] = self._cache_before

    def _get_command(self, app: Any) -> Any:
        import typer.main

        return self._command if app is cli.app else typer.main.get_command(app)

    def factory(self, config: Any) -> Any:
        from voxcli.engine.admission_check import program_check
        from voxcli.engine.engine import Engine

        if config.model != "demo":  # anything else goes the real way (and fails the real way)
            return session.default_engine_factory(config)
        self.engines += 1
        return session.Session(engine=Engine(self.program, config), spec=self.program.spec, model="demo",
                               check=program_check(self.program))  # the sessions' own check

    def run(self, args: list[str], input: bytes | str | None = None) -> Outcome:
        console.STATE.debug = False
        old = session.engine_factory
        session.engine_factory = self.factory
        try:
            r = CliRunner().invoke(cli.app, args, input=input)
        finally:
            session.engine_factory = old
        exc = r.exception if not isinstance(r.exception, SystemExit) else None
        return Outcome(r.exit_code, r.stdout_bytes, r.stderr, exc)


def tree(root: Path) -> set[str]:
    """Every path under root (relative), to see what a command wrote."""
    return {str(p.relative_to(root)) for p in root.rglob("*")}

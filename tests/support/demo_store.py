"""Demo checkpoints built once per test session, for the tests that need a demo alias to exist but are about
something else (refusing its options, describing it, the README's blocks): each gets a VOX_CACHE of its own
holding a copy, where it used to build the demo again in a fresh cache (Orpheus' stop calibration, CosyVoice's
parts: 1-5 s of CPU each, more in a fresh interpreter). The server fuzz builds in its served process: with
copies its servers measured slower (test_fuzz_server's history), for a reason not yet found.

A copy, not the store itself: a test may change or delete what is in its cache. A test about building a demo
(its first use, its version stamp, what `vox models` shows before and after) keeps a fresh empty cache.
The builds are the registry's own (`voxcli.models.demo_checkpoint`, seeded), so a copy is what a fresh build
in the test's cache would have written."""

from __future__ import annotations

import os
import shutil
from pathlib import Path


class DemoStore:
    def __init__(self, root: Path) -> None:
        self.root = root

    def built(self, name: str) -> Path:
        """The demo's checkpoint in the store, built on the first request for it."""
        from voxcli.models import demo_checkpoint

        before = os.environ.get("VOX_CACHE")
        os.environ["VOX_CACHE"] = str(self.root)
        try:
            return demo_checkpoint(name)
        finally:
            if before is None:
                os.environ.pop("VOX_CACHE", None)
            else:
                os.environ["VOX_CACHE"] = before

    def cache(self, dest: Path, *names: str) -> Path:
        """`dest`, a VOX_CACHE holding a built copy of each named demo (one already there is kept)."""
        dest.mkdir(parents=True, exist_ok=True)
        for name in names:
            src = self.built(name)
            if not (dest / src.name / "VOX_DEMO_VERSION").exists():
                shutil.copytree(src, dest / src.name, dirs_exist_ok=True)
        return dest

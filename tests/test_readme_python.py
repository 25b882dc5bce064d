"""The README's Python section and docs/python.md run as written: every ```python block, on the offline demo
model, in a fresh interpreter each (what a reader pasting it would run), in a scratch folder."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = (ROOT / "README.md", ROOT / "docs" / "python.md")


def python_blocks(doc: Path) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```$", doc.read_text(), flags=re.S | re.M)


BLOCKS = [b for doc in DOCS for b in python_blocks(doc)]


def test_the_readme_and_the_python_doc_have_examples():
    assert len(python_blocks(DOCS[0])) >= 1 and len(python_blocks(DOCS[1])) >= 2
    assert all("voxcli.load(" in b for b in BLOCKS)


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_readme_python_block_runs(index, tmp_path, demo_cache):
    env = {**os.environ, "VOX_CACHE": str(demo_cache)}
    p = subprocess.run([sys.executable, "-c", BLOCKS[index]], cwd=tmp_path, env=env, capture_output=True,
                       text=True, timeout=300)
    assert p.returncode == 0, f"README python block {index + 1} failed:\n{BLOCKS[index]}\n{p.stderr[-3000:]}"
    if "hello.wav" in BLOCKS[index]:
        assert (tmp_path / "hello.wav").stat().st_size > 44


@pytest.fixture(scope="module")
def demo_cache(tmp_path_factory, demo_store):
    """One cache for the module, the demo checkpoint in it built (the session's copy): the blocks are about
    the API, and a reader's second run finds it built too."""
    return demo_store.cache(tmp_path_factory.mktemp("vox_cache"), "demo")

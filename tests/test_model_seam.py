"""The model seam: model code (voxcli.models) never imports the engine (voxcli.engine); models/base.py is
the whole contract between them."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path


def test_model_packages_import_nothing_from_the_engine():
    # A clean interpreter: this test process has long imported the engine.
    code = (
        "import sys\n"
        "import voxcli.models, voxcli.models.qwen3_tts.program, voxcli.models.qwen3_tts.graph_stages\n"
        "print(','.join(sorted(m for m in sys.modules if m.startswith('voxcli.engine'))))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "", f"voxcli.models imported engine modules: {out.stdout.strip()}"


def test_serving_path_imports_no_test_builders():
    code = (
        "import sys\n"
        "from voxcli.models import registry\n"
        "import voxcli.models.qwen3_tts.program, voxcli.models.qwen3_tts.graph_stages\n"
        "registry.families()\n"
        "print(','.join(sorted(m for m in sys.modules if m.startswith('voxcli.models.')\n"
        "                      and m.endswith(('.tiny', '.tiny_audio', '.reference', '.realsize',\n"
        "                                      '.random_init')))))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "", f"serving code imported test builders: {out.stdout.strip()}"


def test_graph_stage_hook_is_declared_on_the_contract():
    from voxcli.models.base import GraphStage, ModelProgram

    from voxcli.engine.executors import cuda

    assert cuda.GraphStage is GraphStage  # the executor uses the contract's type, not its own copy
    assert ModelProgram.graph_stage.__doc__


def test_model_code_imports_nothing_from_voxcli_outside_the_models():
    # models/ is the seam's far side: every module of every family (test builders and sims too) imports no
    # voxcli module outside voxcli.models (the chunk schedule, too, lives in models/base.py).
    code = (
        "import importlib, pkgutil, sys\n"
        "import voxcli.models as m\n"
        "for info in pkgutil.walk_packages(m.__path__, 'voxcli.models.'):\n"
        "    importlib.import_module(info.name)\n"
        "print(','.join(sorted(n for n in sys.modules if n.startswith('voxcli.')\n"
        "                      and not n.startswith('voxcli.models'))))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.strip() == "", f"model code imported voxcli modules: {out.stdout.strip()}"


def test_nothing_outside_models_imports_a_family_by_name():
    # a family is one package + one registration line: voxcli reaches it through models/registry.py
    root = Path(__file__).resolve().parents[1] / "voxcli"
    pattern = re.compile(r"models\.(qwen3_tts|dia|higgs_audio|speechlm|cosyvoice3)\b")
    hits = [f"{p.relative_to(root.parent)}:{i}" for p in sorted(root.rglob("*.py"))
            for i, line in enumerate(p.read_text().splitlines(), 1) if pattern.search(line)]
    assert not hits, f"family packages imported by name outside models/: {hits}"

"""The family registry (models/registry.py): one registration per family feeds model loading, `vox
models`, the default recipes and the sim/bench defaults."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace

import pytest
from voxcli.models import CheckpointError, known_models, load_model, registry

from voxcli.config import ChunkSchedule, recipe_for_model

QWEN_IDS = {"Qwen/Qwen3-TTS-12Hz-0.6B-CustomVoice", "Qwen/Qwen3-TTS-12Hz-0.6B-Base",
            "Qwen/Qwen3-TTS-12Hz-1.7B-CustomVoice", "Qwen/Qwen3-TTS-12Hz-1.7B-Base",
            "Qwen/Qwen3-TTS-12Hz-1.7B-VoiceDesign"}


@pytest.fixture
def fake_family(monkeypatch):
    """A second family registered first (so it is also the default), the way Dia will register."""
    from voxcli.sim.synthetic import SyntheticProgram

    def load(path, device, dtype):
        p = SyntheticProgram(sim=fake.sim)
        p.loaded_from = path
        return p

    fake = registry.Family(
        name="Fake", model_types=("fake_tts",), load=load,
        hub_models=(registry.HubModel("acme/Fake-1B", "a fake model", "qwen3-tts-1.7b"),),
        sim=registry.SimSpec(sample_rate=44100, frame_rate=44100 / 512, samples_per_frame=512, codebooks=9,
                             chunk=ChunkSchedule(first=8, steady=16),
                             models=(registry.SimModel("fake-1b", {"layers": 18}),)),
    )
    real = registry.families()
    monkeypatch.setattr(registry, "families", lambda: (fake, *real))
    return fake


def test_listing_is_the_registered_families_and_imports_no_torch():
    qwen = registry.family_for_model_type("qwen3_tts")
    dia = registry.family_for_model_type("dia")
    assert qwen is not None and dia is not None and qwen.model_types == ("qwen3_tts",)
    assert QWEN_IDS == {m.id for m in qwen.hub_models}
    every = registry.families()  # other families register too (one line in FAMILY_PACKAGES each)
    assert set(known_models()) == {m.id for f in every for m in f.hub_models} >= QWEN_IDS
    assert all(m.description and m.recipe for f in every for m in f.hub_models)
    assert [d.name for d in registry.demos()][:2] == ["demo", "demo-dia"]
    assert any(f.claims is not None for f in every)  # speechlm claims folders, no model_type
    cosy = registry.family_for_model_type("cosyvoice3")
    assert cosy is not None and cosy.claim_file == "cosyvoice3.yaml"  # its own layout, no config.json
    code = ("import sys\nfrom voxcli.models import registry\n"
            "registry.families(); registry.recipe_for('demo')\n"
            "print(sorted(m for m in sys.modules if m == 'torch' or m.endswith('.program')))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_vox_models_lists_demos_and_hub_models_with_descriptions(fake_family):
    from voxcli.models_cmd import list_models

    entries = {e.name: e.description for e in list_models()}
    assert entries["demo"].startswith("tiny random weights")
    assert entries["Qwen/Qwen3-TTS-12Hz-1.7B-VoiceDesign"] == "a voice described by --instructions"
    assert entries["acme/Fake-1B"] == "a fake model"


def test_recipe_choice_comes_from_the_registration(fake_family):
    assert recipe_for_model("demo") == "demo"
    assert recipe_for_model("Qwen/Qwen3-TTS-12Hz-0.6B-CustomVoice") == "qwen3-tts-0.6b"
    assert recipe_for_model("Qwen/Qwen3-TTS-12Hz-1.7B-Base") == "qwen3-tts-1.7b"
    assert recipe_for_model("/ckpts/Qwen3-TTS-12Hz-0.6B-Base") == "qwen3-tts-0.6b"  # folder named after it
    assert recipe_for_model("/hf/models--Qwen--Qwen3-TTS-12Hz-1.7B-Base/snapshots/abc") == "qwen3-tts-1.7b"
    assert recipe_for_model("acme/Fake-1B") == "qwen3-tts-1.7b"
    assert recipe_for_model("/some/local/checkpoint") is None


def test_bench_and_sim_defaults_come_from_the_default_family(fake_family):
    from voxcli.models.qwen3_tts import sim as calibrate

    from voxcli.bench.sweep import SweepSpec
    from voxcli.bench.workloads import Utterance, estimate_frames, mean_chunks
    from voxcli.sim.synthetic import SyntheticProgram

    rate = 44100 / 512
    assert SweepSpec(rates=[1.0]).frame_rate == rate
    u = [Utterance("a", "one two three four five six seven eight nine ten")]
    assert estimate_frames(u[0].text) == estimate_frames(u[0].text, rate)
    assert mean_chunks(u) == mean_chunks(u, 8, 16, rate)
    spec = SyntheticProgram().spec
    assert (spec.sample_rate, spec.samples_per_frame, spec.codebooks) == (44100, 512, 9)
    assert spec.frame_rate == rate
    # a named model picks its own family's spec and sim chunk schedule
    fake = SyntheticProgram.for_model("fake-1b").spec
    assert fake.chunk == ChunkSchedule(first=8, steady=16) and fake.codebooks == 9
    qwen = SyntheticProgram.for_model("qwen3-tts-1.7b").spec
    assert (qwen.frame_rate, qwen.samples_per_frame, qwen.chunk) == (12.5, 1920, ChunkSchedule(10, (), 10))
    assert SyntheticProgram.for_model("Qwen/Qwen3-TTS-12Hz-1.7B-Base").spec.frame_rate == 12.5
    # the cost-profile arithmetic reads the registered 1.7B dimensions
    sizes = registry.find_sim_model("qwen3-tts-1.7b")[1].sizes
    assert calibrate.TALKER == sizes["talker"] and calibrate.PREDICTOR == sizes["predictor"]


def test_sim_bench_target_uses_the_models_family(fake_family):
    from voxcli.bench.sweep import Variant
    from voxcli.bench.targets import model_config, sim_target

    cfg = model_config("qwen3-tts-0.6b", "sim", "h100")  # the 1.7B recipe sets its own chunks (issue 17)
    assert cfg.chunk is None  # the recipe sets none: the family's sim schedule applies
    eng = sim_target(cfg, Variant.policy("full")).make_engine()
    assert eng.config.chunk == ChunkSchedule(10, (), 10) and eng.spec.frame_rate == 12.5
    with pytest.raises(Exception, match="qwen3-tts-1.7b") as e:
        model_config("nope", "sim", "h100")
    assert "fake-1b" in str(e.value)


def test_load_model_dispatches_on_model_type(fake_family, tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "fake_tts"}))
    program = load_model(str(tmp_path))
    assert program.loaded_from == str(tmp_path) and program.spec.name == str(tmp_path)


def test_unknown_model_type_lists_the_supported_ones(fake_family, tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "bark"}))
    with pytest.raises(CheckpointError) as e:
        load_model(str(tmp_path))
    msg = str(e.value)
    assert '"bark"' in msg and '"fake_tts"' in msg and '"qwen3_tts"' in msg and "config.json" in msg


def test_demo_alias_builds_through_its_family(fake_family, monkeypatch, tmp_path):
    import voxcli.models as models

    built = []

    def build(out):
        out.mkdir(parents=True)
        (out / "config.json").write_text(json.dumps({"model_type": "fake_tts"}))
        built.append(out)

    fam = replace(fake_family, demos=(registry.Demo("demo-fake", build, "1", "fake demo"),))
    monkeypatch.setattr(registry, "families", lambda: (fam,))
    monkeypatch.setenv("VOX_CACHE", str(tmp_path))
    p = models.load_model("demo-fake")
    assert p.spec.name == "demo-fake" and p.loaded_from == str(tmp_path / "demo-fake")
    models.load_model("demo-fake")
    assert len(built) == 1  # cached after the first build (version stamp)
    assert models.is_demo("demo-fake") and not models.is_demo("demo")


def test_every_model_package_ships():
    """A wheel ships the packages setup.py finds: every family folder under models/ (and every package
    under voxcli/) must be among them without anyone listing it, or it would work in an editable install
    and vanish from a wheel."""
    import runpy
    from pathlib import Path

    import setuptools

    root = Path(__file__).resolve().parents[1]
    captured: dict = {}
    real_setup = setuptools.setup
    setuptools.setup = lambda **kw: captured.update(kw)
    try:
        cwd = os.getcwd()
        os.chdir(root)  # setup.py finds packages relative to the project root, as pip runs it
        try:
            runpy.run_path(str(root / "setup.py"))
        finally:
            os.chdir(cwd)
    finally:
        setuptools.setup = real_setup
    shipped = set(captured["packages"])
    on_disk = {f"voxcli.models.{p.parent.name}" for p in (root / "models").glob("*/__init__.py")}
    on_disk |= {".".join(p.parent.relative_to(root).parts) for p in (root / "voxcli").rglob("__init__.py")}
    assert on_disk <= shipped, f"not shipped: {sorted(on_disk - shipped)}"
    assert {f"voxcli.models.{p}" for p in registry.FAMILY_PACKAGES} <= shipped


def test_each_family_registers_its_calibration_and_random_weight_builders():
    for package in registry.FAMILY_PACKAGES:
        family = registry.find_family(package)
        assert family is not None and family.calibration is not None, package
        assert family.calibration().description, package  # its command's help says what is fitted
        assert family.tiny and all(t.sizes()[0] == "tiny" for t in family.tiny), package
    assert {t.name for t in registry.tinies()} == {"qwen3_tts", "dia", "higgs", "higgs-v3", "cosyvoice3",
                                                   "speechlm", "orpheus", "cosyvoice2", "zonos", "csm",
                                                   "kyutai_tts", "vibevoice"}
    assert registry.find_tiny("qwen3_tts").sizes() == ("tiny", "cpu-bench", "0.6b", "1.7b")
    assert registry.find_tiny("nope") is None


def test_benchmarks_reach_family_code_through_the_registry():
    """get_tiny / get_reference answer or name what there is; the profiled ops and the random-weight program
    builder (the device check's model) are where their families say."""
    assert registry.get_tiny("dia") is registry.find_tiny("dia")
    with pytest.raises(ValueError, match="no random-weight builder 'nope'; one of qwen3_tts, "):
        registry.get_tiny("nope")
    reference = registry.get_reference("qwen3_tts")
    assert callable(reference.generate) and callable(reference.teacher_forced)
    with pytest.raises(ValueError, match="no reference generator for 'dia'"):
        registry.get_reference("dia")
    ops = registry.find_family("dia").profile_ops()
    assert ops and all(callable(getattr(owner, name)) for owner, name, _ in ops)
    assert [t.name for t in registry.tinies() if t.program is not None] == ["qwen3_tts"]


def test_openai_voice_names_map_to_the_family_s_own_voices():
    from voxcli.server.voices import OPENAI_VOICES

    for family in registry.families():
        assert set(family.openai_voices) <= set(OPENAI_VOICES), family.name
        for preferred in family.openai_voices.values():
            assert preferred and set(preferred) <= set(family.voices), family.name
    qwen = registry.find_family("qwen3_tts")
    assert set(qwen.openai_voices) == set(OPENAI_VOICES) and len(qwen.voices) == 9
    assert registry.find_family("dia").openai_voices == {}  # no named voices: the model's default voice
    assert registry.openai_voice_preferences()["onyx"][0] == "uncle_fu"

"""Which oracle venvs scripts/test.sh builds: one line per oracle, read by test.sh (stdlib only: it runs
before any venv exists).

    python3 scripts/oracle_plan.py [REPO]      (default: the repository this script is in)

Each line is tab-separated: `use ENV PYTHON` (ENV already names an interpreter), `build ENV VENV SETUP`
(create VENV with scripts/SETUP, then point ENV at it) or `skip ENV MESSAGE`. An oracle that runs a pinned
upstream source (CosyVoice, Zonos: no package ships it) is skipped where that source is absent, as on a
user's clone without ../shared: its venv (over 1 GB) would serve tests that skip anyway
(tests/oracle/drive_cosyvoice.py and drive_zonos.py skip, naming the missing source)."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class PinnedSource:
    env: str  # the variable that points the tests at it
    default: str  # relative to the repository's parent folder
    marker: str  # a path inside it that only a real checkout has
    where: str  # how to get it: the upstream repository and commit

    def folder(self, repo: Path, environ: dict[str, str]) -> Path:
        return Path(environ.get(self.env) or repo.parent / self.default)

    def present(self, repo: Path, environ: dict[str, str]) -> bool:
        return (self.folder(repo, environ) / self.marker).exists()


@dataclass(frozen=True)
class Oracle:
    env: str
    venv: str
    setup: str
    serves: str
    source: PinnedSource | None = None


COSYVOICE = PinnedSource("VOX_COSYVOICE_UPSTREAM", "shared/oracle/cosyvoice3", "cosyvoice",
                         "FunAudioLLM/CosyVoice at ace7c47")
ZONOS = PinnedSource("VOX_ZONOS_UPSTREAM", "shared/oracle/zonos", "zonos/model.py", "Zyphra/Zonos at bc40d98")

# In test.sh's order; two families share the transformers 5.24 venv (listed twice, built once).
ORACLES = (
    Oracle("VOX_ORACLE_PYTHON", ".oracle-venv", "setup_oracle.sh", "Qwen3-TTS, Dia, DAC"),
    Oracle("VOX_HIGGS_ORACLE_PYTHON", ".oracle-higgs-venv", "setup_oracle_higgs.sh", "Higgs Audio"),
    Oracle("VOX_SPEECHLM_ORACLE_PYTHON", ".oracle-speechlm-venv", "setup_oracle_speechlm.sh",
           "ESPnet SpeechLM"),
    Oracle("VOX_COSYVOICE_ORACLE_PYTHON", ".oracle-cosyvoice-venv", "setup_oracle_cosyvoice.sh",
           "CosyVoice 3 and 2", COSYVOICE),
    Oracle("VOX_ORPHEUS_ORACLE_PYTHON", ".oracle-tf524-venv", "setup_oracle_tf524.sh", "Orpheus"),
    Oracle("VOX_ZONOS_ORACLE_PYTHON", ".oracle-zonos-venv", "setup_oracle_zonos.sh", "Zonos", ZONOS),
    Oracle("VOX_CSM_ORACLE_PYTHON", ".oracle-tf524-venv", "setup_oracle_tf524.sh", "CSM"),
    Oracle("VOX_KYUTAI_ORACLE_PYTHON", ".oracle-kyutai-venv", "setup_oracle_kyutai.sh", "Kyutai TTS"),
    Oracle("VOX_VIBEVOICE_ORACLE_PYTHON", ".oracle-vibevoice-venv", "setup_oracle_vibevoice.sh", "VibeVoice"),
)


def decide(oracle: Oracle, repo: Path, environ: dict[str, str]) -> tuple[str, ...]:
    given = environ.get(oracle.env)
    if given:
        return ("use", oracle.env, given)
    src = oracle.source
    if src is not None and not src.present(repo, environ):
        return ("skip", oracle.env,
                f"not building {oracle.venv} ({oracle.serves} parity tests skip): its pinned upstream source "
                f"{src.folder(repo, environ)} is missing; to run them, check out {src.where} there or set "
                f"{src.env} to such a checkout")
    return ("build", oracle.env, oracle.venv, oracle.setup)


def plan(repo: Path, environ: dict[str, str]) -> list[tuple[str, ...]]:
    return [decide(o, repo, environ) for o in ORACLES]


if __name__ == "__main__":
    root = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parents[1]
    for line in plan(root.resolve(), dict(os.environ)):
        print("\t".join(line))

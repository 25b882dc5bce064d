"""Kept only for `voxcli/bench/cli.py`'s `_toml_value` import: the calibrations moved into the families
(models/<family>/sim.py over models/sim_priors.py and models/sim_profile.py, run by
`python -m voxcli.bench.calibration --family NAME`). Delete this module once bench/cli.py imports
`voxcli.models.sim_profile.toml_value`."""

from __future__ import annotations

from voxcli.models.sim_profile import toml_value as _toml_value

__all__ = ["_toml_value"]

"""The oracles in one place: the `run_*.py` scripts run inside each oracle's own venv (with this folder
as their script directory, so they import their siblings by bare name), and the host-side modules the
tests import (`interpreters`: finding an oracle venv and running a script in it; `drive_cosyvoice`,
`drive_higgs`: one family's cases in and results out)."""

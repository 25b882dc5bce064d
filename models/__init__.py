"""Model programs, one per family. `voxcli.models` is this folder (see pyproject package-dir)."""

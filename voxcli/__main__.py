"""`python -m voxcli` runs the `vox` command line."""

from voxcli.cli import main

main()

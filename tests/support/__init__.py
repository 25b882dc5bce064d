"""Test helpers shared by several test files (fakes, harnesses, drivers, workloads); no tests here.
The oracles (reference implementations run in their own venvs, and the host-side code that drives
them) live in tests/oracle/."""

"""Measurements outside the product: upstream comparisons, one-off engine measurements and the device
check (benchmarks/gpu/). Not shipped in the wheel. One runner: `python -m benchmarks NAME [args]`
(`python -m benchmarks` lists them). Rules: no private names (`_x`) from voxcli or models; models come
through `voxcli.models.load_model` and `voxcli.models.registry`, except where a benchmark measures one
family's internals (said in its docstring)."""

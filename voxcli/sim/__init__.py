"""The one home of simulation: what runs the engine on a GPU that is not there.

- cost.py: a GPU cost profile as the engine reads it (recipes/gpus/*.toml -> `CostProfile`: per-stage
  batch times, per SM count, and the sim's fidelity models). The profiles themselves are computed in
  models/ from each family's declared sizes (models/sim_stages.py, models/<family>/sim.py), since
  models/ imports nothing from voxcli.
- synthetic.py: `SyntheticProgram`, the stand-in model program the sim executor drives (a family's
  frame rate, codebooks, chunking, CFG pairs and delay fill from its registered `SimSpec`).
- executor.py: `SimExecutor`, the executor that advances a virtual clock by the profile's batch times;
  realtime_executor.py: the same on the wall clock (`vox serve --executor sim`).
- calibration.py: `EngineSimulator`, the simulator a family's calibration fits its profile against
  (the command: `python -m voxcli.bench.calibration`).
- placement.py: the placement co-simulation (a placement's LM and codec engines on one virtual clock,
  with the network between them), what `vox profile --gpus N` ranks placements by;
  profile_placements.py: the best placements of the throughput model, each co-simulated, as a table.
- bound.py: the capacity bound of a cost profile (the best any schedule could do on a split);
  config_bound.py: that bound for an engine config and a workload (and for every split of a profile).
- splits.py: the throughput model of `vox profile` (each split's backbone and codec throughput, the
  choice of split, the role placements ranked); split_search.py: the best splits simulated for their SLO
  capacity; placement_rank.py: `--placement auto` from that ranking.

Measurement (timing a real device or a server, the open-loop client, the sweeps and their reports, the
experiment plans) is voxcli/bench/ and, for what a checkout measures beyond `vox bench`, benchmarks/.
"""

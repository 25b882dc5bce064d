"""A plan small enough to run in seconds on the sim and still print every table `vox bench --plan` prints:
two candidates (the reference and another policy), two seeds, an overload offer."""

TINY = """
title = "tiny"
model = "qwen3-tts-1.7b"
gpu = "h100"
workloads = ["seed-tts"]
rates = "20,40"
duration = 1.0
seeds = 2
warmup = 4
arrivals = "by-rate"
reference = "recipe"
tables = ["capacity", "rates"]

[[candidates]]
name = "recipe"

[[candidates]]
name = "sync2"
set = { policy = "sync2" }

[overload]
multiples = [1.5]
candidates = ["recipe"]
seeds = 1
warmup = 0
"""

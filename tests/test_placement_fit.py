"""A placement the Ray cluster cannot hold is refused before anything is deployed (one sentence naming
the resources), and a deployment that is not running within its bound stops the start (one sentence),
on a fake clock and a fake status: no Ray needed."""

from __future__ import annotations

import threading

import pytest

from voxcli.cluster.fit import check_fits, resource_needs, run_bounded
from voxcli.errors import VoxError
from voxcli.placement import Placement, parse_placement


def test_a_billion_replicas_are_refused_naming_the_resources():
    placement = parse_placement("both=1000000000")
    with pytest.raises(VoxError) as e:
        check_fits(placement, {"num_cpus": 0.5}, {"CPU": 16.0, "GPU": 0.0}, extra={"num_cpus": 0.5})
    message = str(e.value)
    assert message == ("--placement both=1000000000 needs 5e+08 CPUs (0.5 per replica) but the Ray cluster "
                       "has 16; place at most 31 replicas, or add nodes."), message


def test_gpus_are_counted_as_gpus():
    with pytest.raises(VoxError, match=r"needs 5 GPUs \(1 per replica\) but the Ray cluster has 4; place at "
                                       r"most 4 replicas"):
        check_fits(Placement(lm=3, codec=2), {"num_gpus": 1, "num_cpus": 1}, {"CPU": 64.0, "GPU": 4.0})


def test_what_fits_passes():
    check_fits(Placement(both=31), {"num_cpus": 0.5}, {"CPU": 16.0}, extra={"num_cpus": 0.5})
    assert resource_needs(Placement(both=2), {"num_cpus": 0.5}, {"num_cpus": 0.5}) == {"CPU": 1.5}


UNSCHEDULED = "Deployment 'x' has 1 replica that has taken more than 30s to be scheduled."


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        self.now += 10.0  # every look at the clock is 10 s later
        return self.now


def test_a_deployment_never_scheduled_fails_the_start_within_the_bound():
    release = threading.Event()
    try:
        with pytest.raises(VoxError) as e:
            run_bounded(lambda: release.wait(60), "vox-both-7", lambda name: ("DEPLOYING", UNSCHEDULED),
                        timeout_s=60, poll_s=0, clock=_Clock())
    finally:
        release.set()
    message = str(e.value)
    assert message.startswith("replica vox-both-7 was not running within 60 s of its deployment (")
    assert message.endswith("ask for fewer replicas or add nodes.") and "\n" not in message


def test_a_failed_deployment_says_why():
    release = threading.Event()
    try:
        with pytest.raises(VoxError, match=r"^replica vox-lm-0 failed to start: the model did not load\.$"):
            run_bounded(lambda: release.wait(60), "vox-lm-0", lambda name: ("DEPLOY_FAILED", "the model did "
                                                                            "not load."),
                        timeout_s=600, poll_s=0, clock=_Clock())
    finally:
        release.set()


def test_a_deployment_that_runs_returns_and_its_errors_come_through():
    run_bounded(lambda: None, "ok", lambda name: ("RUNNING", ""), timeout_s=600, poll_s=0.01)

    def boom() -> None:
        raise RuntimeError("serve.run said no")

    with pytest.raises(RuntimeError, match="serve.run said no"):
        run_bounded(boom, "bad", lambda name: ("", ""), timeout_s=600, poll_s=0.01)


def test_sigterm_stops_a_start_waiting_for_its_replicas():
    """The watch runs on the calling (main) thread: a SIGTERM mapped to an interrupt (as `vox serve` maps
    it) ends the wait at once, sent here from inside the status poll itself (no timing involved)."""
    import os
    import signal

    from voxcli import stopping
    from voxcli.console import sigterm_as_interrupt

    release = threading.Event()

    def status(name: str) -> tuple[str, str]:
        os.kill(os.getpid(), signal.SIGTERM)
        return "DEPLOYING", UNSCHEDULED

    try:
        with pytest.raises(KeyboardInterrupt), sigterm_as_interrupt():
            run_bounded(lambda: release.wait(60), "vox-both-0", status, timeout_s=600, poll_s=0)
        assert stopping.hard_exit_armed()  # the signal also set the bound on how long leaving may take
    finally:
        stopping.disarm_hard_exit()  # this process (the test run) goes on
        release.set()


def test_replicas_are_named_by_their_own_flag():
    with pytest.raises(VoxError, match=r"^--replicas 100 needs 50 CPUs \(0.5 per replica\) but the Ray "
                                       r"cluster has 2; place at most 4 replicas, or add nodes\.$"):
        check_fits(Placement(both=100), {"num_cpus": 0.5}, {"CPU": 2.0}, flag="--replicas 100")

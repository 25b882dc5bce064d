"""Will a placement fit the Ray cluster, and does each replica get scheduled in time.

Ray Serve deploys a replica it cannot schedule by waiting for resources forever (printing "taken more
than 30s to be scheduled"): `--placement both=1000000000` deployed replicas until the cluster was full,
then waited. Two bounds, each one sentence:

- `check_fits`, before anything is deployed: what the placement asks for (every replica's actor
  resources, plus the front door's) against the cluster's totals, naming the resources.
- `run_bounded`, per deployment: the deploy call runs on a helper thread while this one watches the
  application's status; not running within `timeout_s` (or failed) stops the start with the reason.
  The watching thread is the caller's (the main one): Ctrl-C and SIGTERM interrupt it at once.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable

from voxcli.errors import VoxError
from voxcli.placement import Placement

# How long one replica may wait to be scheduled (a model's loading is the replica's own time: Ray
# reports it as DEPLOYING too, so the bound is generous)
SCHEDULE_TIMEOUT_S = 600.0
_UNITS = {"CPU": "CPUs", "GPU": "GPUs", "memory": "bytes of memory"}


_RAY_NAMES = {"num_cpus": "CPU", "num_gpus": "GPU"}  # actor options -> cluster resource names


def _by_resource(options: dict[str, float]) -> dict[str, float]:
    return {_RAY_NAMES.get(k, k): float(v) for k, v in options.items()}


def resource_needs(placement: Placement, per_replica: dict[str, float],
                   extra: dict[str, float] | None = None) -> dict[str, float]:
    """What the placement's replicas (each `per_replica`, as Ray actor options: num_cpus, num_gpus)
    and `extra` (the front door's) ask the cluster for, by Ray resource name."""
    need = {k: v * placement.replicas for k, v in _by_resource(per_replica).items()}
    for k, v in _by_resource(extra or {}).items():
        need[k] = need.get(k, 0.0) + v
    return need


def check_fits(placement: Placement, per_replica: dict[str, float], cluster: dict[str, float],
               extra: dict[str, float] | None = None, flag: str | None = None) -> None:
    """Raise one sentence when the cluster's totals cannot hold the placement (`flag`: how the user
    asked for it, `--placement ...` unless given)."""
    each, more = _by_resource(per_replica), _by_resource(extra or {})
    for resource, amount in resource_needs(placement, per_replica, extra).items():
        has = float(cluster.get(resource, 0.0))
        if amount <= has + 1e-9:
            continue
        unit = _UNITS.get(resource, f"of resource {resource}")
        one = each.get(resource, 0.0)
        fits = max(0, math.floor((has - more.get(resource, 0.0)) / one + 1e-9)) if one else 0
        asked = flag or f"--placement {placement.describe()}"
        raise VoxError(f"{asked} needs {amount:g} {unit} ({one:g} per replica) "
                       f"but the Ray cluster has {has:g}; place at most {fits} replicas, or add nodes.", 2)


def run_bounded(deploy: Callable[[], object], name: str, status: Callable[[str], tuple[str, str]],
                timeout_s: float = SCHEDULE_TIMEOUT_S, poll_s: float = 0.5,
                clock: Callable[[], float] = time.monotonic) -> None:
    """Run `deploy` (a blocking serve.run of application `name`) until it returns; raise one sentence
    when `status(name)` (state, message) says DEPLOY_FAILED or `timeout_s` passes first."""
    done = threading.Event()
    failure: list[BaseException] = []

    def target() -> None:
        try:
            deploy()
        except BaseException as e:  # noqa: BLE001 - handed to the watching thread
            failure.append(e)
        finally:
            done.set()

    threading.Thread(target=target, name=f"vox-deploy-{name}", daemon=True).start()
    deadline = clock() + timeout_s
    while not done.wait(poll_s):
        state, message = status(name)
        if state == "DEPLOY_FAILED":
            raise VoxError(f"replica {name} failed to start: {_sentence_part(message)}.", 1)
        if clock() > deadline:
            why = f" ({_sentence_part(message)})" if message else ""
            raise VoxError(f"replica {name} was not running within {timeout_s:g} s of its deployment{why}; "
                           "the Ray cluster cannot place it: ask for fewer replicas or add nodes.", 1)
    if failure:
        raise failure[0]


def _sentence_part(message: str) -> str:
    line = " ".join(message.split())[:300]
    return line.rstrip(".") or "no reason given"


def serve_status(name: str) -> tuple[str, str]:
    """(state, message) of Serve application `name` ("" when it is not known yet)."""
    from ray import serve

    app = serve.status().applications.get(name)
    if app is None:
        return "", ""
    messages = [app.message] + [d.message for d in app.deployments.values() if d.message]
    return str(getattr(app.status, "value", app.status)), " ".join(m for m in messages if m)


def cluster_resources() -> dict[str, float]:
    import ray

    return dict(ray.cluster_resources())

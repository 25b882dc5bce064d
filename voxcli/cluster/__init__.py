"""Scale-out on Ray Serve: the `vox serve` app and `vox batch` over many engine replicas.

    ray_app.py      `--replicas N`: N copies of the server app, one engine each (ReplicaSpec, run_ray,
                    batch_session)
    ray_roles.py    a placement's LM-only and codec-only replicas, and what crosses between them
    ray_front.py    a placement's front door: the OpenAI API over the role replicas (PlacementEngine)
    ray_router.py   most-slack routing between replicas
    ray_metrics.py  the replicas' counters and gauges on the front door's /metrics

Each replica opens its engine through the session layer (`voxcli.session`) and serves it with the server's
own app (`voxcli.server`); nothing here imports the `vox` CLI.
"""

"""A placement across Ray nodes: a two-node Ray cluster on this machine (`ray.cluster_utils.Cluster`: two
raylets, each its own node with its own object store), the LM replica pinned to one node and the codec
replica to the other by a custom resource only that node has. Its streams equal one engine's, chunk for
chunk, as on one node (the relay's streaming links cross nodes as any Ray call does). The clock rule for
deadlines across machines (engine/roles.py: epoch seconds, NTP) is the one machine's clock here."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("ray.serve", reason="Ray Serve is not installed (pip install 'voxcli[ray]')")

from support.roles_harness import one_engine_audio  # noqa: E402
from voxcli.models.base import SynthesisRequest  # noqa: E402

MODEL, GPU = "qwen3-tts-1.7b", "h100"


@pytest.mark.slow
def test_lm_and_codec_on_different_nodes_stream_what_one_engine_streams():
    import ray
    from ray import serve
    from ray.cluster_utils import Cluster

    from voxcli.cluster.ray_app import ReplicaSpec
    from voxcli.cluster.ray_front import PlacementEngine
    from voxcli.cluster.ray_roles import deploy_replicas, describe_first
    from voxcli.placement import Placement

    if ray.is_initialized():  # another test module's Ray: this test needs a cluster of its own
        ray.shutdown()
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 2, "resources": {"lm_node": 1}})
    cluster.add_node(num_cpus=2, resources={"codec_node": 1})
    front = None
    try:
        ray.init(address=cluster.address, include_dashboard=False, log_to_driver=False, logging_level="ERROR")
        cluster.wait_for_nodes()
        serve.start(proxy_location="Disabled")
        spec = ReplicaSpec(model=MODEL, executor="sim", gpu=GPU)
        names = deploy_replicas(spec, Placement(lm=1, codec=1), prefix="n", pcm_scale=1.0,
                                pin={"lm": {"lm_node": 1}, "codec": {"codec_node": 1}})
        lm, codec = (serve.get_deployment_handle(n, app_name=n) for n in (names["lm"][0], names["codec"][0]))
        lm_node, codec_node = (h.node.remote().result(timeout_s=60) for h in (lm, codec))
        nodes = {n["NodeID"] for n in ray.nodes() if n["Alive"]}
        assert lm_node != codec_node and {lm_node, codec_node} <= nodes and len(nodes) == 2
        model_spec, _ = describe_first(names)
        front = PlacementEngine(names, model_spec.sample_rate, model_spec.frame_seconds)
        frames = [5, 33, 70]
        ref = one_engine_audio(MODEL, GPU, frames)
        streams = [front.submit(SynthesisRequest(text=f"r{i}", fixed_frames=n)) for i, n in enumerate(frames)]
        for s, want in zip(streams, ref, strict=True):
            got = [chunk.pcm for chunk in s]  # streamed, chunk by chunk, from the other node
            assert s.status == "done"
            audio = np.concatenate(got)
            assert audio.shape == want.shape and np.array_equal(audio, want)
        relay = front.relay().per_chunk()
        # per chunk one codes link item + the PCM at most; per request at most 2 work link items
        assert relay["chunks"] >= 3 and relay["messages_per_chunk"] <= 2 + 2 * len(frames) / relay["chunks"]
    finally:
        if front is not None:
            front.close()
        serve.shutdown()
        ray.shutdown()
        cluster.shutdown()


"""SM arithmetic and the green-context builder, with `cuda.bindings.driver` faked at the boundary."""

from __future__ import annotations

import logging
from types import SimpleNamespace

import pytest

from voxcli.engine import partitions as P
from voxcli.engine.partitions import PartitionError, StreamFactory, build_partitions, plan_split


# ---------------------------------------------------------------- SM arithmetic
@pytest.mark.parametrize(
    ("request_", "granted"), [(100, 104), (17, 24), (5, 8), (96, 96), (32, 32), (28, 32)]
)
def test_requests_round_up_to_multiples_of_8_on_hopper(request_, granted):
    assert P.round_up_sms(request_, *P.sm_granularity(9, 0)) == granted


def test_older_architectures_have_finer_granularity():
    assert P.sm_granularity(8, 0) == (4, 2)
    assert P.round_up_sms(5, *P.sm_granularity(8, 6)) == 6
    assert P.round_up_sms(1, *P.sm_granularity(8, 0)) == 4
    assert P.round_up_sms(3, *P.sm_granularity(7, 5)) == 4


def test_96_plus_32_on_132_sms_leaves_4_spare():
    plan = plan_split(132, 96, 32)
    assert (plan.lm_sms, plan.codec_sms, plan.spare_sms) == (96, 32, 4)
    assert (plan.groups, plan.group_sms, plan.lm_groups, plan.codec_groups) == (16, 8, 12, 4)
    assert not plan.codec_takes_remainder


def test_104_plus_28_gives_the_codec_the_remainder():
    plan = plan_split(132, 104, 28)
    assert (plan.lm_sms, plan.codec_sms, plan.spare_sms) == (104, 28, 0)
    assert plan.codec_takes_remainder and plan.codec_groups == 3


def test_unaligned_requests_that_fit_are_rounded_up():
    plan = plan_split(132, 90, 30)
    assert (plan.lm_sms, plan.codec_sms) == (96, 32)


def test_100_plus_32_is_refused_with_the_rounded_numbers_and_valid_layouts():
    with pytest.raises(PartitionError) as e:
        plan_split(132, 100, 32)
    msg = str(e.value)
    assert "get 104" in msg and "only 28" in msg and "groups of 8" in msg
    assert "96+32" in msg and "lm_sms" in msg


@pytest.mark.parametrize(("lm", "codec"), [(132, 8), (128, 8), (0, 32), (96, -1)])
def test_impossible_layouts_are_refused(lm, codec):
    with pytest.raises(PartitionError):
        plan_split(132, lm, codec)


def test_valid_layouts_all_plan_exactly():
    layouts = P.valid_layouts(132)
    assert (96, 32) in layouts and (104, 28) in layouts and (100, 32) not in layouts
    for lm, codec in layouts:
        plan = plan_split(132, lm, codec)
        assert (plan.lm_sms, plan.codec_sms) == (lm, codec)
        assert plan.lm_sms + plan.codec_sms <= 132


def test_lane_priorities_put_urgent_first_and_background_last():
    assert P.lane_priorities(0, -5) == {"device": -5, "lm": -4, "codec": 0}
    assert P.lane_priorities(0, 0) == {"device": 0, "lm": 0, "codec": 0}


# ---------------------------------------------------------------- a fake driver
class _Res:
    def __init__(self, sms: int):
        self.sm = SimpleNamespace(smCount=sms)


def fake_driver(total=132, version=13000, fail: dict | None = None, groups_made=None):
    """A stand-in for `cuda.bindings.driver` with the documented `(CUresult, *outputs)` returns."""
    fail = fail or {}
    ok = "SUCCESS"
    calls: list[tuple] = []
    d = SimpleNamespace(calls=calls)
    d.CUresult = SimpleNamespace(CUDA_SUCCESS=ok)
    d.CUdevResourceType = SimpleNamespace(CU_DEV_RESOURCE_TYPE_SM="SM")
    d.CUgreenCtxCreate_flags = SimpleNamespace(CU_GREEN_CTX_DEFAULT_STREAM="DEFAULT_STREAM")
    d.CUstream_flags = SimpleNamespace(CU_STREAM_NON_BLOCKING="NON_BLOCKING")
    d.cuGetErrorName = lambda err: (ok, f"CUDA_ERROR_{err}".encode())

    def call(name, *outputs):
        calls.append((name,))
        return (fail[name], *[None] * len(outputs)) if name in fail else (ok, *outputs)

    d.cuInit = lambda flags: call("cuInit")
    d.cuDriverGetVersion = lambda: call("cuDriverGetVersion", version)
    d.cuDeviceGet = lambda i: call("cuDeviceGet", f"dev{i}")
    d.cuDeviceGetDevResource = lambda dev, t: call("cuDeviceGetDevResource", _Res(total))

    def split(n, res, flags, min_count):
        made = groups_made if groups_made is not None else min(n, res.sm.smCount // min_count)
        calls.append(("split", n, flags, min_count))
        if "split" in fail:
            return fail["split"], None, None, None
        return ok, [_Res(min_count) for _ in range(made)], made, _Res(res.sm.smCount - made * min_count)

    d.cuDevSmResourceSplitByCount = split

    def gen_desc(res_list, n):
        assert n == len(res_list)
        calls.append(("desc", [r.sm.smCount for r in res_list]))
        return ok, sum(r.sm.smCount for r in res_list)

    d.cuDevResourceGenerateDesc = gen_desc
    d.cuGreenCtxCreate = lambda desc, dev, flags: (
        calls.append(("ctx", desc, flags))
        or ((fail["cuGreenCtxCreate"], None) if "cuGreenCtxCreate" in fail else (ok, f"ctx{desc}"))
    )

    streams = iter(range(1000, 2000))

    def stream_create(ctx, flags, prio):
        calls.append(("stream", ctx, flags, prio))
        if "cuGreenCtxStreamCreate" in fail:
            return fail["cuGreenCtxStreamCreate"], None
        return ok, next(streams)

    d.cuGreenCtxStreamCreate = stream_create
    d.cuGreenCtxGetDevResource = lambda ctx, t: (ok, _Res(int(ctx[3:])))
    d.cuStreamDestroy = lambda s: calls.append(("destroy_stream", s)) or (ok,)
    d.cuGreenCtxDestroy = lambda c: calls.append(("destroy_ctx", c)) or (ok,)
    return d


def fake_streams(prange=(0, -5)):
    made = []
    factory = StreamFactory(
        plain=lambda prio: made.append(("plain", prio)) or f"plain{prio}",
        wrap=lambda handle, index: made.append(("wrap", handle)) or f"green{handle}",
        priority_range=lambda: prange,
    )
    return factory, made


def build(driver, lm=96, codec=32, **kw):
    factory, made = fake_streams()
    res = build_partitions(lm, codec, driver=driver, streams=factory, total_sms=132, cc=(9, 0), **kw)
    return res, made


# ---------------------------------------------------------------- green path
def test_green_contexts_follow_the_documented_call_sequence():
    drv = fake_driver()
    res, made = build(drv)
    assert res.green and (res.lm_sms, res.codec_sms) == (96, 32)
    names = [c[0] for c in drv.calls]
    assert names.index("split") < names.index("desc") < names.index("ctx") < names.index("stream")
    assert ("split", 16, 0, 8) in drv.calls
    assert [c[1] for c in drv.calls if c[0] == "desc"] == [[8] * 12, [8] * 4]
    assert all(c[2] == "DEFAULT_STREAM" for c in drv.calls if c[0] == "ctx")
    stream_calls = [c for c in drv.calls if c[0] == "stream"]
    assert [c[2] for c in stream_calls] == ["NON_BLOCKING"] * 2
    assert [c[3] for c in stream_calls] == [-4, 0]  # backbone greatest+1, codec least
    assert ("wrap", 1000) in made and ("wrap", 1001) in made
    assert res.device == "plain-5" and res.prefill == "plain-4"
    assert "96" in res.summary() and "32" in res.summary()


def test_104_28_layout_passes_the_remainder_into_the_codec_descriptor():
    drv = fake_driver()
    res, _ = build(drv, 104, 28)
    assert (res.lm_sms, res.codec_sms) == (104, 28)
    assert [c[1] for c in drv.calls if c[0] == "desc"] == [[8] * 13, [8, 8, 8, 4]]


def test_close_destroys_streams_before_their_contexts():
    drv = fake_driver()
    res, _ = build(drv)
    res.close()
    order = [c for c in drv.calls if c[0].startswith("destroy")]
    assert [c[0] for c in order] == ["destroy_stream", "destroy_ctx", "destroy_stream", "destroy_ctx"]
    res.close()  # idempotent
    assert len([c for c in drv.calls if c[0].startswith("destroy")]) == 4


# ---------------------------------------------------------------- fallback path
@pytest.fixture(autouse=True)
def _fresh_warnings(monkeypatch):
    monkeypatch.setattr(P, "_warned_reasons", set())


def _fallback_records(caplog):
    return [r for r in caplog.records if "falling back to plain priority streams" in r.getMessage()]


def test_old_driver_falls_back_loudly_once(caplog):
    caplog.set_level(logging.WARNING, logger="voxcli.partitions")
    for _ in range(3):
        res, made = build(fake_driver(version=12040))
    assert not res.green and "12.5" in res.reason
    assert (res.lm_sms, res.codec_sms) == (132, 132)
    assert res.prefill is res.lm
    assert len(_fallback_records(caplog)) == 1
    assert ("plain", -4) in made and ("plain", 0) in made and ("plain", -5) in made


def test_green_ctx_create_error_falls_back_and_names_the_call(caplog):
    caplog.set_level(logging.WARNING, logger="voxcli.partitions")
    drv = fake_driver(fail={"cuGreenCtxCreate": 915})
    res, _ = build(drv)
    assert not res.green
    assert "cuGreenCtxCreate" in res.reason and "915" in res.reason
    assert len(_fallback_records(caplog)) == 1


def test_stream_create_failure_releases_the_half_built_context():
    drv = fake_driver(fail={"cuGreenCtxStreamCreate": 801})
    res, _ = build(drv)
    assert not res.green and "cuGreenCtxStreamCreate" in res.reason
    assert ("destroy_ctx", "ctx96") in drv.calls


def test_too_few_groups_from_the_splitter_falls_back():
    res, _ = build(fake_driver(groups_made=10))
    assert not res.green and "made 10 groups" in res.reason


def test_mig_or_restricted_sm_resource_falls_back():
    res, _ = build(fake_driver(total=66))
    assert not res.green and "66" in res.reason


def test_missing_cuda_bindings_falls_back(monkeypatch):
    def boom():
        raise P.GreenContextUnavailable("cuda-bindings is not importable (ImportError: nope)")

    monkeypatch.setattr(P, "load_driver", boom)
    res, _ = build(None)
    assert not res.green and "cuda-bindings" in res.reason


def test_binding_without_a_symbol_falls_back():
    drv = fake_driver()
    del drv.cuGreenCtxStreamCreate
    res, _ = build(drv)
    assert not res.green and "AttributeError" in res.reason


def test_a_bad_layout_is_an_error_not_a_fallback():
    with pytest.raises(PartitionError):
        build(fake_driver(), 100, 32)


def test_no_split_policy_uses_plain_streams_without_warning(caplog):
    caplog.set_level(logging.WARNING, logger="voxcli.partitions")
    drv = fake_driver()
    res, _ = build(drv, split=False)
    assert not res.green and drv.calls == []
    assert _fallback_records(caplog) == []


# ---------------------------------------------------------------- the device's own granularity
def test_a_codec_partition_of_only_the_remainder_is_refused():
    # 128 = 16 groups of 8 leaves 0 whole groups for the codec: the 4-SM remainder alone is no partition.
    with pytest.raises(PartitionError, match="remainder alone"):
        plan_split(132, 128, 4)
    assert all(codec >= 8 for _, codec in P.valid_layouts(132))
    assert (128, 4) not in P.valid_layouts(132)


def test_granularity_is_read_from_the_device_when_the_driver_reports_it():
    drv = fake_driver()
    drv.cuDeviceGetDevResource = lambda dev, t: ("SUCCESS", SimpleNamespace(
        sm=SimpleNamespace(smCount=132, minSmPartitionSize=16, smCoscheduledAlignment=16)))
    with pytest.raises(PartitionError, match="groups of 16"):
        build(drv, 104, 28)  # fine in groups of 8, impossible in groups of 16 (8 groups + 4 remainder)
    res, _ = build(drv, 96, 32)
    assert res.granularity == (16, 16) and res.granularity_source == "device"
    assert ("split", 8, 0, 16) in drv.calls


def test_granularity_falls_back_to_the_cc_table_without_device_fields():
    res, _ = build(fake_driver())
    assert res.granularity == (8, 8) and res.granularity_source == "cc table"

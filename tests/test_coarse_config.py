"""COARSE system configuration: spec strings, defaults, validation."""

import pytest

from golden_model.coarse import CoarseConfig, parse_system
from golden_model.errors import ConfigError


def test_defaults_are_the_cloud_machine():
    c = CoarseConfig()
    assert (c.workers, c.devices, c.local_GBps, c.remote_GBps) == (8, 4, 9.0, 16.0)
    assert c.threshold_bytes == 2_000_000
    assert c.gpu_bandwidth == 9.0 and c.ring_bandwidth == 16.0     # documented defaults
    assert c.group_size == 2
    assert [c.local_device(w) for w in range(8)] == [0, 0, 1, 1, 2, 2, 3, 3]
    assert c.latency_cycles("local", 1.0) == 1000 and c.latency_cycles("remote", 2.0) == 4000
    assert c.path("gpu") == (9.0, 1.0) and c.path("ring") == (16.0, 2.0)


def test_spec_round_trip_and_overrides():
    c = parse_system("coarse:W=8,M=4,local=9,remote=16")
    assert c == CoarseConfig() and c.spec == "coarse:W=8,M=4,local=9,remote=16"
    d = parse_system(" COARSE: w=12, m=3, local=8.5, remote=4, gpu=25, ring=32, lat_local=0.5, "
                     "lat_remote=3, threshold=1MiB ")
    assert d == CoarseConfig(12, 3, 8.5, 4.0, 25.0, 32.0, 0.5, 3.0, 1 << 20)
    assert parse_system(d.spec) == d
    assert d.as_dict()["gpu_GBps"] == 25.0 and d.as_dict()["spec"] == d.spec
    assert parse_system("coarse:M=2") == CoarseConfig(devices=2)      # omitted keys: defaults


@pytest.mark.parametrize("spec,needle", [
    ("torus:4x4", "coarse:W=8"),
    ("coarse:W=8,M=3", "must divide"),
    ("coarse:W=0", "workers"),
    ("coarse:W=8.5", "whole number"),
    ("coarse:local=-1", "local bandwidth .*0.001 to 1e\\+06"),
    ("coarse:remote=fast", "not a number"),
    ("coarse:remote=inf", "remote bandwidth"),
    ("coarse:lat_local=-2", "lat_local latency .* 0 to 1000"),
    ("coarse:threshold=0", "threshold"),
    ("coarse:W=8,W=4", "twice"),
    ("coarse:X=1", "key=value"),
    ("coarse:W", "key=value"),
    ("coarse:W=2048,M=1", "limit"),
    ("coarse:W=8,,M=4", "empty name"),
])
def test_bad_specs(spec, needle):
    with pytest.raises(ConfigError, match=needle):
        parse_system(spec)


@pytest.mark.parametrize("kwargs", [dict(workers=True), dict(devices=0), dict(gpu_GBps=0),
                                    dict(ring_GBps=float("nan")), dict(threshold_bytes=1.5)])
def test_bad_fields(kwargs):
    with pytest.raises(ConfigError):
        CoarseConfig(**kwargs)

"""The CXL.mem controller in Icarus and Verilator (cocotb, tb/cxl/cocotb_cxl.py).

One build per simulator (cached under build/<toolchain>/cxl/), one simulation running every
cocotb test of the module; each cocotb test is reported as its own pytest test:

* ``random_mix``: random requests and tags, partial writes, bad requests, duplicate tags, random
  gaps and back-pressure on NDR and DRS, with the accumulate window on; credits checked every
  cycle; then held reads time out and the whole memory is read back; scoreboarded against
  tb/cxl/model.py.
* ``sync_round``: W workers push int32 shards into the window and read the reduced tensors
  back (bit for bit against the model and numpy's wrap-around sum).
* ``bad_requests``: the defined error responses; nothing else in memory changes.
* ``held_read_timeout``: a held read completes with poisoned MemData after TIMEOUT cycles.

The slow soak runs longer random mixes with other seeds.
"""

import pytest

from tb.cxl.run import CXLBuild
from tb.runner import SIMULATORS

COCOTB_TESTS = ("random_mix", "sync_round", "bad_requests", "held_read_timeout")

_results = {}


def _run(sim, **params):
    key = (sim, tuple(sorted(params.items())))
    if key not in _results:
        build = CXLBuild(sim).build()
        _results[key] = build.run(**params)
    return _results[key]


@pytest.mark.parametrize("test", COCOTB_TESTS)
@pytest.mark.parametrize("sim", SIMULATORS)
def test_cocotb(sim, test):
    results = _run(sim, seed=1)
    if "<crash>" in results:
        pytest.fail(results["<crash>"].message)
    assert test in results, f"{test} did not run; results: {sorted(results)}"
    assert results[test].passed, results[test].message


@pytest.mark.slow
@pytest.mark.parametrize("seed", [2, 3, 4])
@pytest.mark.parametrize("sim", SIMULATORS)
def test_cocotb_soak(sim, seed):
    results = _run(sim, seed=seed, messages=4000, workers=6)
    failed = {name: r.message for name, r in results.items() if not r.passed}
    assert set(COCOTB_TESTS) <= set(results), sorted(results)
    assert not failed, "\n\n".join(f"{k}: {v}" for k, v in failed.items())

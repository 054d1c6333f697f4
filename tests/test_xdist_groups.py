"""The default suite's scheduling (``tests/conftest.py``): under ``--dist loadgroup`` the tests of
one simulator build carry one ``xdist_group``, so one pytest-xdist worker builds each model.

Grouping broke silently twice (the conftest hook ran after xdist's, and pytest 9.2 moved node
ids out of xdist's reach, pytest-dev/pytest-xdist#1386), each time making two workers build the
same model; this test runs pytest-xdist itself, with ``--setup-plan`` so no test body runs."""

import re
import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).parent


def test_tests_of_one_build_share_one_xdist_group():
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-n", "2", "--dist", "loadgroup", "-v", "--setup-plan",
         "-p", "no:cacheprovider", str(TESTS / "test_hw_allreduce.py"),
         "-k", "test_allreduce and torus:4x4 and message and float32 or missing_dependency"],
        capture_output=True, text=True, cwd=TESTS.parent, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    groups = dict(re.findall(r"^(tests/test_hw_allreduce\.py::\S+?\])(?:@(\S+))?", done.stdout,
                             re.MULTILINE))
    torus = {test: group for test, group in groups.items() if "torus:4x4" in test}
    # the matrix's four algorithms on the build (verilator, torus:4x4, float32, message)
    assert len(torus) == 4, done.stdout[-3000:]
    assert set(torus.values()) == {"test_hw_allreduce-verilator-torus:4x4-float32-message"}
    stalls = {test: group for test, group in groups.items() if "missing_dependency" in test}
    assert stalls == {
        "tests/test_hw_allreduce.py::test_missing_dependency_is_reported_as_a_stall[icarus]":
            "test_hw_allreduce-icarus",
        "tests/test_hw_allreduce.py::test_missing_dependency_is_reported_as_a_stall[verilator]":
            "test_hw_allreduce-verilator"}

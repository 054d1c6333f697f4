"""Package boundaries (design.md): the golden model never imports hardware or testbenches, the
hardware never imports testbenches or the command line, the testbenches never import the command
line, and no package imports another package's private names. Read from the source with ``ast``,
function-local imports included."""

import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
PACKAGES = ("golden_model", "hdl", "tb", "allreduce_rtl")
#: What each package must not import (top-level module names).
FORBIDDEN = {
    "golden_model": {"hdl", "tb", "allreduce_rtl", "amaranth", "cocotb", "cocotb_tools"},
    "hdl": {"tb", "allreduce_rtl", "cocotb", "cocotb_tools"},
    "tb": {"allreduce_rtl"},
    "allreduce_rtl": set(),
}


def _imports(path, package):
    """``(line, top-level module, names)`` of every import in ``path`` (relative ones resolved)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    depth = len(path.relative_to(ROOT / package).parts)      # file's depth inside the package
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name.split(".")[0], []
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                top = package if node.level <= depth else None
                if top is None:
                    raise AssertionError(f"{path}:{node.lineno}: import above its package")
            else:
                top = node.module.split(".")[0]
            yield node.lineno, top, [a.name for a in node.names]


def _files(package):
    return sorted((ROOT / package).rglob("*.py"))


@pytest.mark.parametrize("package", PACKAGES)
def test_no_forbidden_imports(package):
    bad = [f"{path.relative_to(ROOT)}:{line} imports {top}"
           for path in _files(package) for line, top, _ in _imports(path, package)
           if top in FORBIDDEN[package]]
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("package", PACKAGES)
def test_no_private_names_across_packages(package):
    bad = [f"{path.relative_to(ROOT)}:{line} imports {name} from {top}"
           for path in _files(package) for line, top, names in _imports(path, package)
           if top in PACKAGES and top != package
           for name in names if name.startswith("_")]
    assert not bad, "\n".join(bad)


def test_the_checks_see_real_imports():
    """The scan finds imports that exist (so an empty result above means something)."""
    found = {top for path in _files("allreduce_rtl") for _, top, _ in _imports(path,
                                                                                "allreduce_rtl")}
    assert {"golden_model", "hdl", "tb", "allreduce_rtl"} <= found

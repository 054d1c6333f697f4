"""A prefix on every module name of a generated Verilog file, so that two generated networks
(whose modules are all called ``network``, ``network_ni``, ``allreduce_ram_*``, ...) can live in
one design (``generate --prefix``)."""

import re

from golden_model.errors import ConfigError

__all__ = ["prefix_modules", "module_names"]

# Letters, digits and _ only: the prefix also names the FuseSoC core, which takes no $.
_PREFIX = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
# A module name: an escaped identifier (``\`` up to white space) or a simple one.
_NAME = r"(\\\S+|[A-Za-z_][A-Za-z0-9_$]*)"
_DECL = re.compile(rf"^(\s*module\s+){_NAME}", re.M)


def module_names(verilog):
    """The names of the modules ``verilog`` declares, in order."""
    return [m.group(2) for m in _DECL.finditer(verilog)]


def prefix_modules(verilog, prefix):
    """``verilog`` with ``prefix`` put before every module name it declares, at the
    declaration and at every instance (escaped names keep their backslash: ``\\a.b`` becomes
    ``\\<prefix>a.b``).

    Raises
    ------
    ConfigError
        If ``prefix`` is not a letter or ``_`` followed by letters, digits or ``_`` (the start
        of a Verilog identifier that also suits a FuseSoC core name).
    """
    if not _PREFIX.match(prefix):
        raise ConfigError(f"--prefix {prefix!r}: a module-name prefix is a letter or _ followed "
                          f"by letters, digits or _")
    names = set(module_names(verilog))

    def renamed(name):
        return "\\" + prefix + name[1:] if name.startswith("\\") else prefix + name

    out = _DECL.sub(lambda m: m.group(1) + renamed(m.group(2)), verilog)
    # An instance: the module's name first on its line, then the instance's name and its ports.
    inst = re.compile(rf"^(\s*){_NAME}(\s+(?:#\s*\(|\\\S+\s*\(|[A-Za-z_][A-Za-z0-9_$]*\s*\())",
                      re.M)
    return inst.sub(lambda m: m.group(1) + (renamed(m.group(2)) if m.group(2) in names
                                            else m.group(2)) + m.group(3), out)

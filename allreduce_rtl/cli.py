"""The ``allreduce-rtl`` command line.

Each subcommand lives in one module of :data:`COMMAND_MODULES`, whose ``register(subparsers)``
adds its parsers (``set_defaults(func=...)``); a command that takes a topology parses it itself
(``options.topology``). Bad input (``ConfigError`` from anywhere below, or an argparse usage
error) is one line on stderr and exit code 2; an environment failure (a build error, a missing
tool, an unwritable folder: ``EnvironmentFailure``) is one line and exit code 1; files are written
whole or not at all.
"""

import argparse
import json
import re
import sys
import warnings

from golden_model.errors import ConfigError

from . import (board_commands, coarse_commands, commands, cost_commands, explore_commands,
               hardware_commands, interchange_commands, training_commands)
from .errors import EnvironmentFailure

PROG = "allreduce-rtl"
#: The modules that add subcommands, in the order ``--help`` lists them.
COMMAND_MODULES = (commands, interchange_commands, hardware_commands, training_commands,
                   coarse_commands, cost_commands, board_commands, explore_commands)


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line naming the problem (exit code 2)."""

    def error(self, message):
        if "expected one argument" in message:
            message += " (for a value that starts with '-', write it as --option=VALUE)"
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _version():
    from golden_model.provenance import tool_version
    return tool_version()


def build_parser():
    parser = _Parser(prog=PROG, description="Design, generate and verify all-reduce network "
                     "hardware; compare all-reduce algorithms with the golden model.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    for module in COMMAND_MODULES:
        module.register(sub)
    parser.subcommands = sub.choices
    return parser


def main(argv=None):
    """Entry point of ``allreduce-rtl``; returns the process exit code."""
    parser = build_parser()
    argv = sys.argv[1:] if argv is None else list(argv)
    for arg in argv:
        # argparse hands an option written --opt=-- an empty list without checking its type
        option = re.fullmatch(r"(--?[A-Za-z][\w-]*)=--", str(arg))
        if option:
            parser.error(f"argument {option.group(1)}: '--' is not a value")
    args, extra = parser.parse_known_args(argv)
    if extra:
        # Said by the subcommand's parser, which names itself and its --help.
        parser.subcommands[args.command].error(f"unrecognized arguments: {' '.join(extra)}")
    try:
        with warnings.catch_warnings():
            # A design refused halfway leaves Amaranth components never elaborated; their
            # "created but never used" warning is about this toolkit's code, not the user's
            # input, and would make a one-line error several.
            from amaranth.hdl import UnusedElaboratable  # noqa: PLC0415
            warnings.simplefilter("ignore", UnusedElaboratable)
            return args.func(args) or 0
    except ConfigError as exc:
        # Said like argparse's own usage errors: the subcommand, and where its help is.
        command = f"{PROG} {args.command}"
        print(f"{command}: error: {exc} (see {command} --help)", file=sys.stderr)
        return 2
    except EnvironmentFailure as exc:
        lines = str(exc).strip().splitlines() or ["environment failure"]
        print(f"{PROG}: error: {lines[0]}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0


def print_json(obj):
    """Print a command's JSON object, stamped with its schema and tool versions
    (``golden_model.provenance.stamp``)."""
    from golden_model.provenance import stamp
    json.dump(stamp(obj), sys.stdout, indent=2)
    sys.stdout.write("\n")


if __name__ == "__main__":
    sys.exit(main())

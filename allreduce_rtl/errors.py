"""The command line's error for failures of the environment rather than of the input."""

__all__ = ["EnvironmentFailure"]


class EnvironmentFailure(RuntimeError):
    """The environment failed the command (a build error, a missing tool, an unwritable build
    folder): ``cli.main`` prints the message on one line and exits with code 1."""

"""The one exception type for bad user input, so the CLI can turn it into exit code 2."""


class ConfigError(ValueError):
    """A value given by the user (topology spec, algorithm name, size, option) is not allowed.

    The message names the bad value and what is allowed; the CLI prints it on one line and exits
    with code 2.
    """

"""Exceptions the library raises; olcli/cli.py turns them into messages and exit codes."""


class OlcliError(Exception):
    """A problem the user can fix; the message says what and how. Exit code 1."""

    exit_code = 1


class DataError(OlcliError):
    """Unreadable or malformed input data."""


class ModelError(OlcliError):
    """A model file that cannot be read or does not fit the run."""


class UsageError(OlcliError):
    """Options that do not make sense together. Exit code 2."""

    exit_code = 2


class Diverged(OlcliError):
    """Predictions became NaN or infinite: the run stops and no model is written."""

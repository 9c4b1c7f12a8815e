"""Exceptions the library raises; olcli/cli.py turns them into messages and exit codes.

Bad data and bad options are also ``ValueError``s, so Python callers (and
scikit-learn) can catch them as such.
"""


class OlcliError(Exception):
    """A problem the user can fix; the message says what and how. Exit code 1."""

    exit_code = 1


class DataError(OlcliError, ValueError):
    """Unreadable or malformed input data."""


class ModelError(OlcliError):
    """A model file that cannot be read or does not fit the run."""


class UsageError(OlcliError, ValueError):
    """Options that do not make sense together. Exit code 2."""

    exit_code = 2


class Diverged(OlcliError):
    """Predictions became NaN or infinite: the run stops and no model is written."""


class MissingExtra(OlcliError):
    """An optional capability whose extra is not installed."""

    def __init__(self, feature: str, extra: str):
        super().__init__(f"{feature} needs the optional extra: pip install \"olcli[{extra}]\"")
        self.extra = extra

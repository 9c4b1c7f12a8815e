"""Exceptions the library raises; olcli/cli.py turns them into messages and exit codes.

Bad data and bad options are also ``ValueError``s, so Python callers (and
scikit-learn) can catch them as such. An error about one option's value carries it as
fields (``option``: the setting's keyword, ``value``, ``reason``), so a caller decides on
those, never on the message's words. A message given where the error is raised names the
keyword and the flag (``quantile_tau (--quantile-tau) must be between 0 and 1 (got 1.5)``)
and the CLI prints it as it is; an error worded from its fields names the keyword
(``passes must be at least 1``) and the CLI words it once with the flag
(``--passes must be at least 1``).
"""


class OlcliError(Exception):
    """A problem the user can fix; the message says what and how. Exit code 1."""

    exit_code = 1

    def __init__(self, *args, option: str | None = None, value=None, reason: str | None = None):
        """``args``: the message, as for any exception; without one, the message is worded
        from the fields, ``option reason`` (``passes must be at least 1``), and
        ``from_fields`` is true: the CLI words it again with the option's flag."""
        self.from_fields = not args and option is not None and reason is not None
        if self.from_fields:
            args = (f"{option} {reason}",)
        super().__init__(*args)
        self.option = option
        self.value = value
        self.reason = reason


class DataError(OlcliError, ValueError):
    """Unreadable or malformed input data."""


class ModelError(OlcliError):
    """A model file that cannot be read or does not fit the run."""


class UsageError(OlcliError, ValueError):
    """Options that do not make sense together. Exit code 2."""

    exit_code = 2


class Diverged(OlcliError):
    """Predictions (or the model's numbers) became NaN or infinite: the run stops and no model is written."""


class MissingExtra(OlcliError):
    """An optional capability whose extra is not installed."""

    def __init__(self, feature: str, extra: str):
        super().__init__(f"{feature} needs the optional extra: pip install \"olcli[{extra}]\"")
        self.extra = extra

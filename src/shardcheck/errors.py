"""The one error base class of shardcheck, and the input error every bad input becomes."""


class ShardcheckError(Exception):
    """Base class of the errors shardcheck raises on purpose."""


class InputError(ShardcheckError):
    """An input that cannot be used: the message is one line naming file:line and what to do."""


class UnreadableInput(InputError):
    """A path that cannot be read at all: missing, a directory where a file is needed, no permission."""


class NoLaunchError(InputError):
    """A readable file with no launch command shardcheck recognises: skipped, not an error."""


class UsageError(InputError):
    """A command-line value or setting that cannot be used (``--device`` no device has): exit status 2."""


class SettingsError(UsageError):
    """A ``[tool.shardcheck]`` table that cannot be used (a usage error, like a bad command-line option)."""

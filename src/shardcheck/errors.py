"""The one error base class of shardcheck, and the input error every bad input becomes."""


class ShardcheckError(Exception):
    """Base class of the errors shardcheck raises on purpose."""


class InputError(ShardcheckError):
    """An input that cannot be used: the message is one line naming file:line and what to do."""

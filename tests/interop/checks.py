"""What the Python interop peers share: the `connect` of the installed `websockets` release,
and `check`, which counts the checks that pass and raises `CheckFailed` at the first that
does not."""

try:  # websockets >= 13
    from websockets.asyncio.client import connect
except ImportError:  # pragma: no cover - older releases
    from websockets import connect

__all__ = ["CheckFailed", "check", "connect", "passed"]


class CheckFailed(Exception):
    pass


_passed = 0


def check(condition, what):
    global _passed
    if not condition:
        raise CheckFailed(what)
    _passed += 1


def passed():
    """How many checks have passed so far."""
    return _passed

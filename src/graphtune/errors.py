"""Exception hierarchy: every error graphtune raises on purpose derives from GraphtuneError."""
from __future__ import annotations


class GraphtuneError(Exception):
    """Base class of every error graphtune raises deliberately."""


class UntunedError(GraphtuneError):
    """A kernel met a key it has no tuned config for, where tuning is not allowed (capture, frozen)."""


class TuningError(GraphtuneError):
    """Every candidate config of a kernel failed for one key."""


class ConfigError(GraphtuneError, ValueError):
    """A forced config, a config string, or a parameter name that does not exist."""


class DatabaseError(GraphtuneError):
    """A tuning database or export file that cannot be used."""


class InspectError(GraphtuneError, ValueError):
    """Bad input to the resource inspector (unknown target, signature mismatch, missing constexpr)."""


class DistributedError(GraphtuneError):
    """Ranks of a process group disagree on what they tune, or a peer did not answer in time."""

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


class UserCodeError(GraphtuneError):
    """User code that graphtune was asked to load or call failed (import, syntax, a target's make_args)."""


class DistributedError(GraphtuneError):
    """Ranks of a process group disagree on what they tune, or a peer did not answer in time."""


def one_line(exc: BaseException) -> str:
    """One line that says why something failed: the place, source line and cause of a Triton front-end
    compile error, the ptxas error of a compile failure (not the PTX dump that comes with it), else the first
    line that mentions an error, else the first line; at most 300 characters."""
    node = getattr(exc, "node", None)
    if hasattr(exc, "error_message") and hasattr(node, "lineno"):
        # triton's CompilationError: "at L:C:", a dozen source lines, then the cause; keep the place, the
        # offending line and the cause
        src_lines = (getattr(exc, "src", None) or "").splitlines()
        code = src_lines[node.lineno - 1].strip() if 0 < node.lineno <= len(src_lines) else ""
        cause = exc.error_message or (one_line(exc.__cause__) if exc.__cause__ is not None else "")
        text = f"{type(exc).__name__} at {node.lineno}:{node.col_offset} ({code}): {cause}"
        return text if len(text) <= 300 else text[:297] + "..."
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    picked = next((ln for ln in lines if ln.startswith("ptxas") and ("fatal" in ln or "error" in ln)), None)
    if picked is None:
        picked = next((ln for ln in lines if "error" in ln.lower()), lines[0] if lines else "")
    text = f"{type(exc).__name__}: {picked}" if picked else type(exc).__name__
    return text if len(text) <= 300 else text[:297] + "..."

"""What the audit reports: a finding (``Hazard``), a key's binding, an in-place finding, one kernel's
audit (``KernelAudit``), files that failed, the whole report (``AuditReport``), and the hazard codes' explanations."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any


HAZARD = "hazard"
INFO = "info"

_EXPLANATIONS = {
    "tunes-at-runtime": "a new key value is benchmarked on its first call, inside CUDA graph capture if warm-up "
                        "missed it (the capture fails)",
    "unknown-key": "silently ignored by triton 3.6, an error in triton 3.9",
    "in-place-without-restore": "benchmarking runs the kernel many times on the caller's tensors and changes "
                                "the data",
    "dynamic-configs": "the audit cannot count them",
    "single-config": "triton skips benchmarking with one config: capture-safe",
    "capture-safe": "graphtune.autotune never tunes inside CUDA graph capture",
    "tunes-on-first-call": "tunes once per tensor-dtype combination on the first call; an eager warm-up covers it",
    "tunes-per-model": "tuned once per model shape; any warm-up covers it",
    "unknown-autotuner": "the audit cannot tell whether it benchmarks at run time (audit the tree that defines it "
                         "too)",
    "splatted-arguments": "arguments passed through **mapping are not read: a key, restore_value / reset_to_zero "
                          "or configs given there are not seen",
}


def explain(code: str) -> str:
    """The one-line explanation of a finding code (as printed once by the CLI)."""
    return _EXPLANATIONS.get(code, code)


@dataclass(frozen=True)
class Hazard:
    code: str
    severity: str  # HAZARD or INFO
    message: str

    def to_dict(self) -> dict[str, str]:
        return {"code": self.code, "severity": self.severity, "message": self.message}


@dataclass(frozen=True)
class KeyBinding:
    """How one key name's value is bound where the kernel is launched.

    ``binding`` is ``"batch"`` (follows a batch, token or sequence dimension: a new batch size can bring a
    new key value), ``"model"`` (a model dimension, a config attribute, a literal or a flag: fixed for a
    model) or ``"unknown"`` (no call site found, or one the audit cannot read). ``evidence`` holds
    ``file:line: text`` entries, the call site first, then the binding that decided it.
    """
    name: str
    binding: str
    evidence: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "binding": self.binding, "evidence": list(self.evidence)}


@dataclass(frozen=True)
class InPlaceFinding:
    """A pointer parameter loaded (at ``loads``) and stored (at ``stores``) by the same kernel, the load able
    to see what an earlier launch stored (lines are file lines)."""
    param: str
    loads: tuple[int, ...]
    stores: tuple[int, ...]
    atomic: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {"param": self.param, "loads": list(self.loads), "stores": list(self.stores), "atomic": self.atomic}


@dataclass(frozen=True)
class KernelAudit:
    """One autotuned kernel as found in source.

    ``key`` is None when the key is not a static list of names (its text is then in ``key_expr``).
    ``n_configs`` is None when the config list is not counted (``configs`` is ``"dynamic"``, why in
    ``configs_reason``; or ``"unknown"`` for a decorator named like an autotuner that the audit cannot
    see into). ``reset_to_zero`` / ``restore_value`` / ``do_not_specialize`` are None when not given, a
    tuple when static, the expression text when not. ``num_warps`` / ``num_stages`` / ``constexprs`` are
    the distinct values seen (triton's defaults 4 / 3 where a Config leaves them out).
    """
    file: str
    line: int
    name: str
    function: str | None  # the decorated def (differs from name when applied by call: k = autotune(...)(f))
    wrapper: str  # "triton" (triton.autotune or a wrapper over triton's Autotuner), "graphtune" or "unknown"
    params: tuple[str, ...] | None
    key: tuple[str, ...] | None
    key_expr: str | None
    n_configs: int | None
    configs: str  # "static", "dynamic" or "unknown"
    configs_reason: str | None
    num_warps: tuple[Any, ...]
    num_stages: tuple[Any, ...]
    constexprs: tuple[tuple[str, tuple[Any, ...]], ...]
    heuristics: tuple[str, ...]
    prune_configs_by: str | None
    reset_to_zero: tuple[str, ...] | str | None
    restore_value: tuple[str, ...] | str | None
    do_not_specialize: tuple[Any, ...] | str | None
    hazards: tuple[Hazard, ...] = ()
    wrapper_name: str | None = None  # the decorator as resolved: "triton.autotune", "pkg.utils.cache_autotune"
    wrapper_defined_at: str | None = None  # file:line of a wrapper defined in the audited tree
    triton_via: str | None = None  # the module of the audited tree that re-exports triton to this file
    configs_env: tuple[str, ...] = ()  # environment variables whose defaults the config count assumes
    keys: tuple[KeyBinding, ...] = ()
    call_sites: tuple[str, ...] = ()  # file:line of each launch found
    in_place: tuple[InPlaceFinding, ...] = ()

    @property
    def codes(self) -> tuple[str, ...]:
        return tuple(h.code for h in self.hazards)

    def to_dict(self) -> dict[str, Any]:
        def seq(value: Any) -> Any:
            return list(value) if isinstance(value, tuple) else value
        return {
            "file": self.file, "line": self.line, "name": self.name, "function": self.function,
            "wrapper": self.wrapper, "params": seq(self.params), "key": seq(self.key), "key_expr": self.key_expr,
            "n_configs": self.n_configs, "configs": self.configs, "configs_reason": self.configs_reason,
            "num_warps": list(self.num_warps), "num_stages": list(self.num_stages),
            "constexprs": {name: list(values) for name, values in self.constexprs},
            "heuristics": list(self.heuristics), "prune_configs_by": self.prune_configs_by,
            "reset_to_zero": seq(self.reset_to_zero), "restore_value": seq(self.restore_value),
            "do_not_specialize": seq(self.do_not_specialize),
            "hazards": [h.to_dict() for h in self.hazards],
            "wrapper_name": self.wrapper_name, "wrapper_defined_at": self.wrapper_defined_at,
            "triton_via": self.triton_via, "configs_env": list(self.configs_env),
            "keys": [k.to_dict() for k in self.keys], "call_sites": list(self.call_sites),
            "in_place": [f.to_dict() for f in self.in_place],
        }


@dataclass(frozen=True)
class FileFailure:
    file: str
    error: str

    def to_dict(self) -> dict[str, str]:
        return {"file": self.file, "error": self.error}


@dataclass(frozen=True)
class AuditReport:
    """``files_scanned`` counts every Python file read, including those in ``files_failed``;
    ``files_parsed`` those the audit parsed and analysed (they could hold or launch a kernel, re-export triton,
    define a wrapper, or were named explicitly); a file that failed to parse is in ``files_failed`` only, so
    each file counts once."""
    kernels: tuple[KernelAudit, ...]
    files_scanned: int
    files_failed: tuple[FileFailure, ...]
    compile_target: str | None = None
    compile_errors: tuple[FileFailure, ...] = ()
    files_parsed: int | None = None

    @property
    def by_hazard(self) -> dict[str, int]:
        """Every finding by code, informational ones included."""
        counts: dict[str, int] = {}
        for kernel in self.kernels:
            for hazard in kernel.hazards:
                counts[hazard.code] = counts.get(hazard.code, 0) + 1
        return dict(sorted(counts.items()))

    @property
    def hazards_by_code(self) -> dict[str, int]:
        """Findings of severity ``hazard`` only, by code."""
        counts: dict[str, int] = {}
        for kernel in self.kernels:
            for hazard in kernel.hazards:
                if hazard.severity == HAZARD:
                    counts[hazard.code] = counts.get(hazard.code, 0) + 1
        return dict(sorted(counts.items()))

    @property
    def compile_checked(self) -> int | None:
        """With a compile target: the kernels the compile check inspected (the others carry ``compile-skipped``:
        their module did not import, or their argument types are unknown, as for a stock ``triton.autotune`` kernel
        without a ``graphtune_signature``); None without one."""
        if self.compile_target is None:
            return None
        return sum(not any(h.code == "compile-skipped" for h in k.hazards) for k in self.kernels)

    @property
    def n_hazards(self) -> int:
        """Findings of severity ``hazard`` (informational ones not counted)."""
        return sum(h.severity == HAZARD for k in self.kernels for h in k.hazards)

    def to_dict(self) -> dict[str, Any]:
        return {
            "kernels": [k.to_dict() for k in self.kernels],
            "summary": {
                "files_scanned": self.files_scanned,
                "files_parsed": self.files_parsed,
                "files_failed": [f.to_dict() for f in self.files_failed],
                "kernels": len(self.kernels),
                "hazards": self.n_hazards,
                "by_hazard": self.by_hazard,
                "hazards_by_code": self.hazards_by_code,
                "compile_target": self.compile_target,
                "compile_checked": self.compile_checked,
                "compile_errors": [f.to_dict() for f in self.compile_errors],
            },
        }

"""One kernel's findings as hazards (code, severity, message), from what the other analyses found.
``cand`` is a ``module._Candidate`` (named in annotations only)."""
from __future__ import annotations

from .results import _EXPLANATIONS, HAZARD, Hazard, INFO, InPlaceFinding, KeyBinding


def _hazards(cand: _Candidate, wrapper: str, params: tuple[str, ...] | None, key: tuple[str, ...] | None,
             n_configs: int | None, reason: str | None, in_place: list[InPlaceFinding], covered: set[str] | None,
             bindings: tuple[KeyBinding, ...], env: tuple[str, ...], wrapper_name: str | None
             ) -> tuple[Hazard, ...]:
    out: list[Hazard] = []
    several = n_configs is None or n_configs > 1
    count = "a dynamic number of" if n_configs is None else str(n_configs)
    key_text = "a dynamic key" if key is None else f"key {list(key)}"
    if wrapper == "unknown":
        out.append(Hazard("unknown-autotuner", HAZARD,
                          f"{wrapper_name} is named like an autotuner but is not defined in the audited tree: "
                          f"{_EXPLANATIONS['unknown-autotuner']}"))
    if wrapper == "triton" and several and (key is None or key):
        varying = [b.name for b in bindings if b.binding == "batch"]
        unknown = [b.name for b in bindings if b.binding == "unknown"]
        if key is None or varying or unknown:
            detail = "; ".join(part for part in (
                f"follows the batch: {varying}" if varying else "",
                f"binding unknown: {unknown}" if unknown else "") if part)
            detail = f" ({detail})" if detail else ""
            out.append(Hazard("tunes-at-runtime", HAZARD,
                              f"{count} configs and {key_text}{detail}: {_EXPLANATIONS['tunes-at-runtime']}"))
        else:
            out.append(Hazard("tunes-at-runtime", INFO,
                              f"{count} configs and {key_text}, model dimensions only: "
                              f"{_EXPLANATIONS['tunes-per-model']}"))
    if wrapper == "triton" and several and key == ():
        out.append(Hazard("tunes-on-first-call", INFO,
                          f"{count} configs and an empty key: {_EXPLANATIONS['tunes-on-first-call']}"))
    if wrapper == "graphtune":
        out.append(Hazard("capture-safe", INFO, _EXPLANATIONS["capture-safe"]))
    if key and params is not None:
        missing = [k for k in key if k not in params]
        if missing:
            out.append(Hazard("unknown-key", HAZARD,
                              f"key name(s) {missing} are not parameters of {cand.function_name}: "
                              f"{_EXPLANATIONS['unknown-key']}"))
    # With one config nothing is benchmarked, so an in-place kernel runs exactly once per call.
    if several and covered is not None:
        exposed = [f for f in in_place if f.param not in covered]
        if exposed:
            where = "; ".join(f"{f.param}: {'atomic at' if f.atomic else 'loaded at'} line(s) "
                              f"{', '.join(map(str, f.loads))}, stored at {', '.join(map(str, f.stores))}"
                              for f in exposed)
            out.append(Hazard("in-place-without-restore", HAZARD,
                              f"{[f.param for f in exposed]} loaded and stored with no restore_value/reset_to_zero "
                              f"({where}): {_EXPLANATIONS['in-place-without-restore']}"))
    if n_configs is None and wrapper != "unknown":
        out.append(Hazard("dynamic-configs", INFO,
                          f"configs not statically known ({reason}): {_EXPLANATIONS['dynamic-configs']}"))
    elif n_configs is not None and n_configs <= 1:
        assumed = f" (with the defaults of {', '.join(env)})" if env else ""
        out.append(Hazard("single-config", INFO,
                          f"{n_configs} config{'s' if n_configs != 1 else ''}{assumed}: "
                          f"{_EXPLANATIONS['single-config']}"))
    return tuple(out)

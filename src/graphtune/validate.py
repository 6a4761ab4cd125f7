"""Numerical validation of a candidate's outputs, shared by the in-process search and the isolated worker:
no NaN/inf in a floating output, and agreement with the first good candidate."""
from __future__ import annotations

from typing import Any


def relative_error(a, b) -> float:
    """Relative L2 error of ``b`` against ``a`` (float64; the absolute error when ``a`` is all zeros)."""
    a = a.double()
    b = b.double()
    denom = a.norm().item()
    num = (a - b).norm().item()
    return num / denom if denom > 0 else num


def tolerance(dtype: Any) -> float:
    """Relative L2 error allowed between two configs' outputs: configs reorder reductions, so low-precision
    outputs differ in their last bits."""
    import torch
    return 1e-3 if dtype in (torch.float32, torch.float64) else 2e-2


def check_outputs(outs: dict[str, Any], reference: dict[str, Any] | None, before: dict[str, Any],
                  ref_label: str) -> str | None:
    """Why candidate outputs ``outs`` (tensors it changed, by argument name) fail, or None. ``reference``: the
    first good candidate's outputs (None: this is the first); ``before``: the inputs as they were."""
    import torch
    bad = [n for n, v in outs.items() if v.is_floating_point() and not torch.isfinite(v).all()]
    if bad:
        return f"validate: non-finite values in {bad}"
    if reference is None:
        return None
    for n in sorted(set(reference) | set(outs)):
        a = reference.get(n, before[n])
        b = outs.get(n, before[n])
        err = relative_error(a, b)
        tol = tolerance(a.dtype)
        if err > tol:
            return f"validate: {n} differs from {ref_label} (relative L2 error {err:.3g} > {tol})"
    return None

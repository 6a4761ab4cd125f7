"""What the kernels' interfaces check of a tensor argument, in one place: the first problem, as the text of one line
(each interface prefixes its own name and the argument's)."""
from __future__ import annotations

import math
import numbers
from typing import Any

import torch


def finite_positive(value: Any) -> bool:
    """Whether ``value`` is a Python number (not a bool) that is finite and > 0: a scale or an epsilon. Compared,
    not passed to math.isfinite: under torch.compile a float argument of the compiled function is a SymFloat,
    which Dynamo compares (guarding on the outcome) but cannot give to math (NaN fails both comparisons)."""
    return (not isinstance(value, bool) and isinstance(value, (numbers.Real, torch.SymFloat))
            and 0 < value < math.inf)


def tensor_problem(t: Any, dtypes: tuple[torch.dtype, ...], *, ndim: int | None = None,
                   shape: tuple[int, ...] | None = None, device: torch.device | None = None,
                   device_of: str = "") -> str | None:
    """Why ``t`` is not a tensor of one of ``dtypes`` with ``ndim`` dimensions (or exactly ``shape``) on ``device``
    (None: any; ``device_of`` names the argument it comes from) whose last dimension is contiguous, the kernels'
    common contract; None when it is. Metadata only: it runs under torch.compile's tracing too."""
    if not isinstance(t, torch.Tensor):
        return f"expected a torch.Tensor, got {type(t).__name__}"
    if t.dtype not in dtypes:
        return f"dtype {t.dtype}, expected {' or '.join(str(d) for d in dtypes)}"
    if ndim is not None and t.dim() != ndim:
        return f"shape {tuple(t.shape)} has {t.dim()} dims, expected {ndim}"
    if shape is not None and tuple(t.shape) != shape:
        return f"shape {tuple(t.shape)}, expected {shape}"
    if device is not None and t.device != device:
        return f"on device {t.device}, expected {device}" + (f" (the device of {device_of})" if device_of else "")
    if t.numel() > 0 and t.stride(-1) != 1:
        return f"last dimension must be contiguous (stride 1), got strides {tuple(t.stride())}"
    return None

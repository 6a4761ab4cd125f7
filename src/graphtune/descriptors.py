"""Tensor-descriptor arguments: Triton's host ``TensorDescriptor`` and Gluon's (``gluon.nvidia.hopper``).

A descriptor is a small host object over a tensor (``base``, ``shape``, ``strides``, ``block_shape``, and for
Gluon a shared-memory ``layout``); Triton builds the TMA descriptor from it on the host at every launch. The
tuner needs three things from one, all here: the tensor it reads or writes (timing copies, validation,
``restore_value`` / ``reset_to_zero``), a copy of it over other storage with the same strides (the timer's
rotating input copies, the isolated worker's device copies), and its element type (the tuning key keys on
it as on a tensor's dtype).

Recognised by shape, not by class, so that all three descriptor classes of triton 3.6 (and a later one with
the same fields) are: a dataclass with ``base``, ``shape``, ``strides`` and ``block_shape``.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Mapping

_FIELDS = ("base", "shape", "strides", "block_shape")


def is_descriptor(value: Any) -> bool:
    return dataclasses.is_dataclass(value) and not isinstance(value, type) and \
        all(hasattr(value, f) for f in _FIELDS)


def tensor_of(value: Any) -> Any:
    """The tensor an argument reads or writes: the argument itself, a descriptor's ``base``, else None."""
    if hasattr(value, "data_ptr") and hasattr(value, "dtype"):
        return value
    if is_descriptor(value):
        return value.base
    return None


def tensors_of(named: Mapping[str, Any]) -> dict[str, Any]:
    """``{name: tensor}`` for every argument that is a tensor or a descriptor (its base)."""
    out = {}
    for name, value in named.items():
        t = tensor_of(value)
        if t is not None:
            out[name] = t
    return out


def strided_copy(t: Any, device: Any = None) -> Any:
    """A copy of tensor ``t`` (on ``device``, default its own) with the same sizes and strides: a descriptor's
    ``strides`` are the base's, and ``clone()`` / ``.to()`` make a view with gaps contiguous."""
    import torch
    out = torch.empty_strided(tuple(t.shape), tuple(t.stride()), dtype=t.dtype,
                              device=t.device if device is None else device)
    out.copy_(t)
    return out


def rebased(desc: Any, base: Any) -> Any:
    """The same descriptor (shape, strides, block shape, layout, padding) over another tensor."""
    return dataclasses.replace(desc, base=base)


# The mark of a tensor argument the timer's rotating input sets share rather than copy (search._rotating_calls): state
# that a config's pre-hook fills for each candidate on the object it was given (a copy made before would keep another
# candidate's contents: an MLA decode plan's rows, filled per config's grid), or that a launch and the work it is
# followed by keep between them (the plan's counters of the streamed reduction).
ROTATION_SHARED = "_graphtune_rotation_shared"


def share_across_rotations(tensor: Any) -> Any:
    """Mark ``tensor`` as one the timer's rotating input sets use as it is (:data:`ROTATION_SHARED`); returns it."""
    setattr(tensor, ROTATION_SHARED, True)
    return tensor


def rotation_copy(value: Any) -> Any:
    """An argument for another of the timer's rotating input sets: :func:`copy_arg`'s copy, or the argument itself
    where it is marked :func:`share_across_rotations`."""
    return value if getattr(value, ROTATION_SHARED, False) else copy_arg(value)


def copy_arg(value: Any, device: Any = None) -> Any:
    """A copy of one launch argument over fresh storage: tensors cloned (moved to ``device`` when given),
    descriptors rebuilt over a strided copy of their base; anything else as it is."""
    import torch
    if isinstance(value, torch.Tensor):
        return value.detach().clone() if device is None else value.detach().to(device, copy=True)
    if is_descriptor(value):
        return rebased(value, strided_copy(value.base, device))
    return value


def copy_nbytes(value: Any) -> int:
    """Bytes :func:`copy_arg` allocates for one argument (a descriptor's base copy spans its strided extent)."""
    import torch
    if isinstance(value, torch.Tensor):
        return value.numel() * value.element_size()
    if is_descriptor(value):
        t = value.base
        if t.numel() == 0:
            return 0
        extent = 1 + sum((n - 1) * st for n, st in zip(t.shape, t.stride()))
        return extent * t.element_size()
    return 0


def footprint_nbytes(values: Any) -> int:
    """Bytes of distinct storage under the arguments ``values``: a tensor and the descriptors over it (or over
    views of it) count once. What one launch can touch, where :func:`copy_nbytes` summed over the same arguments is
    what a set of copies allocates (a descriptor's copy is a storage of its own): the MLA decode passes its cache as
    a pointer and as two descriptors, which that sum counts three times."""
    seen: dict[int, int] = {}
    for value in values:
        t = tensor_of(value)
        storage = getattr(t, "untyped_storage", None)
        if storage is None:
            continue
        st = storage()
        seen[st.data_ptr()] = st.nbytes()
    return sum(seen.values())


def element_type(value: Any) -> Any:
    """A descriptor's element type (its base's dtype), as the tuning key records a tensor's dtype."""
    return value.base.dtype

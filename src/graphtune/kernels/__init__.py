"""Kernels tuned with graphtune: each family in its own folder (kernel.py, interface.py, reference.py, and
op.py registering it as ``graphtune::`` torch custom ops for torch.compile)."""
from __future__ import annotations

from .mla_decode import MLADecodePlan, mla_decode, mla_decode_op, mla_decode_reference

__all__ = ["MLADecodePlan", "mla_decode", "mla_decode_op", "mla_decode_reference"]

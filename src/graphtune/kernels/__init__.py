"""Kernels tuned with graphtune: each family in its own folder (kernel.py, interface.py, reference.py)."""
from __future__ import annotations

from .mla_decode import mla_decode, mla_decode_reference

__all__ = ["mla_decode", "mla_decode_reference"]

"""MLA decode attention over a paged fp8 / bf16 KV cache (kernel.py, interface.py, reference.py, space.py)."""
from __future__ import annotations

from .interface import mla_decode
from .reference import mla_decode_reference

__all__ = ["mla_decode", "mla_decode_reference"]

"""MLA decode attention over a paged fp8 / bf16 KV cache (kernel.py, interface.py, reference.py, space.py;
op.py: the ``graphtune::mla_decode`` torch custom ops for torch.compile)."""
from __future__ import annotations

from .op import mla_decode, mla_decode_op
from .reference import mla_decode_reference

__all__ = ["mla_decode", "mla_decode_op", "mla_decode_reference"]

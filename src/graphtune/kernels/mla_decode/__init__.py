"""MLA decode attention over a paged fp8 / bf16 KV cache (kernel.py, interface.py, reference.py, space.py;
op.py: the ``graphtune::mla_decode`` torch custom ops for torch.compile; plan.py: a decode step's plan of the
Hopper split)."""
from __future__ import annotations

from .op import mla_decode, mla_decode_op
from .plan import MLADecodePlan
from .reference import mla_decode_reference

__all__ = ["MLADecodePlan", "mla_decode", "mla_decode_op", "mla_decode_reference"]

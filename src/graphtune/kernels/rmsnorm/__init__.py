from .interface import fused_add_rmsnorm, rmsnorm_kernel
from .op import fused_add_rmsnorm_op
from .reference import fused_add_rmsnorm_reference

__all__ = ["fused_add_rmsnorm", "fused_add_rmsnorm_op", "fused_add_rmsnorm_reference", "rmsnorm_kernel"]

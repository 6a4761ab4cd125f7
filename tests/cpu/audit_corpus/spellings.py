"""Every way of spelling triton.autotune / graphtune.autotune that the audit must recognise."""
import graphtune
import graphtune as gt
import triton
import triton as tt
import triton.language as tl
import triton.runtime.autotuner
from graphtune import autotune as gt_autotune
from triton import autotune as at
from triton import heuristics, jit
from triton.runtime import autotuner

TWO = [triton.Config({"BLOCK": 64}, num_warps=4), triton.Config({"BLOCK": 128}, num_warps=8)]


@triton.autotune(configs=TWO, key=["n"])
@triton.jit
def plain_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


@tt.autotune(configs=TWO, key=["n"])
@tt.jit
def alias_module_kernel(x_ptr, n, BLOCK: tl.constexpr):
    pass


@at(TWO, ["n"])
@jit
def alias_function_kernel(x_ptr, n, BLOCK: tl.constexpr):
    pass


@triton.runtime.autotuner.autotune(configs=TWO, key=["n"])
@triton.jit
def dotted_kernel(x_ptr, n, BLOCK: tl.constexpr):
    pass


@autotuner.autotune(configs=TWO, key=["n"])
@triton.jit
def submodule_kernel(x_ptr, n, BLOCK: tl.constexpr):
    pass


@triton.heuristics(values={"EVEN": lambda args: args["n"] % args["BLOCK"] == 0})
@triton.autotune(configs=TWO, key=["n"])
@triton.jit(do_not_specialize=["n"])
def heuristics_outside_kernel(x_ptr, n, BLOCK: tl.constexpr, EVEN: tl.constexpr):
    pass


@triton.autotune(configs=TWO, key=["n"])
@heuristics({"EVEN": lambda args: args["n"] % args["BLOCK"] == 0})
@triton.jit
def heuristics_inside_kernel(x_ptr, n, BLOCK: tl.constexpr, EVEN: tl.constexpr):
    pass


def applied_body(x_ptr, n, BLOCK: tl.constexpr):
    pass


applied_kernel = triton.autotune(configs=TWO, key=["n"])(triton.jit(applied_body))


@triton.jit(do_not_specialize=[1])
def applied_jitted(x_ptr, n, BLOCK: tl.constexpr):
    pass


applied_alias_kernel = tt.autotune(configs=TWO, key=["n"])(applied_jitted)
applied_stack_kernel = tt.autotune(TWO, ["n"])(tt.heuristics({"EVEN": lambda a: True})(tt.jit(applied_body)))


@graphtune.autotune(configs=TWO, key=["n"])
@triton.jit
def graphtune_kernel(x_ptr, n, BLOCK: tl.constexpr):
    pass


@gt.autotune(configs=TWO, key=["n"])
@triton.jit
def graphtune_alias_kernel(x_ptr, n, BLOCK: tl.constexpr):
    pass


@gt_autotune(configs=TWO, key=["n"])
@triton.jit
def graphtune_function_kernel(x_ptr, n, BLOCK: tl.constexpr):
    pass


# Not kernels: plain jit, a decorator factory that is never applied, an unrelated decorator named autotune.
@triton.jit
def jit_only(x_ptr):
    pass


unused_factory = triton.autotune(configs=TWO, key=["n"])


def autotune(**kwargs):
    return lambda fn: fn


@autotune(configs=TWO, key=["n"])
def not_triton(x_ptr, n):
    pass

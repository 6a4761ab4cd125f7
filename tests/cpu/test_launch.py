"""launch.py mirrors what ``JITFunction.run`` does on every launch. Each test pins one piece of the installed
Triton's ``run`` that the direct launch relies on or re-implements; it fails when Triton changes that code,
which is the signal to update launch.py."""
from __future__ import annotations

import inspect

import torch
import triton
import triton.language as tl
from triton.runtime.jit import JITFunction

from graphtune.launch import FastLaunch

RUN = inspect.getsource(JITFunction.run)


def test_device_and_stream_come_from_the_active_driver():
    assert "driver.active.get_current_device()" in RUN
    assert "driver.active.get_current_stream(device)" in RUN


def test_pre_run_hooks_are_called_by_run_so_the_direct_launch_is_off_while_any_is_set():
    assert "for hook in self.pre_run_hooks" in RUN
    jit = _jit()
    fast = FastLaunch(jit, jit.arg_names)
    assert fast.usable()
    jit.add_pre_run_hook(lambda *a, **k: None)
    try:
        assert not fast.usable()
    finally:
        jit.pre_run_hooks.clear()


def test_the_global_variable_guard_is_the_one_launch_py_checks():
    assert "self.used_global_vals.items()" in RUN
    assert "has changed since we compiled this kernel" in RUN
    src = inspect.getsource(FastLaunch.globals_unchanged)
    assert "self.jit.used_global_vals.items()" in src


def test_the_compiled_kernel_is_launched_with_the_arguments_launch_py_passes():
    assert ("kernel.run(grid_0, grid_1, grid_2, stream, kernel.function, kernel.packed_metadata, launch_metadata,"
            in " ".join(RUN.split()))
    assert "knobs.runtime.launch_enter_hook, knobs.runtime.launch_exit_hook" in RUN
    assert "kernel.launch_metadata(grid, stream, *bound_args.values())" in RUN


def test_the_specialisation_triton_uses_is_no_finer_than_the_signature():
    # Triton specialises ints on ==1 and % 16 and (from the binder) tensors on 16-byte alignment; the direct
    # launch's signature distinguishes at least those classes.
    from triton.runtime import jit as jit_mod
    src = inspect.getsource(jit_mod)
    assert "specialize_impl" in src
    jit = _jit()
    fast = FastLaunch(jit, jit.arg_names)

    def sig(args):   # an empty cache: every launch misses, and the Miss carries (key values, signature)
        return fast.hit(args, (1,)).key[1]
    assert sig((1,))[0] != sig((2,))[0] != sig((16,))[0]
    assert sig((2 ** 31,))[0] != sig((16,))[0]
    x = torch.zeros(64)
    assert sig((x, x, 7))[:2] == ((torch.float32, True), (torch.float32, True))
    assert sig((x[1:], x, 7))[0] == (torch.float32, False)       # not 16-byte aligned
    assert sig((x, x, 7, 64)) != sig((x, x, 7, 128))               # constexpr values
    assert fast.hit((x, x, 7, 64, 1), (1,)) is None                 # more arguments than parameters: Triton's binder
    assert fast.hit((x, x, (1, 2)), (1,)) is None                   # an argument type left to Triton


class _Payload:
    hits = 0


class _StandInKernel:
    packed_metadata = function = None

    def __init__(self):
        self.launches = []

    def run(self, *args):
        self.launches.append(args)


def test_the_cache_is_keyed_by_raw_key_values_and_bounded(monkeypatch):
    import graphtune.launch as launch
    monkeypatch.setattr(launch, "_get_device", lambda: 0)
    monkeypatch.setattr(launch, "_get_stream", lambda device: 0)
    jit = _jit()
    fast = FastLaunch(jit, jit.arg_names, key_positions=[2])
    x = torch.zeros(64)
    compiled, payload = _StandInKernel(), _Payload()
    miss = fast.hit((x, x, 40), (1,))
    assert miss.key[0] == (40,)                 # the value itself: a hit calls no bucket function
    fast.remember(miss.key, payload, compiled, (64,))
    assert fast.hit((x, x, 40), (3,)) is compiled
    assert compiled.launches[-1][:4] == (3, 1, 1, 0) and compiled.launches[-1][-4:] == (x, x, 40, 64)
    assert payload.hits == 1
    assert type(fast.hit((x, x, 41), (1,))) is launch.Miss   # another value of the same bucket: the slow path once
    monkeypatch.setattr(FastLaunch, "MAX_ENTRIES", 2)
    for n in (41, 42):
        fast.remember(fast.hit((x, x, n), (1,)).key, payload, compiled, (64,))
    assert len(fast.cache) == 1 and fast.hit((x, x, 42), (1,)) is compiled   # full: started over


def test_config_values_are_appended_only_when_they_are_the_trailing_parameters():
    jit = _jit()
    fast = FastLaunch(jit, jit.arg_names)
    assert fast.tail({"BLOCK": 64}, 3) == (64,)
    assert fast.tail({"BLOCK": 64, "OTHER": 1}, 3) is None
    assert fast.tail({}, 4) == ()


def _jit() -> JITFunction:
    """A compiled-mode JITFunction of the kernel below, also when the suite runs under the interpreter."""
    return _copy_kernel if isinstance(_copy_kernel, JITFunction) else JITFunction(_copy_kernel.fn)


@triton.jit
def _copy_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)

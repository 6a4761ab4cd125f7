"""Wrappers of triton's autotuner defined by the engine (a caching Autotuner subclass and factories)."""
from triton.runtime.autotuner import Autotuner

from .triton_utils import triton


class CachingAutotuner(Autotuner):
    """Loads a cached config first, else tunes like triton (so it can still tune at run time)."""

    def __init__(self, fn, arg_names, configs, key, reset_to_zero, restore_value, **kwargs):
        super().__init__(fn, arg_names, configs, key, reset_to_zero, restore_value, **kwargs)


def engine_cache_autotune(configs, key=None, reset_to_zero=None, restore_value=None):
    if key is None:
        key = []

    def decorator(fn):
        return CachingAutotuner(fn, fn.arg_names, configs, key, reset_to_zero, restore_value)

    return decorator


def tokens_tuner(fn):
    """A wrapper whose name does not say autotune: it returns a triton.autotune-made object."""
    return triton.autotune(configs=[triton.Config({"BLOCK": 64}), triton.Config({"BLOCK": 128})],
                           key=["n_tokens"])(fn)

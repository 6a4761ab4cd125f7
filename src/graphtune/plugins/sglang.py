"""The SGLang plugin (entry-point group ``sglang.srt.plugins``, name ``graphtune``).

Read in the sglang 0.5.23 wheel: ``sglang.srt.plugins.load_plugins`` runs every function of the group once
per process (first thing in ``run_scheduler_process``, also in the engine, detokenizer and data-parallel
controller processes), catching and logging their exceptions, then applies the hooks they registered with
``HookRegistry.register(target, hook, HookType.AROUND)`` (an AROUND hook is called as
``hook(original_fn, *args, **kwargs)``). CUDA graphs are captured by the runners in
``sglang/srt/model_executor/runner/`` (``DecodeCudaGraphRunner.capture``, ``PrefillCudaGraphRunner.capture``;
the ``CudaGraphRunner`` of earlier releases), which ``ModelRunner.init_cuda_graphs`` drives for one model;
``Scheduler.init_all_cuda_graphs`` runs it for the target model and then the draft model. graphtune hooks the
outermost of these that exist, and reports once when it returns; ``ModelRunner.init_decode_cuda_graph`` (the
decode capture on a prefill-to-decode role switch) reports too.

Off unless ``GRAPHTUNE_PLUGIN=1``. Without SGLang's hook registry (a direct call on a version without
it) the same targets are wrapped directly.
"""
from __future__ import annotations

import importlib

from .._log import logger
from . import _hooks
from ._report import CaptureReporter
from ._setup import activate, engine_version

CAPTURE_TARGETS = (
    _hooks.Target("sglang.srt.managers.scheduler", "Scheduler.init_all_cuda_graphs"),
    _hooks.Target("sglang.srt.model_executor.model_runner", "ModelRunner.init_cuda_graphs"),
    _hooks.Target("sglang.srt.model_executor.model_runner", "ModelRunner.init_decode_cuda_graph"),
)
HOOK_REGISTRY = "sglang.srt.plugins.hook_registry"

_reporter: CaptureReporter | None = None
_registered = False


def register() -> None:
    """Entry point. Never raises: a problem is logged and SGLang runs as it would without graphtune."""
    global _reporter, _registered
    if _registered:
        return
    try:
        reporter = activate("sglang")
        _registered = True
        if reporter is None:
            return
        _reporter = reporter
        install(reporter)
    except Exception:
        logger.exception("graphtune plugin for SGLang failed; SGLang continues without it")


def install(reporter: CaptureReporter) -> list[_hooks.Target]:
    """Hook every capture target that exists. The targets hooked."""
    found: list[_hooks.Target] = []
    missing: list[str] = []
    for target in CAPTURE_TARGETS:
        # SGLang's registry imports the target's module when it applies the hooks, right after the plugins
        # ran, in the same process: importing it here first costs nothing and lets a missing target be
        # named in one line instead of a traceback from the registry
        try:
            module = importlib.import_module(target.module)
        except Exception as exc:
            missing.append(f"{target.dotted} ({type(exc).__name__}: {exc})")
            continue
        if _hooks.resolve(target, module) is None:
            missing.append(f"{target.dotted} (no {target.qualname})")
            continue
        found.append(target)
    if not found:
        logger.warning("graphtune plugin: SGLang %s has none of the capture functions graphtune wraps (%s); "
                       "patch_triton and GRAPHTUNE_LOAD are applied, but no coverage report will be written at "
                       "the end of capture", engine_version("sglang") or "(version unknown)", "; ".join(missing))
        return found
    if missing:
        logger.debug("graphtune plugin: capture functions not in this SGLang: %s", "; ".join(missing))

    try:
        registry = importlib.import_module(HOOK_REGISTRY)
        hook_registry, around = registry.HookRegistry, registry.HookType.AROUND
    except Exception as exc:
        logger.info("graphtune plugin: no SGLang hook registry (%s: %s); wrapping the capture functions directly",
                    type(exc).__name__, exc)
        for target in found:
            _hooks.wrap(target, importlib.import_module(target.module), reporter.around)
        return found
    for target in found:
        hook_registry.register(target.dotted, reporter.around, around)
    return found

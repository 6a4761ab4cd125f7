"""The vLLM general plugin (entry-point group ``vllm.general_plugins``, name ``graphtune``).

Read in the vllm 0.34.0 wheel: ``vllm.plugins.load_general_plugins`` calls every function of the group, once
per process, in every vLLM process (API server, engine core, and each worker from ``init_worker``), without
catching exceptions, so ``register`` never raises. The worker captures CUDA graphs in
``GPUModelRunner.capture_model`` (``vllm/v1/worker/gpu/model_runner.py``; the encoder-only runner overrides
it); ``Worker.compile_or_warm_up_model`` calls it after the dummy runs and kernel warm-up, and a memory
profiling pass calls it first with ``profile_only=True``, which is not reported (the real capture's report,
cumulative, includes whatever the profiling capture recorded). Earlier V1 releases had the runner in
``vllm/v1/worker/gpu_model_runner.py``: wrapped too when present.

Off unless ``GRAPHTUNE_PLUGIN=1``. The model-runner module is wrapped when it finishes importing, so
processes that never capture never import it because of graphtune.
"""
from __future__ import annotations

from types import ModuleType

from .._log import logger
from . import _hooks
from ._report import CaptureReporter
from ._setup import activate, engine_version, share_engine_handlers

CAPTURE_TARGETS = (
    _hooks.Target("vllm.v1.worker.gpu.model_runner", "GPUModelRunner.capture_model"),
    _hooks.Target("vllm.v1.worker.mm_encoder_model_runner", "MMEncoderModelRunner.capture_model"),
    _hooks.Target("vllm.v1.worker.gpu_model_runner", "GPUModelRunner.capture_model"),
)

_reporter: CaptureReporter | None = None
_registered = False


def _profile_only(args: tuple, kwargs: dict) -> str | None:
    return "profile_only=True: vLLM's memory-profiling capture" if kwargs.get("profile_only") else None


def register() -> None:
    """Entry point. Never raises: a problem is logged and vLLM runs as it would without graphtune."""
    global _reporter, _registered
    if _registered:
        return
    try:
        reporter = activate("vllm", skip=_profile_only)
        _registered = True
        if reporter is None:
            return
        _reporter = reporter
        share_engine_handlers("vllm")
        install(reporter)
    except Exception:
        logger.exception("graphtune plugin for vLLM failed; vLLM continues without it")


def install(reporter: CaptureReporter) -> list[_hooks.Target]:
    """Wrap every capture target whose module exists (now, or when it is imported). The targets found."""
    found: list[_hooks.Target] = []
    missing: list[str] = []
    for target in CAPTURE_TARGETS:
        ok, why = _hooks.module_exists(target.module)
        if not ok:
            missing.append(f"{target.module} ({why})")
            continue
        found.append(target)

        def on_import(module: ModuleType, target: _hooks.Target = target) -> None:
            _hooks.wrap(target, module, reporter.around)

        _hooks.when_imported(target.module, on_import)
    if not found:
        logger.warning("graphtune plugin: vLLM %s has none of the capture functions graphtune wraps (%s); "
                       "patch_triton and GRAPHTUNE_LOAD are applied, but no coverage report will be written at "
                       "the end of capture", engine_version("vllm") or "(version unknown)",
                       ", ".join(t.dotted for t in CAPTURE_TARGETS))
    elif missing:
        logger.debug("graphtune plugin: capture modules not in this vLLM: %s", "; ".join(missing))
    return found

"""What both engine plugins do when they are switched on: read the settings, apply ``patch_triton()`` with the
chosen policy, load the shipped tuning exports, and build the reporter their capture hooks call."""
from __future__ import annotations

import importlib.metadata
import logging
import os
from typing import Any, Callable

from .. import settings
from .._log import logger
from ._report import CaptureReporter


def engine_version(distribution: str) -> str | None:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def share_engine_handlers(engine_logger: str) -> None:
    """Show graphtune's INFO lines where the engine's own lines go.

    vLLM configures only its ``vllm`` logger (with ``propagate=False``) and leaves the root logger without a
    handler, so graphtune's records would reach only Python's last-resort handler, which drops INFO. When
    graphtune has no handler of its own and the engine's logger has some, graphtune uses the same ones."""
    ours = logging.getLogger("graphtune")
    theirs = logging.getLogger(engine_logger)
    if ours.handlers or not theirs.handlers:
        return
    for handler in theirs.handlers:
        ours.addHandler(handler)
    ours.propagate = False
    if ours.level == logging.NOTSET:
        ours.setLevel(theirs.getEffectiveLevel())


def activate(engine: str, skip: Callable[[tuple, dict], str | None] | None = None) -> CaptureReporter | None:
    """Apply graphtune in this engine process when ``GRAPHTUNE_PLUGIN=1``; the reporter for the capture hooks,
    or None when the plugin is off or its settings are wrong (one error line naming the variable)."""
    try:
        if not settings.plugin():
            logger.debug("graphtune plugin for %s: GRAPHTUNE_PLUGIN is not set, doing nothing", engine)
            return None
        settings.validate_all()     # every tuning setting, as autotune / warmup / the CLI check them
        policy = settings.policy()
        agree = settings.plugin_agree()
        freeze = settings.plugin_freeze()
        out = settings.coverage_out()
        paths = settings.load_paths()
    except ValueError as exc:
        # a wrong value would otherwise surface later, inside capture, as an error from the miss policy
        logger.error("graphtune plugin for %s is off: %s", engine, exc)
        return None

    import graphtune

    if policy is not None:
        graphtune.set_policy(policy)
    # graphtune's own default (agree over the whole default group once it has more than one rank) suits
    # torchrun jobs where every rank runs the same shapes; an engine's world also holds ranks that do not
    graphtune.set_process_group(None, mode=agree)
    graphtune.patch_triton()
    loaded: list[dict[str, Any]] = []
    for path in paths:
        try:
            rep = graphtune.load(path)
        except graphtune.DatabaseError as exc:
            logger.error("graphtune plugin: GRAPHTUNE_LOAD: %s; continuing without that file", exc)
            loaded.append({"path": str(path), "error": str(exc)})
            continue
        loaded.append({"path": str(path), "added": rep.added, "replaced": rep.replaced, "kept": rep.kept,
                       "conflicts": len(rep.conflicts)})
    version = engine_version(engine)
    context = {"engine_version": version, "graphtune_version": graphtune.__version__,
               "policy": policy or "fallback", "agree": agree,
               "freeze_after_capture": freeze, "loaded": loaded}
    ok = sum("error" not in x for x in loaded)
    logger.info("graphtune plugin on in %s %s (pid %d): patch_triton applied, miss policy %s, rank agreement %s, "
                "%d of %d GRAPHTUNE_LOAD file(s) loaded, coverage report at capture end to %s", engine,
                version or "?", os.getpid(), context["policy"], agree, ok, len(loaded),
                f"the log and {out}" if out is not None else "the log (GRAPHTUNE_COVERAGE_OUT not set)")
    return CaptureReporter(engine, out=out, context=context, skip=skip, freeze=freeze)

"""The coverage report an engine plugin writes when CUDA-graph capture ends: to the log, and to a JSON file.

One file per process: its name carries the engine, the rank (when ``torch.distributed`` is initialised) and
the pid. A process claims its file by creating it exclusively, so it never overwrites a file another process
wrote (a stale file from an earlier run whose pid was reused included: the new one gets a ``-2`` suffix);
later reports of the same process replace its own file atomically. A write that fails is logged as an error
naming the path and the reason, and nothing claims it happened.
"""
from __future__ import annotations

import datetime
import io
import json
import logging
import os
import socket
import tempfile
import threading
from pathlib import Path
from typing import Any, Callable

from .._log import logger

FORMAT = "graphtune-coverage-report"
FORMAT_VERSION = 1
_MAX_SUFFIX = 100


def process_rank() -> int | None:
    """This process's rank in the default ``torch.distributed`` group, else ``RANK`` from the environment."""
    try:
        import torch.distributed as dist
        if dist.is_available() and dist.is_initialized():
            return int(dist.get_rank())
    except Exception:  # a half-initialised group must not break the report
        pass
    value = os.environ.get("RANK", "").strip()
    return int(value) if value.isdigit() else None


def summarize(coverage: dict[str, Any]) -> dict[str, int]:
    kernels = coverage.get("kernels", [])
    return {
        "kernels": len(kernels),
        "tuned_keys": sum(len(k["tuned"]) for k in kernels),
        "hits": sum(int(t.get("hits", 0)) for k in kernels for t in k["tuned"]),
        "missed_keys": sum(len(k["misses"]) for k in kernels),
        "misses": int(coverage.get("total_misses", 0)),
    }


def report_path(out: Path, engine: str, rank: int | None, pid: int, attempt: int = 1) -> Path:
    """The file name for this process; ``out`` is a directory, or a ``.json`` path used as a stem."""
    tag = f"{engine}{'' if rank is None else f'-rank{rank}'}-pid{pid}{'' if attempt == 1 else f'-{attempt}'}"
    if out.suffix.lower() == ".json":
        return out.with_name(f"{out.stem}-{tag}.json")
    return out / f"graphtune-coverage-{tag}.json"


class CaptureReporter:
    """Wraps an engine's capture functions (``around``) and reports coverage when the outermost one ends."""

    def __init__(self, engine: str, *, out: Path | None, context: dict[str, Any],
                 skip: Callable[[tuple, dict], str | None] | None = None, freeze: bool = False) -> None:
        self.engine = engine
        self.out = out
        self.context = context   # written into every report: versions, policy, loaded files
        self.skip = skip         # returns why a call is not a real capture (e.g. vLLM's profile_only), or None
        self.freeze = freeze     # graphtune.freeze() after a capture that succeeded
        self.reports = 0
        self.written: list[Path] = []
        self._local = threading.local()
        self._lock = threading.Lock()
        self._claimed: tuple[int, Path] | None = None   # (pid, path): a forked child claims its own file

    def around(self, original: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        depth = getattr(self._local, "depth", 0)
        self._local.depth = depth + 1
        status = "failed"
        try:
            result = original(*args, **kwargs)
            status = "ok"
            return result
        finally:
            self._local.depth = depth
            # only the outermost capture reports: vLLM's encoder runner and SGLang's scheduler call other
            # wrapped capture functions inside theirs
            if depth == 0:
                # (a profiling pass is skipped when it succeeds; one that failed is the report: vLLM's profiling
                # capture is where an UntunedError of GRAPHTUNE_POLICY=raise first fires)
                why = self.skip(args, kwargs) if self.skip is not None and status == "ok" else None
                where = f"{getattr(original, '__module__', '?')}.{getattr(original, '__qualname__', original)}"
                if why:
                    logger.debug("graphtune plugin: no coverage report after %s (%s)", where, why)
                else:
                    self.report(where, status)
                    if self.freeze and status == "ok":
                        self._freeze(where)

    def _freeze(self, where: str) -> None:
        import graphtune
        if not graphtune.is_frozen():
            graphtune.freeze()   # sets a flag: cannot fail
            logger.info("graphtune plugin: frozen after %s (GRAPHTUNE_PLUGIN_FREEZE=1): no kernel tunes from now on; "
                        "a new key follows the miss policy and is recorded in coverage", where)

    def report(self, where: str, status: str = "ok") -> Path | None:
        """Log the coverage and write it to this process's file; never raises. The path written, or None."""
        try:
            return self._report(where, status)
        except Exception:
            logger.exception("graphtune plugin: the coverage report after %s failed; the engine continues", where)
            return None

    def _report(self, where: str, status: str) -> Path | None:
        import graphtune
        from rich.console import Console

        with self._lock:
            self.reports += 1
            number = self.reports
        cov = graphtune.coverage()
        data = cov.to_dict()
        summary = summarize(data)
        rank = process_rank()
        level = logging.WARNING if summary["misses"] else logging.INFO
        logger.log(level, "graphtune coverage after %s (%s, %s rank %s pid %d, report %d): %d kernels, "
                   "%d tuned keys, %d hits, %d missed keys (%d misses)", where, status, self.engine,
                   "-" if rank is None else rank, os.getpid(), number, summary["kernels"], summary["tuned_keys"],
                   summary["hits"], summary["missed_keys"], summary["misses"])
        if summary["kernels"]:
            buffer = io.StringIO()
            Console(file=buffer, width=180, force_terminal=False).print(cov.table())
            logger.log(level, "%s", buffer.getvalue().rstrip())
        if self.out is None:
            return None
        doc = {
            "format": FORMAT, "version": FORMAT_VERSION,
            "engine": self.engine, "pid": os.getpid(), "rank": rank, "host": socket.gethostname(),
            "time": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "event": {"after": where, "status": status, "report": number},
            **self.context,
            "summary": summary,
            "coverage": data,
        }
        text = json.dumps(doc, indent=1, default=str) + "\n"
        try:
            path = self._write(text, rank)
        except OSError as exc:
            logger.error("graphtune plugin: could not write the coverage report to %s: %s (it is in the log above)",
                         exc.filename or self.out, exc.strerror or exc)
            return None
        self.written.append(path)
        logger.info("graphtune plugin: wrote coverage report %s", path)
        return path

    def _write(self, text: str, rank: int | None) -> Path:
        pid = os.getpid()
        with self._lock:
            fresh = self._claimed is None or self._claimed[0] != pid
            if fresh:
                self._claimed = (pid, self._claim(rank, pid))
            path = self._claimed[1]
        # a temporary file in the same directory, then an atomic rename over this process's own file:
        # a reader never sees half a report
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        try:
            # mkstemp's 0600 would survive the rename: a report is read by others (monitoring), as a file
            # written the ordinary way would be (0666 less the umask)
            os.fchmod(fd, 0o666 & ~_umask())
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(text)
            os.replace(tmp, path)
        except BaseException:
            try:
                os.unlink(tmp)
                if fresh:   # the empty file this call claimed must not pass for a report
                    os.unlink(path)
                    self._claimed = None
            except OSError:
                pass
            raise
        return path

    def _claim(self, rank: int | None, pid: int) -> Path:
        assert self.out is not None
        parent = self.out.parent if self.out.suffix.lower() == ".json" else self.out
        parent.mkdir(parents=True, exist_ok=True)
        for attempt in range(1, _MAX_SUFFIX + 1):
            path = report_path(self.out, self.engine, rank, pid, attempt)
            try:
                fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                continue   # another process's file (or an earlier run's): never overwritten
            os.close(fd)
            return path
        raise FileExistsError(17, f"{_MAX_SUFFIX} report files for this process name already exist",
                              str(report_path(self.out, self.engine, rank, pid)))


def _umask() -> int:
    """The process's umask: Linux's /proc/self/status states it; elsewhere reading it means setting it (set back
    at once), which briefly changes it for the server's other threads, so only there."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask

"""What the commands that write files share: an output directory or file checked (the directory made) before any
work, and JSON that is always valid (no NaN / Infinity, which ``json.dumps`` writes by default and JSON forbids)."""
from __future__ import annotations

import contextlib
import json
import math
import os
import tempfile
from pathlib import Path
from typing import Any, Iterator


def output_dir(path: str | os.PathLike, option: str) -> Path:
    """``path`` as a directory that exists and takes files, created if needed; otherwise a ValueError of one
    line naming ``option``, the path and the cause. Called before the work, so a bad --out costs nothing."""
    out = Path(path).expanduser()
    if str(path).strip() == "":
        raise ValueError(f"{option} '': give a directory")
    if out.exists() and not out.is_dir():
        raise ValueError(f"{option} {path}: exists and is not a directory (this command writes several files "
                         f"into a directory); give a directory")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ValueError(f"{option} {path}: cannot write there: {exc.strerror or exc}") from None
    _check_writable(out, option, path)
    return out


@contextlib.contextmanager
def run_output_dir(path: str | os.PathLike, option: str) -> Iterator[Path]:
    """``output_dir`` for the span of a run whose arguments are checked inside it: a directory this call created
    is removed again (only while still empty, so nothing written is ever removed) when the run raises, so a run
    that never started leaves no empty --out behind. (Parents made on the way are left.)"""
    created = not Path(path).expanduser().exists()
    out = output_dir(path, option)
    try:
        yield out
    except BaseException:
        if created:
            with contextlib.suppress(OSError):
                out.rmdir()
        raise


def output_file(path: str | os.PathLike, option: str) -> Path:
    """``path`` as a file that can be written (an existing one is replaced): not a directory, in a directory that
    exists and takes files; otherwise a ValueError of one line naming ``option``, the path and the cause. Called
    before the work, so a bad --out costs nothing and no result is lost at the end."""
    file_arg(str(path), option)
    out = Path(path).expanduser()
    if out.is_dir():
        raise ValueError(f"{option} {path}: is a directory; give a file name")
    if not out.parent.is_dir():
        raise ValueError(f"{option} {path}: directory {out.parent} does not exist")
    _check_writable(out.parent, option, path)
    return out


def _check_writable(directory: Path, option: str, path: str | os.PathLike) -> None:
    """A file can be created in ``directory`` (a scratch file, gone at once): a read-only directory or file system
    fails here, with one line naming ``option`` and ``path``, not after the work."""
    try:
        with tempfile.TemporaryFile(dir=directory):
            pass
    except OSError as exc:
        raise ValueError(f"{option} {path}: cannot write there: {exc.strerror or exc}") from None


def file_arg(value: str | None, option: str) -> str | None:
    """``value`` of an option that names a file, unchanged (None when the option was not given); an empty one is
    a ValueError of one line naming the option: it names no file, and read as a path it would be '.'."""
    if value is not None and value.strip() == "":
        raise ValueError(f"{option} {value!r}: give a file path")
    return value


def first_non_finite(value: Any, where: str = "") -> str | None:
    """The path of the first NaN or infinite float in a JSON-like value (``"baseline[1].step_ms = inf"``)."""
    if isinstance(value, float) and not math.isfinite(value):
        return f"{where or 'value'} = {value}"
    if isinstance(value, dict):
        for k, v in value.items():
            found = first_non_finite(v, f"{where}.{k}" if where else str(k))
            if found:
                return found
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            found = first_non_finite(v, f"{where}[{i}]")
            if found:
                return found
    return None


def strict_json(value: Any, what: str, **kwargs: Any) -> str:
    """``json.dumps`` that never writes NaN / Infinity: a non-finite number is a ValueError naming its field."""
    try:
        return json.dumps(value, allow_nan=False, **kwargs)
    except ValueError:
        raise ValueError(f"{what}: {first_non_finite(value) or 'a value'} is not a finite number, which JSON "
                         f"cannot hold") from None


def nulled(value: Any, where: str = "", notes: list[str] | None = None) -> tuple[Any, list[str]]:
    """``value`` with every NaN / infinite float replaced by None, and the list of fields replaced (for a
    report that must still be written, with a note of what was not a number)."""
    notes = [] if notes is None else notes
    if isinstance(value, float) and not math.isfinite(value):
        notes.append(f"{where or 'value'} was {value}")
        return None, notes
    if isinstance(value, dict):
        return {k: nulled(v, f"{where}.{k}" if where else str(k), notes)[0] for k, v in value.items()}, notes
    if isinstance(value, (list, tuple)):
        return [nulled(v, f"{where}[{i}]", notes)[0] for i, v in enumerate(value)], notes
    return value, notes


def report_json(report: dict[str, Any], **kwargs: Any) -> str:
    """A report as valid JSON: non-finite numbers become null, listed under "not_finite" so a reader knows."""
    clean, notes = nulled(report)
    if notes:
        clean["not_finite"] = notes
    return json.dumps(clean, allow_nan=False, **kwargs)

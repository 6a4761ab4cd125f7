"""Which files the audit reads: the Python files under the given paths (through git inside a work tree),
their bytes, a parse error as one line, and the dotted package of a file on disk."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Iterable


# Directories never worth auditing when walking outside git (or for untracked files inside it).
_SKIP_DIRS = frozenset({".git", "__pycache__", ".venv", "venv", "env", "node_modules", "build", "dist",
                        ".tox", ".nox", ".mypy_cache", ".pytest_cache", ".ruff_cache", "site-packages"})


def collect_files(paths: Iterable[str | os.PathLike[str]], unreadable: dict[str, str] | None = None) -> list[Path]:
    """The ``.py`` files under ``paths``, sorted and without duplicates. A file named explicitly is taken
    whatever its suffix or ignore status; directories are listed through git when inside a work tree.

    A directory that cannot be listed (no permission) is put in ``unreadable`` (its path -> why), for the
    caller to report as not audited; without ``unreadable`` its OSError is raised. Either way a listing never
    silently leaves files out: a CI gate must not pass on a tree it could not read."""
    seen: set[Path] = set()
    out: list[Path] = []
    paths = list(paths)
    for raw in paths:
        if not str(raw).strip():
            # Path("") is ".": an empty argument (an unset shell variable) must not audit the current directory
            raise ValueError(f"audit: PATH is empty ({str(raw)!r}); name a file or directory")
        path = Path(raw)
        if not path.exists():
            raise FileNotFoundError(f"audit: no such file or directory: {str(path)!r}")
        candidates = [path] if path.is_file() else _files_under(path, unreadable)
        if len(paths) == 1:
            return candidates  # one listing has no duplicates: skip resolving every path (costly on big trees)
        for file in candidates:
            resolved = file.resolve()
            if resolved not in seen:
                seen.add(resolved)
                out.append(file)
    return out


class _Unparsable(ValueError):
    pass


def _read_source(path: Path) -> bytes:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise _Unparsable(f"cannot read: {exc.strerror or exc}") from None
    if b"\x00" in data:
        raise _Unparsable("contains null bytes")
    return data


def _describe_parse_error(exc: BaseException) -> str:
    if isinstance(exc, SyntaxError):
        where = f" (line {exc.lineno})" if exc.lineno else ""
        return f"{type(exc).__name__}: {exc.msg}{where}"
    return f"{type(exc).__name__}: {exc}"


def _files_under(directory: Path, unreadable: dict[str, str] | None) -> list[Path]:
    listed = _git_files(directory)
    if listed is None:  # os.walk only lists what exists
        return sorted(f for f in _walk_files(directory, unreadable) if f.suffix == ".py")
    return sorted(f for f in listed if f.suffix == ".py" and f.is_file())


def _git(directory: Path, *args: str) -> str | None:
    try:
        # surrogateescape: a file name that is not valid UTF-8 must not stop the listing
        done = subprocess.run(["git", "-C", str(directory), *args], capture_output=True, text=True,
                              errors="surrogateescape", timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout if done.returncode == 0 else None


def _git_files(directory: Path) -> list[Path] | None:
    """Files under ``directory`` that git tracks or would track (``.gitignore`` applied), or None outside
    a work tree or without git."""
    inside = _git(directory, "rev-parse", "--is-inside-work-tree")
    if inside is None or inside.strip() != "true":
        return None
    if _git(directory, "check-ignore", "-q", ".") is not None:
        return None  # the user named an ignored directory (a virtualenv, a vendored tree): audit it all
    tracked = _git(directory, "ls-files", "-z", "--cached")
    untracked = _git(directory, "ls-files", "-z", "--others", "--exclude-standard")
    if tracked is None or untracked is None:
        return None
    files = [directory / rel for rel in tracked.split("\0") if rel]
    # A repository that does not ignore its virtualenv would otherwise hand us all of site-packages.
    files += [directory / rel for rel in untracked.split("\0")
              if rel and not any(part in _SKIP_DIRS for part in Path(rel).parts[:-1])]
    return files


def _walk_files(directory: Path, unreadable: dict[str, str] | None) -> list[Path]:
    """The files under ``directory`` outside git; a directory os.walk cannot list goes into ``unreadable``
    (raised without it): os.walk skips it silently unless told."""
    def failed(exc: OSError) -> None:
        if unreadable is None:
            raise exc
        unreadable[str(exc.filename or directory)] = f"cannot list directory: {exc.strerror or exc}"

    out: list[Path] = []
    for root, dirs, names in os.walk(directory, onerror=failed):
        dirs[:] = sorted(d for d in dirs if d not in _SKIP_DIRS and not d.endswith(".egg-info")
                         and not d.startswith("."))
        out.extend(Path(root) / n for n in names if n.endswith(".py"))
    return out


def _package_of(filename: str) -> list[str]:
    """Dotted package of a file on disk, found by walking up through ``__init__.py`` files."""
    parts: list[str] = []
    try:
        directory = Path(filename).resolve().parent
    except (OSError, RuntimeError):
        return parts
    while (directory / "__init__.py").is_file() and directory.name:
        parts.insert(0, directory.name)
        directory = directory.parent
    return parts

"""``MODULE:ATTR`` loading and ``--sizes`` parsing, shared by the commands that take a kernel or a target."""
from __future__ import annotations

import hashlib
import importlib
import importlib.util
import os
import sys
from typing import Any

from .errors import UserCodeError, one_line


def import_module(text: str, what: str) -> Any:
    """A dotted module name or a path to a ``.py`` file -> the module. ``what`` names the argument in errors."""
    if text.endswith(".py") or os.sep in text or "/" in text or os.path.isfile(text):
        path = os.path.abspath(os.path.expanduser(text))
        if not os.path.isfile(path):
            raise FileNotFoundError(f"{what}: no file {text}")
        # one stable name per path: Triton keys compiled kernels on module and source, and dataclasses and
        # pickling look modules up by name; two files with the same stem must not clash
        name = module_name_for(path)
        module = sys.modules.get(name)
        if module is not None:
            return module
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None:
            raise ValueError(f"{what}: cannot import {path} as a Python module")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        try:
            spec.loader.exec_module(module)
        except Exception as exc:  # noqa: BLE001 - the user's module failed: say which and why, in one line
            sys.modules.pop(name, None)
            raise UserCodeError(f"{what}: importing {path} failed: {one_line(exc)}") from exc
        except SystemExit as exc:
            sys.modules.pop(name, None)
            raise _exited(f"{what}: importing {path}", exc) from None
        except BaseException:
            sys.modules.pop(name, None)
            raise
        return module
    # as `python -m` would: a module in the current directory is importable from the console script too
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        return importlib.import_module(text)
    except ModuleNotFoundError as exc:
        if exc.name and not text.startswith(exc.name) and exc.name not in text:
            raise UserCodeError(f"{what}: importing module {text!r} failed: {one_line(exc)}") from exc
        raise ValueError(f"{what}: cannot import module {text!r} ({exc})") from None
    except Exception as exc:  # noqa: BLE001 - the user's module failed: say which and why, in one line
        raise UserCodeError(f"{what}: importing module {text!r} failed: {one_line(exc)}") from exc
    except SystemExit as exc:
        raise _exited(f"{what}: importing module {text!r}", exc) from None


def _exited(importing: str, exc: SystemExit) -> UserCodeError:
    """The error for a module that called ``sys.exit()`` while being imported: one line saying so and with what
    status, where the exit would have ended the command with that status and no word why."""
    code = exc.code
    status = 0 if code is None else code if isinstance(code, int) else f"1 ({code})"
    return UserCodeError(f"{importing} failed: the module exited with status {status} while being imported")


def module_name_for(path: str, prefix: str = "_graphtune_user") -> str:
    """One stable module name per file path: Triton keys compiled kernels on module and source, and
    dataclasses and pickling look modules up by name; two files with the same stem must not clash, and the
    name must be the same in every process (``hash()`` of a string is not)."""
    path = os.path.abspath(os.path.expanduser(path))
    stem = os.path.splitext(os.path.basename(path))[0]
    return f"{prefix}_{stem}_{hashlib.sha256(path.encode()).hexdigest()[:8]}"


def load_object(spec: str, what: str, *, default_attr: str | None = None, form: str = "MODULE:NAME",
                error: type[Exception] = ValueError) -> Any:
    """``pkg.module:name.attr`` or ``path/file.py:name`` -> the object; ``default_attr`` when ``:ATTR`` is left out."""
    module_text, sep, attr = spec.rpartition(":")
    if not sep or not module_text or not attr:
        if default_attr is None:
            raise error(f"{what}: {spec!r} is not {form} (e.g. mypkg.ops:kernel or ops.py:kernel)")
        module_text, attr = spec, default_attr
    obj: Any = import_module(module_text, what)
    for part in attr.split("."):
        if not hasattr(obj, part):
            names = sorted(n for n in dir(obj) if not n.startswith("__"))
            raise error(f"{what}: {module_text} has no attribute {attr!r} (at {part!r}); names there: {names}")
        obj = getattr(obj, part)
    return obj


def parse_sizes(text: str, flag: str = "--sizes") -> list[int]:
    """``"1,2,4"`` -> ``[1, 2, 4]``; anything but positive integers is a ValueError naming the flag and value."""
    from .configs import number, parse_list     # (configs imports triton, which `graphtune audit` never needs)
    return parse_list(text, lambda item: int(number(item, integer=True, minimum=1)), what=flag, nothing="sizes")

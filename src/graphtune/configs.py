"""Configs as plain data: serialise ``triton.Config`` to dicts, parse ``"num_warps=8,BLOCK_N=32"``, hash lists.

A config dict has the meta-parameters under their own names plus the launch options
``num_warps``, ``num_stages``, ``num_ctas`` and ``maxnreg`` (when set). The identity of a config is its
dict, never ``str(config)``.
"""
from __future__ import annotations

import hashlib
import json
from typing import Any, Callable, Iterable, TypeVar

import triton

from ._launch_options import LAUNCH_OPTIONS, launch_option_problem
from .errors import ConfigError

T = TypeVar("T")


def parse_list(text: str, parse_item: Callable[[str], T], *, what: str, nothing: str | None = "values",
               error: type[Exception] = ValueError) -> list[T]:
    """The one comma-list parser: ``"a, b,,c"`` -> ``[parse_item("a"), parse_item("b"), parse_item("c")]``.

    ``parse_item`` raises ValueError with a message about the item; it is re-raised as ``error`` naming ``what``
    and the whole text. An empty list is an error (``what: no <nothing> in ...``) unless ``nothing`` is None."""
    out: list[T] = []
    for item in str(text).split(","):
        item = item.strip()
        if not item:
            continue
        try:
            out.append(parse_item(item))
        except ValueError as exc:
            raise error(f"{what}: {exc} (in {text!r})") from None
    if not out and nothing is not None:
        raise error(f"{what}: no {nothing} in {text!r}")
    return out


def config_to_dict(config: triton.Config) -> dict[str, Any]:
    out: dict[str, Any] = dict(sorted(config.kwargs.items()))
    out["num_warps"] = config.num_warps
    out["num_stages"] = config.num_stages
    out["num_ctas"] = config.num_ctas
    if getattr(config, "maxnreg", None) is not None:
        out["maxnreg"] = config.maxnreg
    return out


def config_from_dict(data: dict[str, Any]) -> triton.Config:
    kwargs = {k: v for k, v in data.items() if k not in LAUNCH_OPTIONS}
    return triton.Config(
        kwargs,
        num_warps=int(data.get("num_warps", 4)),
        num_stages=int(data.get("num_stages", 3)),
        num_ctas=int(data.get("num_ctas", 1)),
        maxnreg=data.get("maxnreg"),
    )


def config_label(config: triton.Config | dict[str, Any]) -> str:
    """Short stable text, e.g. ``BLOCK_N=32,num_warps=4,num_stages=3`` (num_ctas shown only when not 1)."""
    data = config if isinstance(config, dict) else config_to_dict(config)
    parts = [f"{k}={v}" for k, v in data.items() if k not in LAUNCH_OPTIONS]
    parts += [f"num_warps={data.get('num_warps')}", f"num_stages={data.get('num_stages')}"]
    if data.get("num_ctas", 1) != 1:
        parts.append(f"num_ctas={data['num_ctas']}")
    if data.get("maxnreg") is not None:
        parts.append(f"maxnreg={data['maxnreg']}")
    return ",".join(parts)


def shared_and_varying(configs: Iterable[dict[str, Any]]) -> tuple[dict[str, Any], list[str]]:
    """For a table of configs (dicts): the parameters every config has with one value (shown once, above the
    table) and the names of those that vary (one column each), in first-seen order."""
    dicts = list(configs)
    names = list(dict.fromkeys(k for d in dicts for k in d))
    shared = {k: dicts[0][k] for k in names
              if dicts and all(k in d for d in dicts) and len({repr(d[k]) for d in dicts}) == 1}
    return shared, [k for k in names if k not in shared]


def configs_hash(configs: Iterable[triton.Config]) -> str:
    blob = json.dumps([config_to_dict(c) for c in configs], sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def _parse_value(text: str) -> Any:
    low = text.lower()
    if low in ("true", "false"):
        return low == "true"
    if low == "none":
        return None
    try:
        return int(text, 0)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        return text


def number(item: str, *, integer: bool = False, minimum: float | None = None) -> float:
    """One list item as a number (an int when ``integer``, else a float that is an int when whole), at least
    ``minimum``; a ValueError naming the item otherwise."""
    try:
        value: float = int(item) if integer else float(item)
    except ValueError:
        raise ValueError(f"{item!r} is not {'an integer' if integer else 'a number'}") from None
    if minimum is not None and value < minimum:
        raise ValueError(f"{value} is not a size >= {minimum}")
    return int(value) if not integer and float(value).is_integer() else value


def parse_params(text: str, *, where: str = "config") -> dict[str, Any]:
    """``"num_warps=8, BLOCK_N=32"`` -> ``{"num_warps": 8, "BLOCK_N": 32}``; malformed text is a ConfigError."""
    return dict(parse_list(text, name_value, what=where, nothing="NAME=VALUE pairs", error=ConfigError))


def name_value(item: str) -> tuple[str, Any]:
    """``"BLOCK_N=32"`` -> ``("BLOCK_N", 32)``; a ValueError when it is not NAME=VALUE."""
    name, sep, value = item.partition("=")
    if not sep or not name.strip() or not value.strip():
        raise ValueError(f"{item!r} is not NAME=VALUE")
    return name.strip(), _parse_value(value.strip())


def parse_force_spec(spec: str) -> dict[str, dict[str, Any]]:
    """``"k1:num_warps=8,BLOCK=32;k2:num_stages=2"`` -> ``{"k1": {...}, "k2": {...}}``."""
    out: dict[str, dict[str, Any]] = {}
    for part in spec.split(";"):
        part = part.strip()
        if not part:
            continue
        name, sep, params = part.partition(":")
        if not sep or not name.strip():
            raise ConfigError(f"GRAPHTUNE_FORCE: {part!r} is not 'kernel_name:NAME=VALUE,...' (in {spec!r})")
        out[name.strip()] = parse_params(params, where=f"GRAPHTUNE_FORCE for kernel {name.strip()!r}")
    return out


def config_with(base: triton.Config, params: dict[str, Any], *, allowed_meta: Iterable[str], where: str,
                examples: Iterable[triton.Config] = ()) -> triton.Config:
    """A copy of ``base`` with ``params`` applied, its ``pre_hook`` kept (a hook that rebuilds tensor descriptors
    for the config must run for the copy too). A name that is neither a meta-parameter nor a launch option is
    a ConfigError listing the names that exist; a value of the wrong kind is a ConfigError naming it: launch
    options are positive ints (num_warps a power of two), and a meta-parameter takes the type its values have
    in ``examples`` (the kernel's configs); an int one is >= 0 (0 is a knob's "off": ``CONVERT=0``), >= 1 for a
    tile size (a name with ``BLOCK`` in it: ``BLOCK_N``, ``XBLOCK``), lower only where an example is. A kernel's
    own ranges (``BLOCK_N=7`` where tiles are powers of two) are its interface's to check, not this."""
    allowed = set(allowed_meta)
    data = config_to_dict(base)
    seen: dict[str, list[Any]] = {}
    for c in [base, *examples]:
        for k, v in c.kwargs.items():
            seen.setdefault(k, []).append(v)
    for name, value in params.items():
        if name not in allowed and name not in LAUNCH_OPTIONS:
            raise ConfigError(
                f"{where}: unknown parameter {name!r}; known: {sorted(allowed) + list(LAUNCH_OPTIONS)}")
        _check_value(name, value, seen.get(name, []), where)
        data[name] = value
    out = config_from_dict(data)
    out.pre_hook = base.pre_hook
    return out


def _check_value(name: str, value: Any, examples: list[Any], where: str) -> None:
    def bad(expected: str) -> ConfigError:
        return ConfigError(f"{where}: {name}={value!r} is not {expected}")
    is_int = isinstance(value, int) and not isinstance(value, bool)
    if name in LAUNCH_OPTIONS:
        expected = launch_option_problem(name, value)
        if expected is not None:
            raise bad(expected)
    elif examples:
        kinds = {type(v) for v in examples}
        if kinds == {bool}:
            if not isinstance(value, bool):
                raise bad("true or false")
        elif kinds <= {int}:
            if not is_int:
                raise bad(f"an int (the kernel's configs use {sorted(set(examples))})")
            # a tile of no elements is never valid; 0 turns a knob off; a negative value only where a config has one
            least = min(1 if "BLOCK" in name else 0, *examples)
            if value < least:
                raise bad(f"an int >= {least} (the kernel's configs use {sorted(set(examples))})")
        elif kinds <= {int, float}:
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise bad("a number")

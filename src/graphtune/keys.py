"""Tuning keys and batch buckets.

A tuning key is the tuple of the ``key`` arguments' values, each mapped through its bucket when one is
declared, followed by the dtype of every tensor argument (as stock Triton does) and the element type of every
tensor-descriptor argument. Buckets follow what inference servers do with CUDA graphs: a runtime batch is
padded up to the next captured size, and a batch above the largest captured size maps to the largest.
"""
from __future__ import annotations

import bisect
import operator
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

from .descriptors import element_type, is_descriptor

# The batch sizes an SGLang-style engine captures CUDA graphs for by default (multiples of 8 up to 256 after the
# small sizes; read in the engine's source): the shipped kernels' buckets and the demo's sizes.
ENGINE_CAPTURE_SIZES: tuple[int, ...] = (1, 2, 4, 8, 12, 16, *range(24, 257, 8))

_SCALARS = frozenset({int, float, bool, str, type(None)})   # never descriptors: skipped without a look


def _whole(value: Any) -> int | None:
    """An integer size (an int, a numpy or torch integer scalar: ``operator.index``) as an int; None for anything
    else (a bool, a float, a string)."""
    if isinstance(value, bool):
        return None
    try:
        return operator.index(value)
    except TypeError:
        return None


@dataclass(frozen=True)
class Buckets:
    """Maps a key argument's runtime value to its bucket. Build with ``pow2`` or ``explicit``."""

    kind: str
    sizes: tuple[int, ...] = ()
    max: int | None = None

    @classmethod
    def pow2(cls, max: int | None = None) -> Buckets:  # noqa: A002 - the issue names it max
        """Round up to the next power of two; values above ``max`` map to ``max``."""
        whole = None if max is None else _whole(max)
        if max is not None and (whole is None or whole < 1):
            raise ValueError(f"Buckets.pow2(max={max!r}): max must be a positive int or None")
        return cls(kind="pow2", max=whole)

    @classmethod
    def explicit(cls, sizes: Iterable[int]) -> Buckets:
        """Round up to the next listed size (as servers pad to the next captured batch size)."""
        try:
            values = list(sizes)
        except TypeError:
            raise TypeError(f"Buckets.explicit(sizes={sizes!r}): sizes must be an iterable of ints") from None
        whole = [_whole(s) for s in values]
        bad = [s for s, w in zip(values, whole) if w is None or w < 1]
        if not values or bad:
            raise ValueError(f"Buckets.explicit(sizes={values!r}): need at least one size, all positive ints"
                             + (f"; bad: {bad}" if bad else ""))
        # (numpy / torch integers as ints: they are hashed, compared and stored as keys)
        return cls(kind="explicit", sizes=tuple(sorted(set(whole))))

    def __post_init__(self) -> None:
        if self.kind not in ("pow2", "explicit"):
            raise ValueError(f"Buckets(kind={self.kind!r}): expected 'pow2' or 'explicit' (use Buckets.pow2() or "
                             f"Buckets.explicit(sizes))")
        if self.kind == "explicit" and (not isinstance(self.sizes, tuple) or not self.sizes
                                        or any(type(v) is not int or v < 1 for v in self.sizes)
                                        or list(self.sizes) != sorted(set(self.sizes))):
            raise ValueError(f"Buckets(kind='explicit', sizes={self.sizes!r}): build it with Buckets.explicit(sizes)")
        if self.kind == "pow2" and (self.sizes or self.max is not None and (type(self.max) is not int
                                                                             or self.max < 1)):
            raise ValueError(f"Buckets(kind='pow2', sizes={self.sizes!r}, max={self.max!r}): build it with "
                             f"Buckets.pow2(max)")
        # a lookup table for the common case (a batch size up to the largest explicit bucket): one index
        # instead of a bisect on the launch hot path
        table: tuple[int, ...] = ()
        if self.kind == "explicit" and self.sizes and self.sizes[-1] <= 65536:
            table = tuple(self._slow(v) for v in range(self.sizes[-1] + 1))
        object.__setattr__(self, "_table", table)

    def __call__(self, value: Any) -> int:
        if type(value) is int and 0 <= value < len(self._table):
            return self._table[value]
        return self._slow(value)

    def _slow(self, value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            try:
                whole = int(value)  # numpy / torch integer scalars
            except (TypeError, ValueError):
                raise TypeError(f"bucketed key value {value!r} is not an integer") from None
            if whole != value:      # (2.7 would have truncated to 2, below its bucket)
                raise TypeError(f"bucketed key value {value!r} is not an integer")
            value = whole
        if value < 0:
            raise ValueError(f"bucketed key value {value} is negative: a batch or token count cannot be")
        if self.kind == "explicit":
            i = bisect.bisect_left(self.sizes, value)
            return self.sizes[i] if i < len(self.sizes) else self.sizes[-1]
        bucket = 1 if value <= 1 else 1 << (value - 1).bit_length()
        if self.max is not None and bucket > self.max:
            return self.max
        return bucket

    def all(self) -> tuple[int, ...]:
        """Every bucket, when the set is finite (explicit, or pow2 with a max)."""
        if self.kind == "explicit":
            return self.sizes
        if self.max is None:
            raise ValueError("Buckets.pow2() without max has no finite list of buckets")
        out, b = [], 1
        while b < self.max:
            out.append(b)
            b <<= 1
        out.append(self.max)
        return tuple(out)

    def __str__(self) -> str:
        if self.kind == "explicit":
            return f"explicit{list(self.sizes)}"
        return f"pow2(max={self.max})"


def key_to_json(key: tuple) -> tuple:
    """A key with dtype objects replaced by their text, as stored in the database and reports."""
    return tuple(v if isinstance(v, (int, float, str, bool)) or v is None else str(v) for v in key)


class KeyBuilder:
    """Builds the tuning key of one call. Positions are resolved once so a call costs a few tuple reads."""

    __slots__ = ("names", "positions", "bucket_fns", "arg_names", "n_key", "kernel_name")

    def __init__(self, arg_names: Sequence[str], key: Sequence[str], buckets: dict[str, Buckets] | None,
                 kernel_name: str):
        buckets = dict(buckets or {})
        unknown = [k for k in key if k not in arg_names]
        if unknown:
            raise ValueError(f"kernel {kernel_name!r}: key names {unknown} are not parameters of the kernel; "
                             f"parameters: {list(arg_names)}")
        unknown = [k for k in buckets if k not in arg_names]
        if unknown:
            raise ValueError(f"kernel {kernel_name!r}: buckets names {unknown} are not parameters of the kernel; "
                             f"parameters: {list(arg_names)}")
        not_in_key = [k for k in buckets if k not in key]
        if not_in_key:
            raise ValueError(f"kernel {kernel_name!r}: buckets names {not_in_key} are not in key={list(key)}")
        for name, b in buckets.items():
            if not isinstance(b, Buckets):
                raise TypeError(f"kernel {kernel_name!r}: buckets[{name!r}] is {b!r}, expected graphtune.Buckets")
        self.arg_names = tuple(arg_names)
        self.kernel_name = kernel_name
        self.names = tuple(key)
        self.n_key = len(key)
        self.positions = tuple(self.arg_names.index(k) for k in key)
        self.bucket_fns = tuple(buckets.get(k) for k in key)

    def __call__(self, args: tuple, kwargs: dict) -> tuple:
        n = len(args)
        out = []
        for pos, name, bucket in zip(self.positions, self.names, self.bucket_fns):
            if pos < n:
                value = args[pos]
            elif name in kwargs:
                value = kwargs[name]
            else:
                raise TypeError(self.missing(args, kwargs))
            out.append(value if bucket is None else bucket(value))
        # dtypes of every tensor argument, as stock Triton keys on them, and the element type of every tensor
        # descriptor (stock Triton leaves those out: a bf16 and an fp8 descriptor would share one choice)
        for a in args:
            dt = getattr(a, "dtype", None)
            if dt is not None:
                out.append(dt)
            elif type(a) not in _SCALARS and is_descriptor(a):
                out.append(element_type(a))
        if kwargs:
            for name, a in kwargs.items():
                if name not in self.arg_names:
                    continue
                dt = getattr(a, "dtype", None)
                if dt is not None:
                    out.append(dt)
                elif type(a) not in _SCALARS and is_descriptor(a):
                    out.append(element_type(a))
        return tuple(out)

    def missing(self, args: tuple, kwargs: dict) -> str:
        """The error text of a launch that lacks key arguments."""
        given = set(self.arg_names[:len(args)]) | set(kwargs)
        lacking = [n for n in self.arg_names if n not in given]
        return (f"kernel {self.kernel_name!r} launched with {len(args)} positional argument(s) "
                f"{'and ' + str(sorted(kwargs)) + ' ' if kwargs else ''}: missing {lacking} "
                f"(parameters: {list(self.arg_names)})")

    def raw_values(self, args: tuple, kwargs: dict) -> tuple:
        n = len(args)
        return tuple(args[pos] if pos < n else kwargs[name] for pos, name in zip(self.positions, self.names))

    def distance(self, a: tuple, b: tuple) -> float | None:
        """Distance between two keys for the fallback: None unless every non-bucketed part matches."""
        if len(a) != len(b):
            return None
        d = 0.0
        for i, (x, y) in enumerate(zip(a, b)):
            bucket = self.bucket_fns[i] if i < self.n_key else None
            if bucket is None:
                if x != y:
                    return None
            elif x != y:
                d += abs((max(x, 1)).bit_length() - (max(y, 1)).bit_length()) + abs(x - y) / max(x, y, 1)
        return d

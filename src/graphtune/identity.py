"""Who a tuning result belongs to: the kernel (name, source, candidate list) and the environment (GPU, versions).

A kernel's source is what Triton compiles for it: its own text and Triton's key of the JIT function
(``JITFunction.cache_key``: the text of every JIT function it calls, recursively, the constexpr globals it reads
and the line it starts on). A helper edited, or a module-level constexpr changed, is new source: a config tuned for
the old one is not applied (it stays in the database, listed by ``graphtune db ls --stale``).

A stored result is applied only when both identities match the running process exactly: a config tuned for
other source text, another candidate list, another GPU model or other compiler versions may be slower, or may
no longer compile, so it is never trusted. Hardware and versions are read lazily, never at import, so that
``import graphtune`` neither initialises CUDA nor imports torch.
"""
from __future__ import annotations

import dataclasses
import hashlib
import inspect
from dataclasses import dataclass
from typing import Any, Iterable


@dataclass(frozen=True)
class KernelIdentity:
    name: str
    source_hash: str
    configs_hash: str


@dataclass(frozen=True)
class EnvIdentity:
    gpu_name: str
    compute_capability: str  # "9.0"; "" without a GPU
    triton_version: str
    torch_version: str
    cuda_version: str  # torch.version.cuda ("12.8"), "hip-<version>" on ROCm, "" on a CPU build


def _sha16(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _unwrap(fn: Any) -> Any:
    """The JIT function inside ``fn`` (the object holding its ``src`` text) through wrappers (Autotuner, Heuristics),
    or, where there is none, the innermost object reached."""
    seen = 0
    while seen < 16 and not isinstance(getattr(fn, "src", None), str):
        # wrappers nest a few levels at most; the bound only guards against a cycle
        inner = getattr(fn, "fn", None)
        if inner is None or inner is fn:
            break
        fn = inner
        seen += 1
    return fn


def source_text(fn: Any) -> str:
    """The source of a Triton kernel, or of the function inside a wrapper (Autotuner, Heuristics, JITFunction)."""
    fn = _unwrap(fn)
    src = getattr(fn, "src", None)
    if isinstance(src, str):
        return src
    try:
        return inspect.getsource(fn)
    except (OSError, TypeError):
        code = getattr(fn, "__code__", None)
        if code is None:
            raise TypeError(f"cannot read the source of {fn!r}: not a Triton kernel or a Python function") from None
        # Defined where no source file exists (a REPL): the bytecode still changes whenever the body does.
        return f"{getattr(code, 'co_qualname', code.co_name)}:{code.co_code.hex()}"


def dependencies_key(fn: Any) -> str:
    """Triton's key of the JIT function inside ``fn`` (wrappers as ``source_text``): what it calls and reads besides
    its own text. "" for a plain Python function, under the interpreter (whose functions Triton keys no dependencies
    for), or where Triton cannot compute it (the compile then fails with Triton's own message)."""
    fn = _unwrap(fn)
    if not isinstance(getattr(fn, "src", None), str):
        return ""
    try:
        return str(fn.cache_key)
    except Exception:  # noqa: BLE001 - Triton's dependency walk may refuse a global; the compile says why
        return ""


def kernel_identity(name: str, fn: Any, configs: Iterable[Any]) -> KernelIdentity:
    """Identity of a tuned kernel: ``fn`` is a ``triton.JITFunction`` (or anything wrapping one), ``configs``
    the candidate ``triton.Config`` list."""
    from .configs import configs_hash  # imports triton: keep it out of ``import graphtune.identity``

    if not isinstance(name, str) or not name:
        raise ValueError(f"kernel name must be a non-empty string, got {name!r}")
    fn = _unwrap(fn)
    source = source_text(fn) + "\0" + dependencies_key(fn)
    return KernelIdentity(name=name, source_hash=_sha16(source), configs_hash=configs_hash(configs))


def current_env() -> EnvIdentity:
    """The environment identity of this process (of the current CUDA device), computed once per device."""
    from . import settings

    interpret = settings.interpret()
    device = -1
    if not interpret:
        import torch

        if torch.cuda.is_available():
            device = torch.cuda.current_device()
    from .state import STATE

    cache_key = (interpret, device)
    env = STATE.env_cache.get(cache_key)
    if env is None:
        with STATE.lock:
            env = STATE.env_cache.get(cache_key) or _read_env(interpret, device)
            STATE.env_cache[cache_key] = env
    return env


def _read_env(interpret: bool, device: int) -> EnvIdentity:
    import torch
    import triton

    if torch.version.cuda:
        cuda = str(torch.version.cuda)
    elif getattr(torch.version, "hip", None):
        cuda = f"hip-{torch.version.hip}"
    else:
        cuda = ""
    if device >= 0:
        major, minor = torch.cuda.get_device_capability(device)
        gpu, capability = torch.cuda.get_device_name(device), f"{major}.{minor}"
    else:
        # Interpreter timings say nothing about any GPU, so they get their own name and never mix with "cpu".
        gpu, capability = ("interpreter" if interpret else "cpu"), ""
    return EnvIdentity(gpu_name=gpu, compute_capability=capability, triton_version=str(triton.__version__),
                       torch_version=str(torch.__version__), cuda_version=cuda)


def reset_env_cache() -> None:
    """Forget the cached environment (tests that switch TRITON_INTERPRET)."""
    from .state import STATE

    with STATE.lock:
        STATE.env_cache.clear()


def env_mismatch(entry_env: EnvIdentity, env: EnvIdentity) -> list[str]:
    """The fields where a stored environment differs from ``env``, as ``"torch_version 2.12.0 != 2.13.0"``."""
    out = []
    for field in dataclasses.fields(EnvIdentity):
        a, b = getattr(entry_env, field.name), getattr(env, field.name)
        if a != b:
            out.append(f"{field.name} {a or '-'} != {b or '-'}")
    return out

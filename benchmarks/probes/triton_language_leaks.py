"""pytest plugin (a probe): after each test, which attributes of triton.language (modules and classes) changed since
the session started, written to $OUT/leaks.txt. Used in session 8 on the H200: `cd tests && TRITON_INTERPRET=1
PYTHONPATH=../src:../benchmarks/probes python -m pytest cpu -p triton_language_leaks`."""
import os

_base = {}
_out = os.path.join(os.environ.get("OUT", "/tmp"), "leaks.txt")


def _snap():
    import triton.language as tl
    spaces = {"tl": vars(tl), "tl.core": vars(tl.core), "tl.math": vars(tl.math), "tl.standard": vars(tl.standard),
              "tensor": vars(tl.tensor), "dtype": vars(tl.dtype), "desc": vars(tl.core.tensor_descriptor_base)}
    return {(k, n): (id(v), getattr(v, "__module__", None), getattr(v, "__qualname__", type(v).__name__))
            for k, ns in spaces.items() for n, v in list(ns.items())}


def pytest_sessionstart(session):
    _base.update(_snap())
    with open(_out, "w") as f:
        f.write(f"start: {len(_base)} attributes\n")


def pytest_runtest_logreport(report):
    if report.when != "teardown":
        return
    now = _snap()
    changed = sorted(k for k in set(now) | set(_base) if now.get(k) != _base.get(k))
    if changed:
        with open(_out, "a") as f:
            f.write(f"{report.nodeid}: {len(changed)} changed: "
                    + ", ".join(f"{a}.{b}->{now.get((a, b), ('gone',))[1:]}" for a, b in changed[:12]) + "\n")
        _base.clear()
        _base.update(now)

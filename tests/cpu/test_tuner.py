"""Core tuner behaviour on CPU: real kernels through the Triton interpreter, timers injected."""
from __future__ import annotations

import warnings

import pytest
import torch
import triton
import triton.language as tl

import graphtune
from graphtune import Buckets, capture
from graphtune.errors import ConfigError, TuningError, UntunedError


@triton.jit
def _scale_kernel(x_ptr, out_ptr, n, B, scale, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x * scale, mask=mask)


CONFIGS = [triton.Config({"BLOCK": b}, num_warps=w) for b in (16, 32, 64) for w in (1, 2)]


class FakeBench:
    """Injected timer: deterministic per-config times, counting calls; the winner depends on the bucket."""

    def __init__(self, best_block_for=None):
        self.calls = 0
        self.best_block_for = best_block_for or (lambda: 32)
        self.current_block = None

    def __call__(self, fn):
        self.calls += 1
        fn()
        return 1.0


def make_kernel(name, *, bench=None, configs=CONFIGS, **kw):
    timings = {}

    def do_bench(fn):
        # read the config from the closure: graphtune's bench call runs the kernel with that config
        bench.calls += 1
        fn()
        cfg = do_bench.current
        return timings.get(cfg, 1.0)

    kernel = graphtune.autotune(configs, key=["n", "B"], name=name, buckets={"B": Buckets.explicit([1, 2, 4, 8, 16])},
                                do_bench=bench, **kw)(_scale_kernel)
    return kernel


def launch(kernel, n, B, scale=2.0):
    x = torch.randn(n)
    out = torch.full((n,), float("nan"))
    kernel[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, out, n, B, scale)
    return x, out


class CountingBench:
    """do_bench(fn) -> ms. Runs fn (so the launch is real) and times configs by their BLOCK via a table."""

    def __init__(self, table=None):
        self.calls = 0
        self.table = table or {}

    def __call__(self, fn):
        self.calls += 1
        fn()
        return self.table.get(fn.__graphtune_label__, 1.0) if hasattr(fn, "__graphtune_label__") else 1.0


def test_buckets_pow2_and_explicit():
    p = Buckets.pow2(max=64)
    assert [p(v) for v in (1, 2, 3, 5, 8, 9, 63, 64, 65, 1000)] == [1, 2, 4, 8, 8, 16, 64, 64, 64, 64]
    assert Buckets.pow2()(1000) == 1024
    e = Buckets.explicit([8, 1, 2, 4, 12, 16])
    assert [e(v) for v in (1, 3, 5, 9, 12, 13, 17, 500)] == [1, 4, 8, 12, 12, 16, 16, 16]
    assert e.all() == (1, 2, 4, 8, 12, 16)
    assert p.all() == (1, 2, 4, 8, 16, 32, 64)


@pytest.mark.parametrize("bad", [[], [0, 2], [1.5], [-3]], ids=["empty", "zero", "float", "negative"])
def test_buckets_explicit_rejects(bad):
    with pytest.raises(ValueError, match="Buckets.explicit"):
        Buckets.explicit(bad)


def test_unknown_key_or_bucket_name_is_error_at_decoration():
    with pytest.raises(ValueError, match=r"key names \['nope'\]"):
        graphtune.autotune(CONFIGS, key=["nope"])(_scale_kernel)
    with pytest.raises(ValueError, match=r"buckets names \['M'\]"):
        graphtune.autotune(CONFIGS, key=["n"], buckets={"M": Buckets.pow2()})(_scale_kernel)


def test_tunes_once_per_bucket_and_output_is_right():
    bench = CountingBench()
    k = graphtune.autotune(CONFIGS, key=["B"], name="t_once", buckets={"B": Buckets.explicit([1, 2, 4, 8])},
                           do_bench=bench)(_scale_kernel)
    x, out = launch(k, 100, 3)
    torch.testing.assert_close(out, x * 2.0)
    assert bench.calls == len(CONFIGS)
    launch(k, 77, 4)  # same bucket (4): no new tuning
    assert bench.calls == len(CONFIGS)
    launch(k, 77, 5)  # bucket 8
    assert bench.calls == 2 * len(CONFIGS)
    cov = graphtune.coverage(["t_once"]).to_dict()
    keys = sorted(tuple(t["key"]) for t in cov["kernels"][0]["tuned"])
    assert keys == [(4, "torch.float32", "torch.float32"), (8, "torch.float32", "torch.float32")]
    hits = {tuple(t["key"])[0]: t["hits"] for t in cov["kernels"][0]["tuned"]}
    assert hits == {4: 2, 8: 1}


def test_picks_fastest_config_from_injected_timer():
    order = []

    def do_bench(fn):
        order.append(fn)
        fn()
        return [5.0, 3.0, 1.0, 4.0, 6.0, 2.0][len(order) - 1]

    k = graphtune.autotune(CONFIGS, key=["B"], name="t_pick", do_bench=do_bench)(_scale_kernel)
    launch(k, 50, 1)
    assert k.best_config.kwargs == CONFIGS[2].kwargs and k.best_config.num_warps == CONFIGS[2].num_warps



def test_coverage_shows_the_search_timings_fastest_first():
    """Where this process searched a key, coverage lists each candidate as the search timed it, fastest first (the
    pick first), so a report shows by how much the pick won; a key loaded or forced has no timings."""
    times = [5.0, 3.0, 1.0, 4.0, 6.0, 2.0]
    calls = []

    def do_bench(fn):
        calls.append(fn)
        fn()
        return times[len(calls) - 1]

    k = graphtune.autotune(CONFIGS, key=["B"], name="t_cov_timings", do_bench=do_bench)(_scale_kernel)
    launch(k, 50, 1)
    (row, ) = graphtune.coverage(["t_cov_timings"]).to_dict()["kernels"][0]["tuned"]
    medians = [t["median_ms"] for t in row["timings"]]
    assert medians == sorted(times)
    assert row["timings"][0]["config"] == row["config"]
    k.install(k.key_of((torch.empty(50), torch.empty(50), 50, 300, 2.0)), CONFIGS[0], record=False)
    rows = graphtune.coverage(["t_cov_timings"]).to_dict()["kernels"][0]["tuned"]
    assert [("timings" in r) for r in rows] == [True, False]

def test_dtype_is_part_of_key():
    bench = CountingBench()
    k = graphtune.autotune(CONFIGS, key=["B"], name="t_dtype", do_bench=bench)(_scale_kernel)
    launch(k, 40, 1)
    x = torch.randn(40, dtype=torch.float16)
    out = torch.empty(40, dtype=torch.float16)
    k[lambda m: (triton.cdiv(40, m["BLOCK"]),)](x, out, 40, 1, 2.0)
    assert bench.calls == 2 * len(CONFIGS)


def test_single_config_never_benchmarks_even_in_capture():
    bench = CountingBench()
    k = graphtune.autotune(CONFIGS[:1], key=["B"], name="t_single", do_bench=bench)(_scale_kernel)
    capture.simulate_capture(True)
    x, out = launch(k, 33, 7)
    torch.testing.assert_close(out, x * 2.0)
    assert bench.calls == 0
    assert graphtune.coverage(["t_single"]).to_dict()["total_misses"] == 0


@pytest.mark.parametrize("where", ["capture", "frozen"])
def test_fallback_policy_launches_nearest_tuned_bucket_and_records_miss(where):
    def do_bench(fn):
        do_bench.n += 1
        fn()
        return 1.0 if do_bench.n == 4 else 2.0   # candidate 3 (BLOCK=32, 2 warps) wins
    do_bench.n = 0
    k = graphtune.autotune(CONFIGS, key=["B"], name=f"t_fb_{where}", buckets={"B": Buckets.explicit([1, 8, 64])},
                           do_bench=do_bench, default=CONFIGS[0])(_scale_kernel)
    launch(k, 64, 8)
    assert do_bench.n == len(CONFIGS)
    if where == "capture":
        capture.simulate_capture(True)
    else:
        graphtune.freeze()
    with pytest.warns(RuntimeWarning, match="no tuned config"):
        x, out = launch(k, 64, 60)   # bucket 64 was never tuned
    torch.testing.assert_close(out, x * 2.0)
    assert do_bench.n == len(CONFIGS)   # nothing benchmarked
    assert k.best_config.kwargs == {"BLOCK": 32} and k.best_config.num_warps == 2
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # warned once per kernel and key
        launch(k, 64, 64)
    cov = graphtune.coverage([k.name]).to_dict()
    (miss,) = cov["kernels"][0]["misses"]
    assert miss["where"] == where and miss["action"] == "fallback" and miss["count"] == 2
    assert miss["fallback"].startswith("BLOCK=32,num_warps=2") and "nearest tuned bucket" in miss["fallback_from"]
    with pytest.raises(UntunedError):
        graphtune.assert_covered([k.name])
    # outside capture / after unfreeze the key tunes normally
    capture.simulate_capture(None)
    graphtune.unfreeze()
    launch(k, 64, 64)
    assert do_bench.n == 2 * len(CONFIGS)


def test_fallback_without_tuned_bucket_uses_default_then_first():
    bench = CountingBench()
    k = graphtune.autotune(CONFIGS, key=["B"], name="t_fb_default", do_bench=bench, default=CONFIGS[5])(_scale_kernel)
    graphtune.freeze()
    with pytest.warns(RuntimeWarning, match="declared default"):
        launch(k, 10, 1)
    assert k.best_config is CONFIGS[5]
    k2 = graphtune.autotune(CONFIGS, key=["B"], name="t_fb_first", do_bench=bench)(_scale_kernel)
    with pytest.warns(RuntimeWarning, match="first config"):
        launch(k2, 10, 1)
    assert k2.best_config is CONFIGS[0]
    assert bench.calls == 0


def test_raise_policy_raises_before_launch_and_names_everything(monkeypatch):
    bench = CountingBench()
    k = graphtune.autotune(CONFIGS, key=["B"], name="t_raise", buckets={"B": Buckets.explicit([1, 8, 64])},
                           do_bench=bench)(_scale_kernel)
    launch(k, 20, 1)
    calls = bench.calls
    capture.simulate_capture(True)
    for how in ("api", "env", "kernel"):
        capture.set_policy("raise" if how == "api" else None)
        if how == "env":
            monkeypatch.setenv("GRAPHTUNE_POLICY", "raise")
        if how == "kernel":
            monkeypatch.delenv("GRAPHTUNE_POLICY")
            k.policy = "raise"
        x = torch.randn(20)
        out = torch.full((20,), float("nan"))
        with pytest.raises(UntunedError) as info:
            k[lambda m: (triton.cdiv(20, m["BLOCK"]),)](x, out, 20, 50, 2.0)
        msg = str(info.value)
        assert "t_raise" in msg and "B=50" in msg and "[64," in msg and "[1," in msg and "warm" in msg
        assert "capture" in msg
        assert torch.isnan(out).all()   # nothing was launched
    assert bench.calls == calls


def test_bad_policy_is_error(monkeypatch):
    with pytest.raises(ValueError, match="set_policy"):
        graphtune.set_policy("maybe")
    with pytest.raises(ValueError, match="policy='sometimes'"):
        graphtune.autotune(CONFIGS, key=["B"], policy="sometimes")(_scale_kernel)


def test_force_api_and_env_never_benchmark(monkeypatch):
    bench = CountingBench()
    k = graphtune.autotune(CONFIGS, key=["B"], name="t_force", do_bench=bench)(_scale_kernel)
    graphtune.force("t_force", BLOCK=64, num_warps=2)
    x, out = launch(k, 100, 3)
    torch.testing.assert_close(out, x * 2.0)
    assert bench.calls == 0 and k.best_config.kwargs == {"BLOCK": 64} and k.best_config.num_warps == 2
    graphtune.unforce("t_force")
    monkeypatch.setenv("GRAPHTUNE_FORCE", "t_force:BLOCK=16,num_warps=1,num_stages=2")
    launch(k, 100, 3)
    assert bench.calls == 0 and k.best_config.kwargs == {"BLOCK": 16} and k.best_config.num_stages == 2
    assert graphtune.coverage(["t_force"]).to_dict()["kernels"][0]["forced"].startswith("BLOCK=16")
    monkeypatch.delenv("GRAPHTUNE_FORCE")
    launch(k, 100, 3)
    assert bench.calls == len(CONFIGS)


def test_chosen_names_the_config_a_launch_would_run_without_resolving_anything():
    """``chosen``: None before a bucket is tuned (and asking tunes nothing), the tuned pick after, per bucket; a force
    wins over both and is gone with ``unforce``."""
    bench = CountingBench()
    k = graphtune.autotune(CONFIGS, key=["B"], name="t_chosen", buckets={"B": Buckets.explicit([1, 2, 4, 8])},
                           do_bench=bench)(_scale_kernel)
    args = (torch.empty(100), torch.empty(100), 100, 3, 2.0)
    assert k.chosen(args) is None and bench.calls == 0
    launch(k, 100, 3)
    assert bench.calls == len(CONFIGS)
    assert k.chosen(args) is k.best_config and k.chosen(args, {}) is k.best_config
    assert k.chosen((*args[:3], 5, 2.0)) is None       # (bucket 8: not tuned)
    graphtune.force("t_chosen", BLOCK=16, num_warps=2)
    try:
        forced = k.chosen((*args[:3], 5, 2.0))
        assert forced.kwargs == {"BLOCK": 16} and forced.num_warps == 2
    finally:
        graphtune.unforce("t_chosen")
    assert k.chosen((*args[:3], 5, 2.0)) is None and bench.calls == len(CONFIGS)


def test_force_bad_names_are_errors(monkeypatch):
    graphtune.autotune(CONFIGS, key=["B"], name="t_force_bad")(_scale_kernel)
    with pytest.raises(ConfigError, match="unknown parameter 'BLOK'"):
        graphtune.force("t_force_bad", BLOK=3)
    graphtune.force("no_such_kernel", num_warps=4)
    with pytest.raises(ConfigError, match="no_such_kernel"):
        graphtune.check_forces()
    graphtune.unforce()
    monkeypatch.setenv("GRAPHTUNE_FORCE", "t_force_bad2:BLOCK=16,warps=4")
    with pytest.raises(ConfigError, match="unknown parameter 'warps'"):
        graphtune.autotune(CONFIGS, key=["B"], name="t_force_bad2")(_scale_kernel)
    monkeypatch.setenv("GRAPHTUNE_FORCE", "t_force_bad2 BLOCK=16")
    with pytest.raises(ConfigError, match="GRAPHTUNE_FORCE"):
        graphtune.tuner._env_forces()


@triton.jit
def _maybe_broken_kernel(x_ptr, out_ptr, n, B, BLOCK: tl.constexpr, MODE: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    if MODE == 1:
        x = x / 0.0           # non-finite output
    if MODE == 2:
        x = x + 1.0           # wrong answer
    if MODE == 3:
        tl.static_assert(BLOCK < 0, "this config cannot compile")
    tl.store(out_ptr + offs, x, mask=mask)


def test_failures_are_recorded_never_chosen_and_validate_catches_wrong_output():
    configs = [triton.Config({"BLOCK": 32, "MODE": m}) for m in (3, 1, 0, 2)]

    def do_bench(fn):
        fn()
        do_bench.n += 1
        return 5.0 - do_bench.n    # later candidates look faster: the wrong one would win untested
    do_bench.n = 0
    k = graphtune.autotune(configs, key=["B"], name="t_validate", do_bench=do_bench, validate=True)(
        _maybe_broken_kernel)
    x = torch.randn(50)
    out = torch.full((50,), float("nan"))
    k[lambda m: (triton.cdiv(50, m["BLOCK"]),)](x, out, 50, 1)
    torch.testing.assert_close(out, x)
    assert k.best_config.kwargs["MODE"] == 0
    assert do_bench.n == 0   # one valid candidate left: nothing to time
    excluded = graphtune.coverage(["t_validate"]).to_dict()["kernels"][0]["excluded"][0]["configs"]
    reasons = {r["config"].split(",")[1]: r["reason"] for r in excluded}
    assert "non-finite" in reasons["MODE=1"]
    assert "differs" in reasons["MODE=2"]
    assert "cannot compile" in reasons["MODE=3"] or "Error" in reasons["MODE=3"]


def test_all_candidates_failing_is_tuning_error_listing_each():
    configs = [triton.Config({"BLOCK": 32, "MODE": 3}, num_warps=w) for w in (1, 2)]
    k = graphtune.autotune(configs, key=["B"], name="t_allfail", do_bench=CountingBench())(_maybe_broken_kernel)
    with pytest.raises(TuningError) as info:
        k[(2,)](torch.randn(50), torch.empty(50), 50, 1)
    text = str(info.value)
    assert "t_allfail" in text and "num_warps=1" in text and "num_warps=2" in text


@triton.jit
def _inplace_kernel(x_ptr, n, B, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=mask) + 1.0, mask=mask)


def test_restore_value_protects_inplace_kernel_during_tuning():
    configs = [triton.Config({"BLOCK": b}) for b in (16, 32, 64)]

    def do_bench(fn):
        for _ in range(5):
            fn()
        return 1.0
    k = graphtune.autotune(configs, key=["B"], name="t_restore", do_bench=do_bench, restore_value=["x_ptr"])(
        _inplace_kernel)
    x = torch.randn(40)
    before = x.clone()
    k[lambda m: (triton.cdiv(40, m["BLOCK"]),)](x, 40, 1)
    torch.testing.assert_close(x, before + 1.0)   # exactly one real increment


def test_reset_to_zero_and_unknown_names():
    with pytest.raises(ValueError, match=r"restore_value names \['y_ptr'\]"):
        graphtune.autotune(CONFIGS, key=["B"], restore_value=["y_ptr"])(_scale_kernel)
    with pytest.raises(ValueError, match="prune_configs_by has unknown"):
        graphtune.autotune(CONFIGS, key=["B"], prune_configs_by={"topk": 2})(_scale_kernel)


BAD_DECORATIONS = [
    # (each of these passed decoration and failed at the first launch naming nothing, or was silently accepted;
    # session 31's input review)
    (dict(key=None), TypeError, r"autotune\(key=None\): key must be a list of parameter names"),
    (dict(key=["B", "B"]), ValueError, r"autotune\(key=\['B', 'B'\]\): a parameter named twice"),
    (dict(key=["BLOCK"]), ValueError, r"key names \['BLOCK'\], which the configs set"),
    (dict(buckets=Buckets.pow2(8)), TypeError, r"autotune\(buckets=Buckets\(kind='pow2'.*\): expected a dict such as"),
    (dict(prune_configs_by=5), TypeError, r"autotune\(prune_configs_by=5\): expected a dict"),
    (dict(reset_to_zero="out_ptr"), TypeError, r"autotune\(reset_to_zero='out_ptr'\): expected a list"),
    (dict(restore_value="x_ptr"), TypeError, r"autotune\(restore_value='x_ptr'\): expected a list"),
    (dict(do_bench=5), TypeError, r"autotune\(do_bench=5\): expected a callable"),
    (dict(pre_hook=5), TypeError, r"autotune\(pre_hook=5\): expected a callable"),
    (dict(post_hook="f"), TypeError, r"autotune\(post_hook='f'\): expected a callable"),
    (dict(validate="no"), TypeError, r"autotune\(validate='no'\): expected True or False"),
    (dict(isolate=1), TypeError, r"autotune\(isolate=1\): expected True or False"),
    (dict(prune_configs_by={"early_config_prune": 5}), TypeError, r"prune_configs_by\['early_config_prune'\] = 5"),
    (dict(prune_configs_by={"perf_model": 5}), TypeError, r"prune_configs_by\['perf_model'\] = 5"),
    (dict(prune_configs_by={"top_k": 0}), ValueError, r"prune_configs_by\['top_k'\] = 0, expected an int >= 1"),
    (dict(prune_configs_by={"top_k": 1.5}), ValueError, r"prune_configs_by\['top_k'\] = 1.5"),
    (dict(prune_configs_by={"top_k": "x"}), ValueError, r"prune_configs_by\['top_k'\] = 'x'"),
    (dict(default=triton.Config({"BLOCK2": 64})), ValueError, r"default=.*lacks \['BLOCK'\], which every config "
                                                            r"sets; sets \['BLOCK2'\], which no config sets"),
    (dict(name="grp:scale"), ValueError, r"autotune\(name='grp:scale'\): a kernel name may not contain ':'"),
    (dict(name=" padded "), ValueError, r"nor begin or end with whitespace"),
    (dict(name=5), ValueError, r"autotune\(name=5\): a kernel name must be a non-empty string"),
]


@pytest.mark.parametrize("kwargs,error,message", BAD_DECORATIONS,
                         ids=[f"{next(iter(k))}-{i}" for i, (k, _, _) in enumerate(BAD_DECORATIONS)])
def test_bad_decoration_is_one_line_naming_the_argument(kwargs, error, message):
    """Every argument of graphtune.autotune is checked when the kernel is decorated, one line naming it and its
    value, before any launch."""
    args = {"key": ["B"], **kwargs}
    with pytest.raises(error, match=message) as got:
        graphtune.autotune(CONFIGS, **args)(_scale_kernel)
    assert "\n" not in str(got.value)


def test_force_and_coverage_refuse_what_names_no_kernel():
    """force() of a name that is not a string; coverage() and assert_covered() of one string (it was read as its
    letters, or matched as a substring) or of unknown names (coverage returned nothing)."""
    graphtune.autotune(CONFIGS, key=["B"], name="t_names")(_scale_kernel)
    for bad in (None, 5, ""):
        with pytest.raises(ValueError, match=r"a kernel name must be a non-empty string"):
            graphtune.force(bad, num_warps=4)
    for call in (graphtune.coverage, graphtune.assert_covered):
        with pytest.raises(TypeError, match=r"names='t_names'\): expected a list of kernel names"):
            call("t_names")
        with pytest.raises(ValueError, match=r"unknown kernels \['typo'\]"):
            call(["typo"])
    assert list(graphtune.coverage(["t_names"]).kernels) == ["t_names"]


@pytest.mark.parametrize("returned", [float("nan"), "fast", -1.0, [], [1.0, float("inf")], True])
def test_a_do_bench_that_returns_no_time_is_one_line_naming_it(returned):
    """An injected do_bench returning something that is not a time: one line naming the kernel and the value (a NaN
    ranked candidates arbitrarily, then failed the database write)."""
    k = graphtune.autotune(CONFIGS, key=["B"], name="t_badbench", do_bench=lambda fn: returned)(_scale_kernel)
    with pytest.raises(ValueError, match=r"kernel 't_badbench': do_bench returned .*; expected a time in ms") as got:
        k[lambda m: (triton.cdiv(50, m["BLOCK"]),)](torch.randn(50), torch.empty(50), 50, 1, 2.0)
    assert "\n" not in str(got.value)


def test_prune_configs_by_early_prune_and_perf_model():
    bench = CountingBench()

    def early(configs, nargs, **kw):
        assert "x_ptr" in nargs and nargs["n"] == 60
        return [c for c in configs if c.kwargs["BLOCK"] != 16]

    def perf(**kw):
        return kw["BLOCK"] * 10 + kw["num_warps"]

    k = graphtune.autotune(CONFIGS, key=["B"], name="t_prune", do_bench=bench,
                           prune_configs_by={"early_config_prune": early, "perf_model": perf, "top_k": 2})(
        _scale_kernel)
    launch(k, 60, 1)
    assert bench.calls == 2
    assert k.best_config.kwargs["BLOCK"] == 32


def test_warmup_tunes_every_size_then_capture_hits_only():
    bench = CountingBench()
    sizes = [1, 2, 4, 8, 12, 16]
    k = graphtune.autotune(CONFIGS, key=["B"], name="t_warmup", buckets={"B": Buckets.explicit(sizes)},
                           do_bench=bench, policy="raise")(_scale_kernel)

    def step(x, out, B):
        k[lambda m: (triton.cdiv(x.numel(), m["BLOCK"]),)](x, out, x.numel(), B, 2.0)

    graphtune.warmup(step, sizes, lambda b: (torch.randn(8 * b), torch.empty(8 * b), b))
    assert bench.calls == len(sizes) * len(CONFIGS)
    capture.simulate_capture(True)
    for b in (1, 3, 7, 9, 13, 16, 40):       # padded to captured sizes; above the largest -> largest
        x = torch.randn(8 * b)
        out = torch.full_like(x, float("nan"))
        step(x, out, b)
        torch.testing.assert_close(out, x * 2.0)
    assert bench.calls == len(sizes) * len(CONFIGS)
    graphtune.assert_covered(["t_warmup"])
    text = str(graphtune.coverage(["t_warmup"]))
    assert "t_warmup" in text and "tuned" in text


def test_warmup_inside_capture_is_refused():
    capture.simulate_capture(True)
    with pytest.raises(RuntimeError, match="inside CUDA graph capture"):
        graphtune.warmup(lambda b: None, [1], lambda b: (b,))


def test_neighbour_ranking_orders_the_next_bucket():
    seen_orders = []

    def do_bench(fn):
        seen_orders.append(fn)
        fn()
        return 1.0
    k = graphtune.autotune(CONFIGS, key=["B"], name="t_neigh", buckets={"B": Buckets.pow2(max=64)},
                           do_bench=do_bench)(_scale_kernel)
    launch(k, 30, 2)
    first = list(seen_orders)
    assert len(first) == len(CONFIGS)
    k._ranking[next(iter(k._ranking))] = [5, 4, 3, 2, 1, 0]
    order = k._neighbour_order((4, torch.float32, torch.float32), list(range(6)))
    assert order == [5, 4, 3, 2, 1, 0]


def test_excluded_candidates_reach_the_database_and_explain(capsys):
    configs = [triton.Config({"BLOCK": 32, "MODE": m}) for m in (3, 0)]
    k = graphtune.autotune(configs, key=["B"], name="t_explain", do_bench=CountingBench())(_maybe_broken_kernel)
    k[lambda m: (triton.cdiv(50, m["BLOCK"]),)](torch.randn(50), torch.empty(50), 50, 1)
    from graphtune.cli import main
    capsys.readouterr()
    assert main(["db", "show", "t_explain", "--explain"]) == 0
    text = capsys.readouterr().out
    assert "MODE=3" in text and "MODE=0" not in text.split("MODE=3")[1].split("\n")[0]


def test_warmup_progress_bar_when_asked(monkeypatch):
    monkeypatch.setenv("GRAPHTUNE_PROGRESS", "1")
    seen = []
    graphtune.warmup(lambda b: seen.append(b), [1, 2, 4], lambda b: (b,))
    assert seen == [1, 2, 4]
    monkeypatch.setenv("GRAPHTUNE_PROGRESS", "maybe")
    with pytest.raises(ValueError, match="GRAPHTUNE_PROGRESS"):
        graphtune.warmup(lambda b: None, [1], lambda b: (b,))


class _StubCompiled:
    """What the device check reads from a compiled kernel (metadata.shared, n_regs after loading)."""

    def __init__(self, shared, regs):
        self.metadata = type("M", (), {"shared": shared})()
        self.n_regs, self.n_spills, self.loaded = regs, 0, False

    def _init_handles(self):
        self.loaded = True


@pytest.mark.parametrize("shared,regs,warps,expect", [
    (200_000, 64, 4, None),
    (240_000, 64, 4, "needs 240000 B shared memory, sm_90 allows 232448 B per block"),
    (1024, 64, 64, "needs 2048 threads per block"),
    (1024, 255, 16, "registers per block"),
], ids=["fits", "shared", "threads", "registers"])
def test_device_check_uses_the_inspector_rules(monkeypatch, shared, regs, warps, expect):
    from graphtune.resources import get_target
    k = graphtune.autotune(CONFIGS, key=["B"], name="t_devcheck")(_scale_kernel)
    stub = _StubCompiled(shared, regs)
    monkeypatch.setattr(k.fn, "warmup", lambda *a, **kw: stub)
    from graphtune.search import _check_compiled
    resources: dict = {}
    why = _check_compiled(k.space, triton.Config({"BLOCK": 32}, num_warps=warps), (), {}, (1,), get_target("sm_90"),
                          resources, 0)
    if expect is None:
        assert why is None and stub.loaded and resources[0]["registers"] == regs
    else:
        assert expect in why
        assert not stub.loaded or expect == "registers per block"   # over-limit shared memory is never loaded


def test_followed_by_runs_after_the_kernel_inside_each_timed_call():
    """``autotune(followed_by=...)``: each timed call launches the candidate, then the follow-up on that launch's
    arguments and the candidate's values by name (the kernel's output already written), before the timer stops; the
    search's untimed launches are followed too (the eager load of each candidate, before any timing: state a launch
    and its follow-up keep between them stays as the server leaves it); the tuned kernel's own launches never call
    it."""
    events = []

    def do_bench(fn):
        events.append("start")
        fn()
        events.append("stop")
        return float(len(events))

    def follow(named):
        assert torch.isfinite(named["out_ptr"]).all()       # (launch() fills out with NaN: the kernel ran first)
        events.append(("follow", named["BLOCK"], named["num_warps"], named["n"]))

    k = graphtune.autotune(CONFIGS, key=["B"], name="t_follow_order", do_bench=do_bench,
                           followed_by=follow)(_scale_kernel)
    x, out = launch(k, 50, 1)
    assert torch.equal(out, x * 2.0)
    loads = events[:len(CONFIGS)]
    assert loads == [("follow", c.kwargs["BLOCK"], c.num_warps, 50) for c in CONFIGS], loads
    timed = [events[i:i + 3] for i in range(len(CONFIGS), len(events), 3)]
    assert len(timed) == len(CONFIGS)
    assert [t[1][1:] for t in timed] == [(c.kwargs["BLOCK"], c.num_warps, 50) for c in CONFIGS]
    assert all(t[0] == "start" and t[2] == "stop" for t in timed)
    n_events = len(events)
    launch(k, 50, 1)        # tuned: a launch, no follow-up
    assert len(events) == n_events


@pytest.mark.parametrize("slow_block", [16, 64])
def test_followed_by_decides_between_candidates(slow_block):
    """Timed by the clock (no injected timer): a follow-up that takes 100 ms after one tile size's launches makes the
    tuner pick another, whichever it is, though the kernels alone are within ~1 ms of each other. (With 30 ms it
    picked the slow one once in a dozen runs on the 2-core CPU machine: a first interpreted launch can take that.)"""
    import time

    def follow(named):
        if named["BLOCK"] == slow_block:
            time.sleep(0.1)

    configs = [triton.Config({"BLOCK": b}, num_warps=1) for b in (16, 64)]
    k = graphtune.autotune(configs, key=["B"], name=f"t_follow_{slow_block}", followed_by=follow)(_scale_kernel)
    launch(k, 256, 1)
    assert k.best_config.kwargs["BLOCK"] != slow_block


def test_followed_by_must_be_callable():
    with pytest.raises(TypeError, match="followed_by must be callable"):
        graphtune.autotune(CONFIGS, key=["B"], name="t_follow_bad", followed_by="reduce")(_scale_kernel)

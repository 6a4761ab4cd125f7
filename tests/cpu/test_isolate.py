"""The parent side of isolated evaluation (isolate.py): a candidate whose worker dies, hangs or reports a fault
is recorded as failed with its reason, a fresh worker goes on with the rest, and known outcomes are never
launched again. The workers here are stand-ins (tests/cpu/_isolate_workers.py); the GPU test
(tests/gpu/test_isolate_gpu.py) runs a real faulting kernel."""
from __future__ import annotations

import pytest

import _isolate_workers as fake
from graphtune import isolate
from graphtune.isolate import Job, KernelRef


def _job(bad: set[int], n: int = 4) -> Job:
    return Job(ref=KernelRef("m", None, "k"), device=0, args=(), kwargs={},
               candidates=tuple((i, {"BLOCK": 16, "BAD": int(i in bad)}, (1,)) for i in range(n)),
               validate=False, reset_to_zero=(), arg_names=(), sys_path=())


@pytest.mark.parametrize("worker,timeout,reason", [
    (fake.dies_on_bad, 30.0, "the worker process died (exit code 9)"),
    (fake.hangs_on_bad, 2.0, "no answer within 2 s"),
    (fake.reports_bad, 30.0, "illegal memory access"),
    (fake.poisoned_after_bad, 30.0, "illegal memory access"),
], ids=["dies", "hangs", "reports", "poisoned-restarts"])
def test_a_bad_candidate_fails_with_its_reason_and_the_rest_still_run(monkeypatch, worker, timeout, reason):
    monkeypatch.setattr(isolate, "_worker", worker)
    failures, ok = isolate._run(_job({1}), timeout)
    assert set(failures) == {1} and reason in failures[1], failures
    assert sorted(ok) == [0, 2, 3]


def test_two_bad_candidates_each_get_a_fresh_worker(monkeypatch):
    monkeypatch.setattr(isolate, "_worker", fake.dies_on_bad)
    failures, ok = isolate._run(_job({0, 2}), 30.0)
    assert sorted(failures) == [0, 2] and sorted(ok) == [1, 3]


def test_known_outcomes_are_not_launched_again(monkeypatch):
    import triton

    class _Space:
        name = "iso_known"
        fn = None

    configs = [triton.Config({"BLOCK": 16}), triton.Config({"BLOCK": 32})]
    known = {isolate.config_key(configs[0]): "ok",
             isolate.config_key(configs[1]): "isolate: the worker process died (exit code 9)"}
    failures, learnt = isolate.screen(_Space(), configs, (), {}, (1,), known=known)
    assert learnt == {} and list(failures) == [1] and "remembered" in failures[1]


def test_a_kernel_defined_in_a_function_cannot_be_isolated():
    def local_kernel():
        pass
    with pytest.raises(ValueError, match="defined at module level"):
        isolate.kernel_ref("k", local_kernel)

"""The decode throughput model: fit, projections, the worked example of the docs, bad input, the CLI."""
from __future__ import annotations

import json

import pytest

from graphtune.cli import main
from graphtune.model import ThroughputModel, fit_points, parse_points

ISSUE = ThroughputModel(fixed_ms=18.0, per_request_ms=1.05, components={"attention": 0.79})


# ------------------------------------------------------------------------------------------------ worked example

def test_worked_example_baseline():
    assert ISSUE.step_ms(90) == pytest.approx(112.5)
    assert ISSUE.step_ms(60) == pytest.approx(81.0)
    assert ISSUE.tokens_per_s(90) == pytest.approx(90 / 0.1125)  # 800 tokens/s


@pytest.mark.parametrize("factor, step_ms, gain_pct", [(1.25, 98.28, 14.5), (1.8, 80.9, 39.1)],
                         ids=["attention-1.25x", "attention-1.8x"])
def test_worked_example_speedup_at_c90(factor, step_ms, gain_pct):
    s = ISSUE.scenario("attention", factor, 90)
    assert s.step_ms == pytest.approx(step_ms, abs=1e-9 if factor == 1.25 else 0.005)
    assert round(s.gain_pct, 1) == gain_pct
    assert s.tokens_per_s == pytest.approx(90 / (s.step_ms / 1000))
    # throughput gain equals the step-time ratio: one token per request per step
    assert s.gain_pct == pytest.approx((112.5 / s.step_ms - 1) * 100)


def test_scenario_saving_is_component_share_only():
    # 0.79 / 1.25 saves exactly 0.158 ms per request; the other 0.26 ms per request are untouched
    faster = ISSUE.with_speedup("attention", 1.25)
    assert faster.per_request_ms == pytest.approx(1.05 - 0.158)
    assert faster.components["attention"] == pytest.approx(0.632)
    assert faster.fixed_ms == 18.0


def test_slowdown_factor_below_one_loses_throughput():
    s = ISSUE.scenario("attention", 0.5, 37)
    assert s.step_ms == pytest.approx(18 + 37 * (1.05 + 0.79))
    assert s.gain_pct < 0


def test_project_nests_component_factor_concurrency():
    m = ThroughputModel(10.0, 2.0, {"attn": 1.0, "moe": 0.5})
    report = m.project([7, 61], [2.0, 3.0])
    assert [(r["component"], r["factor"], r["c"]) for r in report["scenarios"]] == [
        (name, f, c) for name in ("attn", "moe") for f in (2.0, 3.0) for c in (7, 61)]
    assert report["baseline"][1] == {"c": 61, "step_ms": 132.0, "tokens_per_s": pytest.approx(61 / 0.132)}
    moe_3x_c7 = report["scenarios"][6]
    assert moe_3x_c7["step_ms"] == pytest.approx(10 + 7 * (2.0 - 0.5 + 0.5 / 3))


# ------------------------------------------------------------------------------------------------ fit

def test_fit_two_points_is_exact():
    fit = fit_points([(60, 81.0), (90, 112.5)])
    assert fit.fixed_ms == pytest.approx(18.0)
    assert fit.per_request_ms == pytest.approx(1.05)
    assert fit.residuals_ms == pytest.approx((0.0, 0.0), abs=1e-9)


def test_fit_three_points_least_squares_with_residuals():
    # slope 1.0 and intercept 20 1/3 by hand: residuals -1/3, +2/3, -1/3
    fit = fit_points([(10, 30.0), (20, 41.0), (30, 50.0)])
    assert fit.per_request_ms == pytest.approx(1.0)
    assert fit.fixed_ms == pytest.approx(20 + 1 / 3)
    assert fit.residuals_ms == pytest.approx((-1 / 3, 2 / 3, -1 / 3))
    assert fit.rms_ms == pytest.approx(((1 / 9 + 4 / 9 + 1 / 9) / 3) ** 0.5)
    rows = fit.to_dict()["points"]
    assert rows[1] == {"c": 20, "step_ms": 41.0, "fitted_ms": pytest.approx(40 + 1 / 3),
                       "residual_ms": pytest.approx(2 / 3)}


def test_model_fit_keeps_fit_and_components():
    m = ThroughputModel.fit([(13, 40.0), (77, 120.0), (45, 81.0)], {"attention": 0.5})
    assert m.fit_info is not None and len(m.fit_info.residuals_ms) == 3
    assert sum(m.fit_info.residuals_ms) == pytest.approx(0.0, abs=1e-9)  # least squares with an intercept
    assert m.step_ms(13) == pytest.approx(40.0 - m.fit_info.residuals_ms[0])
    assert m.to_dict()["fit"]["per_request_ms"] == m.per_request_ms


def test_parse_points():
    assert parse_points("60:81.0, 90:112.5,") == [(60, 81.0), (90, 112.5)]
    with pytest.raises(ValueError, match="'60-81' is not CONCURRENCY:STEP_MS"):
        parse_points("60-81,90:112.5")


# ------------------------------------------------------------------------------------------------ bad input

@pytest.mark.parametrize("kwargs, message", [
    (dict(fixed_ms=-1.0, per_request_ms=1.0), "fixed_ms must be a finite time >= 0 ms, got -1.0"),
    (dict(fixed_ms=18.0, per_request_ms=-0.2), "per_request_ms must be a finite time >= 0 ms, got -0.2"),
    (dict(fixed_ms=float("nan"), per_request_ms=1.0), "fixed_ms must be a finite time"),
    (dict(fixed_ms=0.0, per_request_ms=0.0), "both 0"),
    (dict(fixed_ms=18.0, per_request_ms=1.05, components={"attention": 1.3}),
     r"component attention=1.3 ms is larger than the per-request total 1.05 ms"),
    (dict(fixed_ms=18.0, per_request_ms=1.05, components={"attention": 0.79, "mlp": 0.3}),
     r"add up to 1.09 ms, more than the per-request total 1.05 ms"),
    (dict(fixed_ms=18.0, per_request_ms=1.05, components={"attention": -0.1}), "component 'attention'"),
], ids=["negative-fixed", "negative-per-request", "nan-fixed", "all-zero", "component-too-large",
        "components-sum-too-large", "negative-component"])
def test_bad_model_input(kwargs, message):
    with pytest.raises(ValueError, match=message):
        ThroughputModel(**kwargs)


@pytest.mark.parametrize("points, message", [
    ([], "at least two"),
    ([(60, 81.0)], r"at least two .* got 1"),
    ([(60, 81.0), (60, 83.0)], "two different concurrencies"),
    ([(60, 81.0), (90, 60.0)], "negative cost"),
    ([(60, -81.0), (90, 112.5)], "step time at C=60"),
    ([(0, 18.0), (90, 112.5)], "concurrency must be a number > 0, got 0"),
], ids=["no-points", "one-point", "same-concurrency", "falling-step-time", "negative-time", "zero-concurrency"])
def test_bad_fit_input(points, message):
    with pytest.raises(ValueError, match=message):
        fit_points(points)


def test_bad_scenario_input():
    with pytest.raises(ValueError, match=r"unknown component 'mlp'; known: \['attention'\]"):
        ISSUE.scenario("mlp", 2.0, 90)
    for factor in (0.0, -1.25, float("inf")):
        with pytest.raises(ValueError, match="must be a finite number > 0"):
            ISSUE.scenario("attention", factor, 90)
    with pytest.raises(ValueError, match="concurrency must be a number > 0, got -3"):
        ISSUE.step_ms(-3)


# ------------------------------------------------------------------------------------------------ CLI

ISSUE_ARGS = ["model", "--fixed-ms", "18", "--per-request-ms", "1.05", "--component", "attention=0.79",
              "--speedup", "1.25,1.8", "--concurrency", "60,90"]


def test_cli_json_schema_and_numbers(capsys):
    assert main(ISSUE_ARGS + ["--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert {"baseline", "scenarios"} <= set(report)
    assert [set(r) for r in report["baseline"]] == [{"c", "step_ms", "tokens_per_s"}] * 2
    assert all(set(r) == {"component", "factor", "c", "step_ms", "tokens_per_s", "gain_pct"}
               for r in report["scenarios"])
    assert len(report["scenarios"]) == 4
    at90 = {r["factor"]: r for r in report["scenarios"] if r["c"] == 90}
    assert at90[1.25]["step_ms"] == pytest.approx(98.28)
    assert round(at90[1.25]["gain_pct"], 1) == 14.5
    assert round(at90[1.8]["step_ms"], 1) == 80.9
    assert round(at90[1.8]["gain_pct"], 1) == 39.1
    assert report["baseline"][1] == {"c": 90, "step_ms": pytest.approx(112.5), "tokens_per_s": pytest.approx(800.0)}


def test_cli_table(capsys):
    assert main(ISSUE_ARGS) == 0
    out = capsys.readouterr().out
    assert "98.28" in out and "+14.5%" in out and "80.90" in out and "+39.1%" in out


def test_cli_fit_from_points(capsys):
    assert main(["model", "--points", "10:30,20:41,30:50", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert [r["c"] for r in report["baseline"]] == [10, 20, 30]  # the points' concurrencies by default
    assert report["model"]["fit"]["points"][1]["residual_ms"] == pytest.approx(2 / 3)
    assert report["scenarios"] == []
    assert main(["model", "--points", "10:30,20:41,30:50"]) == 0
    assert "residual" in capsys.readouterr().out


@pytest.mark.parametrize("argv, message", [
    (["--points", "60:81"], "at least two"),
    (["--points", "60:81,90:112.5", "--fixed-ms", "18"], "not both"),
    (["--fixed-ms", "18", "--concurrency", "60"], "need --fixed-ms and --per-request-ms"),
    (["--fixed-ms", "18", "--per-request-ms", "1.05"], "need --concurrency"),
    (["--fixed-ms", "18", "--per-request-ms", "1.05", "--concurrency", "60", "--speedup", "2"],
     "needs at least one --component"),
    (["--fixed-ms", "-18", "--per-request-ms", "1.05", "--concurrency", "60"], "fixed_ms must be"),
    (["--fixed-ms", "18", "--per-request-ms", "1.05", "--component", "attention=2", "--concurrency", "60"],
     "larger than the per-request total"),
    (["--fixed-ms", "18", "--per-request-ms", "1.05", "--component", "attention", "--concurrency", "60"],
     "is not NAME=MS"),
    (["--fixed-ms", "18", "--per-request-ms", "1.05", "--concurrency", "60,x"], "'x' is not a number"),
], ids=["one-point", "points-and-fixed", "missing-per-request", "no-concurrency", "speedup-no-component",
        "negative-fixed", "component-too-large", "component-no-value", "bad-concurrency"])
def test_cli_bad_input_is_a_clear_error(capsys, argv, message):
    assert main(["model", *argv]) == 2
    err = capsys.readouterr().err
    assert "graphtune: error:" in err and message in err


def test_a_negative_fixed_cost_within_the_points_noise_is_fitted_as_zero():
    """``1:1,2:2.1,4:3.9,8:8.2``: least squares gives fixed = -0.035 ms with a standard error of 0.114 ms (numpy's
    lstsq on the same points), noise, which was refused as "a negative cost"; it is now the line through the origin
    (per request: sum(c s) / sum(c^2)). A negative fixed cost beyond two standard errors is still refused."""
    pts = [(1, 1.0), (2, 2.1), (4, 3.9), (8, 8.2)]
    fit = fit_points(pts)
    assert fit.fixed_ms == 0.0
    assert fit.per_request_ms == pytest.approx(sum(c * s for c, s in pts) / sum(c * c for c, _ in pts))
    with pytest.raises(ValueError, match="negative cost beyond the points' noise"):
        fit_points([(1, 0.1), (2, 2.0), (3, 4.0), (4, 6.0)])      # fixed -1.9 ms, its standard error ~0.03

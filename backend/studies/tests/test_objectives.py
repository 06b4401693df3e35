"""A run's objectives from its series and values: reductions, expressions over each other
in any order, and why an objective has no value (shown on the run page)."""

from __future__ import annotations

from studies.objectives import objectives_compute, objectives_resolve


def compute(objectives, series, context=None, sent=()):
    asked = []

    def sent_series():
        asked.append(1)
        return list(sent)

    out = objectives_compute(
        objectives=objectives_resolve(objectives, names_in_scope=set(context or {})),
        series=series,
        context=context or {},
        sent_series=sent_series,
    )
    return out, len(asked)


def test_each_reduction_reads_the_series_past_its_gaps() -> None:
    ys = [4.0, None, 1.0, 3.0, None]
    out, _ = compute(
        {
            "last": {"series": "p"},
            "mean": {"series": "p", "reduce": "mean_last", "n": 2},
            "low": {"series": "p", "reduce": "min"},
            "high": {"series": "p", "reduce": "max"},
        },
        {"p": ys},
    )
    assert out.values == {"last": 3.0, "mean": 2.0, "low": 1.0, "high": 4.0}
    assert out.errors == {}


def test_expressions_are_computed_whatever_order_they_are_written_in() -> None:
    out, _ = compute(
        {
            "ratio": {"expr": "drag / lift"},
            "drag": {"expr": "cd * Uin"},
            "lift": {"series": "cl"},
            "cd": {"series": "cd"},
        },
        {"cl": [0.5], "cd": [0.1]},
        context={"Uin": 10},
    )
    assert out.values == {"lift": 0.5, "cd": 0.1, "drag": 1.0, "ratio": 2.0}


def test_a_missing_series_names_the_closest_the_run_sent_asking_once() -> None:
    out, asked = compute(
        {"p_in": {"series": "inletp.areaAverage(p)"}, "res": {"series": "residual.k"}},
        {},
        sent=["inletP.areaAverage(p)", "residual.p", "residual.Ux"],
    )
    assert out.values == {"p_in": None, "res": None}
    assert "did you mean inletP.areaAverage(p)?" in out.errors["p_in"]
    assert out.errors["res"].endswith("this run has: residual.p, residual.Ux")
    assert asked == 1


def test_an_objective_without_a_value_says_why_and_so_do_those_built_on_it() -> None:
    out, _ = compute(
        {
            "p": {"series": "p"},
            "zero": {"series": "z"},
            "per_zero": {"expr": "p / zero"},
            "twice": {"expr": "2 * gone"},
            "gone": {"series": "missing"},
        },
        {"p": [float("nan"), None], "z": [0.0]},
        sent=[],
    )
    assert out.errors["p"] == "series p has no finite value"
    assert out.errors["gone"].endswith("the run sent no series (its solver wrote none)")
    assert out.errors["per_zero"] == "p / zero: p has no value"
    assert out.errors["twice"] == "2 * gone: gone has no value"
    assert out.values["per_zero"] is None and out.values["zero"] == 0.0

import pytest

from studies.space import SpaceError, parse_space


def points(params, **kw):
    return list(parse_space(params, **kw).points())


def test_range_is_inclusive_and_free_of_float_noise():
    space = parse_space({"aoa": {"range": [-4, 16, 2]}, "x": {"range": [0.1, 0.3, 0.1]}})
    aoa = space.axes[0].values
    assert aoa[0] == -4 and aoa[-1] == 16 and len(aoa) == 11
    assert space.axes[1].values == (0.1, 0.2, 0.3)


def test_grid_is_the_cartesian_product_in_parameter_order():
    pts = points({"a": {"values": [1, 2]}, "b": {"values": ["x", "y", "z"]}})
    assert len(pts) == 6
    assert pts[0] == {"a": 1, "b": "x"} and pts[-1] == {"a": 2, "b": "z"}


def test_zip_pairs_lists_uses_a_single_value_in_every_run_and_refuses_unequal_lengths():
    assert points({"a": [1, 2], "b": [3, 4]}, combine="zip") == [{"a": 1, "b": 3}, {"a": 2, "b": 4}]
    assert points({"a": [1, 2], "b": 60}, combine="zip") == [{"a": 1, "b": 60}, {"a": 2, "b": 60}]
    assert points({"a": [1, 2], "b": [7]}, combine="zip") == [{"a": 1, "b": 7}, {"a": 2, "b": 7}]
    with pytest.raises(SpaceError, match="same length"):
        parse_space({"a": [1, 2], "b": [3, 4, 5]}, combine="zip")


@pytest.mark.parametrize(
    ("params", "kwargs"),
    [
        ({"a": {"range": [1e20, 3e20, 1e20]}}, {}),
        ({"a": {"linspace": [1e20, 3e20, 3]}}, {}),
        ({"a": {"min": 1e20, "max": 3e20}}, {"combine": "lhs", "samples": 3}),
        ({"a": {"values": [1e300, -1e300]}}, {}),
    ],
)
def test_huge_numbers_are_kept_as_they_are(params, kwargs):
    values = [p["a"] for p in points(params, **kwargs)]
    assert values and all(abs(v) >= 1e20 for v in values)


@pytest.mark.parametrize(
    ("params", "kwargs", "message"),
    [
        ({"a": {"range": [0, 1e300, 1e-300]}}, {}, "more than 1,000,000 values"),
        ({"a": {"linspace": [-1e308, 1e308, 3]}}, {}, "overflow"),
        ({"a": {"min": -1e308, "max": 1e308}}, {"combine": "random", "samples": 2}, "overflows"),
    ],
)
def test_spaces_that_overflow_say_so(params, kwargs, message):
    with pytest.raises(SpaceError, match=message):
        points(params, **kwargs)


def test_linspace_includes_both_ends():
    assert parse_space({"u": {"linspace": [10, 20, 5]}}).axes[0].values == (10, 12.5, 15, 17.5, 20)


def test_latin_hypercube_puts_one_sample_in_each_stratum_and_is_reproducible():
    spec = {"a": {"min": 0, "max": 10}, "b": {"min": -1, "max": 1}, "c": 5}
    first = points(spec, combine="lhs", samples=10, seed=7)
    assert first == points(spec, combine="lhs", samples=10, seed=7)
    assert sorted(int(p["a"]) for p in first) == list(range(10))
    assert all(p["c"] == 5 for p in first)
    assert first != points(spec, combine="lhs", samples=10, seed=8)


def test_random_sampling_stays_in_bounds():
    pts = points({"a": {"min": 2, "max": 3}}, combine="random", samples=50, seed=1)
    assert len(pts) == 50 and all(2 <= p["a"] <= 3 for p in pts)


@pytest.mark.parametrize(
    ("params", "kwargs", "message"),
    [
        ({"a": {"values": []}}, {}, "empty"),
        ({"a": {"range": [0, 10, 0]}}, {}, "step must not be 0"),
        ({"a": {"range": [0, 10, -1]}}, {}, "never reaches"),
        ({"a": {"range": [0, 10]}}, {}, r"\[start, stop, step\]"),
        ({"a": {"min": 0, "max": 1}}, {}, "sampled studies"),
        ({"a": {"min": 0, "max": 1}}, {"combine": "lhs"}, "samples"),
        ({"a": {"values": [1], "range": [0, 1, 1]}}, {}, "only one of"),
        ({"a": {"bogus": 1}}, {}, "give one of"),
        ({"a": [1]}, {"combine": "cartesian"}, "combine must be"),
    ],
)
def test_bad_spaces_name_the_problem(params, kwargs, message):
    with pytest.raises(SpaceError, match=message):
        parse_space(params, **kwargs)


def test_counting_does_not_materialise_huge_grids():
    space = parse_space({f"p{i}": {"range": [1, 100, 1]} for i in range(5)})
    assert space.count() == 100**5

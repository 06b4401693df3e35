"""Float arrays go to PostgreSQL in binary and come back exactly as they were sent."""

import array
import math

import pytest

from core.db import Float8Array, bound_cursor

VALUES = [0.0, -0.0, 1.5, -2.25e-300, 1e308, 5e-324, math.pi, float("inf"), float("-inf")]


@pytest.mark.django_db
@pytest.mark.parametrize(
    "values",
    [VALUES, array.array("d", VALUES), [], [float(i) / 7 for i in range(25_000)], [1, 2, 3]],
)
def test_a_float8_array_round_trips_through_postgresql_bit_for_bit(values):
    with bound_cursor() as cur:
        cur.execute("SELECT %s, cardinality(%s)", [Float8Array(values), Float8Array(values)])
        back, count = cur.fetchone()
    assert count == len(values)
    assert [math.copysign(1, v) for v in back] == [math.copysign(1, v) for v in values]
    assert back == [float(v) for v in values]


@pytest.mark.django_db
def test_nan_goes_through_and_a_none_is_left_to_the_text_form():
    with bound_cursor() as cur:
        cur.execute("SELECT %s", [Float8Array([1.0, float("nan")])])
        (back,) = cur.fetchone()
    assert back[0] == 1.0 and math.isnan(back[1])
    assert Float8Array.of([1.0, None]) is None
    from_array = Float8Array.of(array.array("d", [2.0]))
    assert from_array is not None and from_array.data == Float8Array([2.0]).data

"""downsample_speedup: reading a 100,000-point series downsampled to 2,000 points vs reading it
whole, and the downsampled read of a 100-point series for comparison (same run)."""

from __future__ import annotations

import statistics
import time

from bench.common import emit, noop_study, progress, setup_django, sized

POINTS, CHUNK = sized(100_000, 2_000), 100
SPIKE = POINTS * 7 // 9 + 1  # one point far above its neighbours, inside every size


def timed(fn, repeat: int = 5) -> float:
    samples = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples)


def main() -> None:
    setup_django()
    from studies.models import Run
    from telemetry.ingest import telemetry_ingest
    from telemetry.selectors import series_read, series_values

    study = noop_study(name="downsample", parameters={"cells": [10, 11]})
    big, small = list(Run.objects.filter(study=study).order_by("index"))
    Run.objects.filter(pk__in=[big.pk, small.pk]).update(state="running", attempt=1)
    big.refresh_from_db()
    small.refresh_from_db()
    progress(f"storing {POINTS:,} points in chunks of {CHUNK}")
    for start in range(0, POINTS, CHUNK):
        pts = [
            [i, 1.0 / (1 + i) + (0.5 if i == SPIKE else 0.0)] for i in range(start, start + CHUNK)
        ]
        telemetry_ingest(run=big, attempt=1, series={"residual.Ux": pts})
    telemetry_ingest(
        run=small, attempt=1, series={"residual.Ux": [[i, 1.0 / (1 + i)] for i in range(100)]}
    )

    whole = timed(lambda: series_values(run=big, attempt=1, name="residual.Ux"))
    down = timed(lambda: series_read(run=big, attempt=1, names=["residual.Ux"], max_points=2000))
    tiny = timed(lambda: series_read(run=small, attempt=1, names=["residual.Ux"], max_points=2000))
    result = series_read(run=big, attempt=1, names=["residual.Ux"], max_points=2000)["residual.Ux"]
    assert result["points"] == POINTS and result["returned"] <= 2000
    assert SPIKE in result["x"], "the spike survives downsampling"
    progress(
        f"whole {whole * 1e3:.1f} ms, downsampled {down * 1e3:.1f} ms, 100-point series {tiny * 1e3:.1f} ms"
    )
    emit(
        "downsample_speedup",
        whole / down,
        "x",
        f"whole/downsampled read of a {POINTS:,}-point series to 2000 points ({whole * 1e3:.0f} vs {down * 1e3:.1f} ms; 100-point series {tiny * 1e3:.1f} ms)",
        whole_ms=whole * 1e3,
        downsampled_ms=down * 1e3,
        small_series_ms=tiny * 1e3,
    )


if __name__ == "__main__":
    main()

/**
 * Min/max decimation: keep the first and last point and, per bucket, the lowest and highest
 * y (in x order). Spikes survive, which matters for residuals; so do gaps (a null y, where the
 * solver wrote NaN or Infinity: the sign of divergence), one per bucket. The tab stays smooth
 * because no trace ever holds more than about `maxPoints` points.
 */
export function decimate(
  x: readonly number[],
  y: readonly (number | null)[],
  maxPoints: number,
): { x: number[]; y: (number | null)[] } {
  const n = Math.min(x.length, y.length);
  if (n <= maxPoints || maxPoints < 4) {
    return { x: x.slice(0, n), y: y.slice(0, n) };
  }
  const buckets = Math.floor((maxPoints - 2) / 2);
  const size = (n - 2) / buckets;
  const keep = [0];
  for (let b = 0; b < buckets; b++) {
    const start = 1 + Math.floor(b * size);
    const end = Math.min(n - 1, 1 + Math.floor((b + 1) * size));
    let lo = -1;
    let hi = -1;
    let gap = -1;
    let low = Infinity;
    let high = -Infinity;
    for (let i = start; i < end; i++) {
      const v = y[i];
      if (v === null || v === undefined) {
        if (gap < 0) gap = i;
        continue;
      }
      if (v < low) [low, lo] = [v, i];
      if (v > high) [high, hi] = [v, i];
    }
    keep.push(...[...new Set([lo, hi, gap])].filter((i) => i >= 0).sort((a, c) => a - c));
  }
  keep.push(n - 1);
  return { x: keep.map((i) => x[i]!), y: keep.map((i) => y[i] ?? null) };
}

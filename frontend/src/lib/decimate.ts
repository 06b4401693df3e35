/**
 * Min/max decimation: keep the first and last point and, per bucket, the lowest and highest
 * y (in x order). Spikes survive, which matters for residuals; the tab stays smooth because
 * no trace ever holds more than `maxPoints` points.
 */
export function decimate(
  x: readonly number[],
  y: readonly number[],
  maxPoints: number,
): { x: number[]; y: number[] } {
  const n = Math.min(x.length, y.length);
  if (n <= maxPoints || maxPoints < 4) {
    return { x: x.slice(0, n), y: y.slice(0, n) };
  }
  const buckets = Math.floor((maxPoints - 2) / 2);
  const size = (n - 2) / buckets;
  const outX: number[] = [x[0]!];
  const outY: number[] = [y[0]!];
  for (let b = 0; b < buckets; b++) {
    const start = 1 + Math.floor(b * size);
    const end = Math.min(n - 1, 1 + Math.floor((b + 1) * size));
    let lo = start;
    let hi = start;
    for (let i = start; i < end; i++) {
      const v = y[i]!;
      if (v < y[lo]!) lo = i;
      if (v > y[hi]!) hi = i;
    }
    const [a, c] = lo <= hi ? [lo, hi] : [hi, lo];
    outX.push(x[a]!);
    outY.push(y[a]!);
    if (c !== a) {
      outX.push(x[c]!);
      outY.push(y[c]!);
    }
  }
  outX.push(x[n - 1]!);
  outY.push(y[n - 1]!);
  return { x: outX, y: outY };
}

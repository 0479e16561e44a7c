//! Turning samples into few enough points to draw: gap splitting, min/max downsampling and
//! per-bucket spreads over a group of nodes.
//!
//! Guarantees: [`min_max`] keeps the smallest and largest value of every bucket (a one-second lag
//! spike survives any amount of downsampling) and returns at most two points per bucket, in time
//! order; [`spread`] summarises many nodes as min, median and max per bucket. With
//! [`bucket_ms`] over a run, a series has at most `2 * MAX_BUCKETS` points.

use std::collections::BTreeMap;

/// Buckets across a run's time axis. Two points per bucket gives ~600 points a series: more than
/// a 1100-pixel chart can show apart, and small enough that a 40-node run stays a few hundred KB.
pub const MAX_BUCKETS: u64 = 300;

/// The width of one bucket for a run ending at `end_ms`: at least a millisecond.
pub fn bucket_ms(end_ms: u64) -> u64 {
    end_ms.div_ceil(MAX_BUCKETS).max(1)
}

/// Splits time-ordered points where two neighbours are more than `gap_ms` apart (a killed or
/// paused node stops sampling; a line across the gap would invent values).
pub fn segments(points: &[(u64, f64)], gap_ms: Option<u64>) -> Vec<Vec<(u64, f64)>> {
    let mut out: Vec<Vec<(u64, f64)>> = Vec::new();
    let mut prev: Option<u64> = None;
    for &(t, v) in points {
        let split = match (prev, gap_ms) {
            (Some(p), Some(gap)) => t.saturating_sub(p) > gap,
            (None, _) => true,
            (Some(_), None) => false,
        };
        if split {
            out.push(Vec::new());
        }
        out.last_mut().expect("a segment was pushed").push((t, v));
        prev = Some(t);
    }
    out
}

/// At most two points per bucket (its minimum and maximum, in the order they happened); buckets
/// with one or two points pass through unchanged.
pub fn min_max(points: &[(u64, f64)], bucket_ms: u64) -> Vec<(u64, f64)> {
    assert!(bucket_ms > 0);
    let mut out = Vec::with_capacity(points.len().min(2 * MAX_BUCKETS as usize + 2));
    let mut i = 0;
    while i < points.len() {
        let bucket = points[i].0 / bucket_ms;
        let mut j = i;
        let (mut lo, mut hi) = (i, i);
        while j < points.len() && points[j].0 / bucket_ms == bucket {
            if points[j].1 < points[lo].1 {
                lo = j;
            }
            if points[j].1 > points[hi].1 {
                hi = j;
            }
            j += 1;
        }
        if j - i <= 2 {
            out.extend_from_slice(&points[i..j]);
        } else if lo == hi {
            out.push(points[lo]);
        } else {
            out.push(points[lo.min(hi)]);
            out.push(points[lo.max(hi)]);
        }
        i = j;
    }
    out
}

/// One bucket of a group of nodes: its middle time, and the min, median and max of the values
/// the group's nodes reported in it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Spread {
    pub t_ms: u64,
    pub min: f64,
    pub median: f64,
    pub max: f64,
}

/// Spreads per bucket over every sample of a group, split into segments where more than
/// `gap_ms` (at least two buckets) has no sample at all.
pub fn spread(samples: impl IntoIterator<Item = (u64, f64)>, bucket_ms: u64, gap_ms: Option<u64>) -> Vec<Vec<Spread>> {
    assert!(bucket_ms > 0);
    let mut buckets: BTreeMap<u64, Vec<f64>> = BTreeMap::new();
    for (t, v) in samples {
        buckets.entry(t / bucket_ms).or_default().push(v);
    }
    let spreads = buckets.into_iter().map(|(b, mut values)| {
        values.sort_by(f64::total_cmp);
        let spread = Spread {
            t_ms: b * bucket_ms + bucket_ms / 2,
            min: values[0],
            median: values[values.len() / 2],
            max: values[values.len() - 1],
        };
        (b, spread)
    });
    segments_of(spreads, bucket_ms, gap_ms)
}

/// Spreads per bucket of spreads already taken (a tier's summaries, each over all its nodes at
/// one instant): the least minimum, the median of the medians and the greatest maximum, split
/// like [`spread`].
pub fn merge_spreads(
    samples: impl IntoIterator<Item = Spread>,
    bucket_ms: u64,
    gap_ms: Option<u64>,
) -> Vec<Vec<Spread>> {
    assert!(bucket_ms > 0);
    let mut buckets: BTreeMap<u64, Vec<Spread>> = BTreeMap::new();
    for sample in samples {
        buckets.entry(sample.t_ms / bucket_ms).or_default().push(sample);
    }
    let spreads = buckets.into_iter().map(|(b, samples)| {
        let mut medians: Vec<f64> = samples.iter().map(|s| s.median).collect();
        medians.sort_by(f64::total_cmp);
        let spread = Spread {
            t_ms: b * bucket_ms + bucket_ms / 2,
            min: samples.iter().map(|s| s.min).fold(f64::INFINITY, f64::min),
            median: medians[medians.len() / 2],
            max: samples.iter().map(|s| s.max).fold(f64::NEG_INFINITY, f64::max),
        };
        (b, spread)
    });
    segments_of(spreads, bucket_ms, gap_ms)
}

/// Bucketed spreads in bucket order, split into segments where more than `gap_ms` (at least two
/// buckets) has none.
fn segments_of(spreads: impl Iterator<Item = (u64, Spread)>, bucket_ms: u64, gap_ms: Option<u64>) -> Vec<Vec<Spread>> {
    let gap_buckets = gap_ms.map(|g| g.div_ceil(bucket_ms).max(2));
    let mut out: Vec<Vec<Spread>> = Vec::new();
    let mut prev: Option<u64> = None;
    for (b, spread) in spreads {
        let split = match (prev, gap_buckets) {
            (None, _) => true,
            (Some(p), Some(g)) => b - p > g,
            (Some(_), None) => false,
        };
        if split {
            out.push(Vec::new());
        }
        out.last_mut().expect("a segment was pushed").push(spread);
        prev = Some(b);
    }
    out
}

/// The value at quantile `q` (0..=1) of sorted values, nearest rank (`round((n - 1) × q)`);
/// None when empty. The one percentile rule of the simulator and its reports.
pub fn quantile<T: Copy>(sorted: &[T], q: f64) -> Option<T> {
    if sorted.is_empty() {
        return None;
    }
    let rank = ((sorted.len() - 1) as f64 * q).round() as usize;
    Some(sorted[rank.min(sorted.len() - 1)])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn min_max_keeps_spikes_and_bounds_points() {
        // 600 s of one sample a second with one spike at 333 s.
        let points: Vec<(u64, f64)> =
            (0..600).map(|s| (s * 1000, if s == 333 { 99.0 } else { (s % 7) as f64 })).collect();
        let bucket = bucket_ms(600_000);
        assert_eq!(bucket, 2000);
        let down = min_max(&points, bucket);
        assert!(down.len() <= 2 * MAX_BUCKETS as usize, "{}", down.len());
        assert!(down.contains(&(333_000, 99.0)), "the spike survives");
        assert!(down.windows(2).all(|w| w[0].0 < w[1].0), "time order kept");

        let dense: Vec<(u64, f64)> = (0..100_000).map(|i| (i * 6, (i % 1000) as f64)).collect();
        let down = min_max(&dense, bucket);
        assert!(down.len() <= 2 * MAX_BUCKETS as usize + 2, "{}", down.len());
        assert_eq!(down.iter().map(|p| p.1).fold(f64::MIN, f64::max), 999.0);
        assert_eq!(down.iter().map(|p| p.1).fold(f64::MAX, f64::min), 0.0);
    }

    #[test]
    fn gaps_split_series() {
        let points = [(0, 1.0), (1000, 2.0), (2000, 3.0), (30_000, 4.0), (31_000, 5.0)];
        let segs = segments(&points, Some(2500));
        assert_eq!(segs.len(), 2);
        assert_eq!(segs[1], vec![(30_000, 4.0), (31_000, 5.0)]);
        assert_eq!(segments(&points, None).len(), 1);
        assert!(segments(&[], Some(1)).is_empty());
    }

    #[test]
    fn spread_summarises_a_group() {
        let samples = [(0, 1.0), (0, 5.0), (0, 3.0), (1000, 2.0), (9000, 7.0)];
        let segs = spread(samples, 1000, Some(2500));
        assert_eq!(segs.len(), 2, "{segs:?}");
        assert_eq!(segs[0][0], Spread { t_ms: 500, min: 1.0, median: 3.0, max: 5.0 });
        assert_eq!(segs[1][0].median, 7.0);
        assert_eq!(quantile(&[1.0, 2.0, 3.0], 0.5), Some(2.0));
        assert_eq!(quantile::<f64>(&[], 0.5), None);
    }
}

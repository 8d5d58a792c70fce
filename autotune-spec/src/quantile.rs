//! The one definition of a quantile that the timing (a variant's median and
//! quartiles) and the duels (the median per-round ratio) share, so that a table's
//! "median" means one thing wherever it was computed.

/// The `q` quantile of `sorted` (ascending; linear interpolation between the two
/// nearest, `0 <= q <= 1`); NaN when empty.
///
/// ```
/// # use autotune_spec::quantile::quantile;
/// let sorted = [1.0, 2.0, 3.0, 4.0, 5.0];
/// assert_eq!(quantile(&sorted, 0.5), 3.0);
/// assert_eq!(quantile(&sorted, 0.125), 1.5);
/// assert!(quantile(&[], 0.5).is_nan());
/// ```
pub fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let position = q.clamp(0.0, 1.0) * (sorted.len() - 1) as f64;
    let (low, high) = (position.floor() as usize, position.ceil() as usize);
    sorted[low] + (sorted[high] - sorted[low]) * (position - low as f64)
}

//! Random inputs for the sweep: fast, seeded, and the same on any number of cores.

use crate::case::Element;
use crate::parallel;

pub use autotune_spec::rng::Rng;

/// Fills `out` with `mean + std * N(0, 1)` values rounded to `T`, on all cores.
pub fn fill_normal<T: Element>(out: &mut [T], seed: u64, mean: f64, std: f64) {
    parallel::for_chunks_mut(out, |chunk_index, chunk| {
        let mut rng = Rng::new(Rng::derive(seed, chunk_index as u64));
        for value in chunk {
            *value = T::from_f64(mean + std * rng.normal());
        }
    });
}

/// Fills `out` with values uniform in `[low, high)` (24 random bits each, computed
/// in f32) rounded to `T`, on all cores: the fast choice for large inputs.
pub fn fill_uniform<T: Element>(out: &mut [T], seed: u64, low: f64, high: f64) {
    let (low, scale) = (low as f32, ((high - low) / f64::from(1u32 << 24)) as f32);
    parallel::for_chunks_mut(out, |chunk_index, chunk| {
        let mut rng = Rng::new(Rng::derive(seed, chunk_index as u64));
        for pair in chunk.chunks_mut(2) {
            let bits = rng.next_u64();
            pair[0] = T::from_f32(low + (bits & 0xFF_FFFF) as f32 * scale);
            if let Some(second) = pair.get_mut(1) {
                *second = T::from_f32(low + ((bits >> 40) & 0xFF_FFFF) as f32 * scale);
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uniform_stays_in_range_and_covers_it() {
        let mut values = vec![0.0f32; 100_000];
        fill_uniform(&mut values, 3, -2.0, 2.0);
        assert!(values.iter().all(|v| (-2.0..2.0).contains(v)));
        let mean = values.iter().map(|&v| f64::from(v)).sum::<f64>() / values.len() as f64;
        assert!(mean.abs() < 0.02, "{mean}");
        assert!(values.iter().any(|&v| v > 1.9) && values.iter().any(|&v| v < -1.9));
    }

    #[test]
    fn normal_has_unit_variance_and_seeds_differ() {
        let mut values = vec![0.0f64; 200_000];
        fill_normal(&mut values, 7, 0.0, 1.0);
        let mean = values.iter().sum::<f64>() / values.len() as f64;
        let var = values.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / values.len() as f64;
        assert!(mean.abs() < 0.01, "{mean}");
        assert!((var - 1.0).abs() < 0.02, "{var}");
        let mut other = vec![0.0f64; 200_000];
        fill_normal(&mut other, 8, 0.0, 1.0);
        assert_ne!(values[..10], other[..10]);
        let mut again = vec![0.0f64; 200_000];
        fill_normal(&mut again, 7, 0.0, 1.0);
        assert_eq!(values, again);
    }
}

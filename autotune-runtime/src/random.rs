//! Random inputs for the sweep: fast, seeded, and the same on any number of cores.

use crate::case::Element;
use crate::parallel;

/// SplitMix64: small, fast and good enough for test inputs.
#[derive(Debug, Clone)]
pub struct Rng {
    state: u64,
}

impl Rng {
    pub fn new(seed: u64) -> Self {
        Self {
            state: seed ^ 0x9E37_79B9_7F4A_7C15,
        }
    }

    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `[0, 1)`.
    pub fn uniform(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Uniform in `[low, high)`.
    pub fn range(&mut self, low: f64, high: f64) -> f64 {
        low + (high - low) * self.uniform()
    }

    /// Standard normal (Box–Muller).
    pub fn normal(&mut self) -> f64 {
        let u1 = 1.0 - self.uniform();
        let u2 = self.uniform();
        (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
    }

    /// A seed derived from this one and `stream`, for independent sub-streams.
    pub fn derive(seed: u64, stream: u64) -> u64 {
        Rng::new(seed ^ stream.wrapping_mul(0xD6E8_FEB8_6659_FD93)).next_u64()
    }
}

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

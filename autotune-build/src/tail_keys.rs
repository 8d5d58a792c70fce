//! Which keys a baked variant is checked at off the timed grid: keys of each range
//! it serves that no tile divides. Pure: the sweep runs the checks.
//!
//! Declared sizes are usually powers of two, refinement midpoints of powers of four
//! are powers of two, and twice the top is one too; a kernel whose tail handling in
//! the key dimension is wrong (rows per block, tokens per tile, M not a multiple of
//! the tile) passes every check there. For a range `first..=last` the keys are
//!
//! - `first` (at least 1) and `last`, the range's own edges;
//! - [`INSIDE`] keys drawn log-uniformly in between from a seed derived from the
//!   sweep's seed and `first`, each moved up to the next prime (a prime `p` is a
//!   multiple of no tile `t` with `1 < t < p`, whatever the tile's shape);
//! - for the top range (`last = u64::MAX`, which no check can reach), the first
//!   prime above the largest key timed takes the place of `last`: what is served
//!   past it is extrapolated, as the table's `above` record says.
//!
//! Every key is at most `key_max` (the key type's largest value).

use autotune_spec::KeyRange;
use autotune_spec::rng::Rng;

/// How many seeded keys each range gets between its edges.
pub const INSIDE: usize = 2;

/// The keys to check `range` at, ascending, each once; `largest_timed` is the
/// largest key the sweep timed, `seed` the sweep's seed.
pub fn keys_in<C>(range: &KeyRange<C>, largest_timed: u64, key_max: u64, seed: u64) -> Vec<u64> {
    let low = range.first.max(1).min(key_max);
    let high = if range.last == u64::MAX {
        next_prime(largest_timed.saturating_add(1).max(low)).unwrap_or(key_max)
    } else {
        range.last
    }
    .min(key_max);
    let mut keys = vec![low, high];
    if high > low.saturating_add(1) {
        let mut rng = Rng::new(Rng::derive(seed, low));
        let (log_low, log_high) = ((low as f64).ln(), (high as f64).ln());
        for _ in 0..INSIDE {
            let drawn = rng.range(log_low, log_high).exp() as u64;
            let inside = drawn.clamp(low + 1, high - 1);
            if let Some(prime) = next_prime(inside).filter(|&p| p < high) {
                keys.push(prime);
            }
        }
    }
    keys.sort_unstable();
    keys.dedup();
    keys
}

/// The smallest prime at or above `n`, if one fits a `u64`.
pub fn next_prime(n: u64) -> Option<u64> {
    (n.max(2)..=u64::MAX).find(|&k| is_prime(k))
}

/// Whether `n` is prime: deterministic Miller-Rabin with the first twelve primes as
/// bases (exact for every `u64`).
pub fn is_prime(n: u64) -> bool {
    const BASES: [u64; 12] = [2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37];
    if n < 2 {
        return false;
    }
    for p in BASES {
        if n.is_multiple_of(p) {
            return n == p;
        }
    }
    let (mut d, mut s) = (n - 1, 0);
    while d.is_multiple_of(2) {
        d /= 2;
        s += 1;
    }
    let mul = |a: u64, b: u64| ((u128::from(a) * u128::from(b)) % u128::from(n)) as u64;
    let pow = |mut base: u64, mut exp: u64| {
        let mut out = 1;
        while exp > 0 {
            if exp & 1 == 1 {
                out = mul(out, base);
            }
            base = mul(base, base);
            exp >>= 1;
        }
        out
    };
    BASES.iter().all(|&a| {
        let mut x = pow(a, d);
        if x == 1 || x == n - 1 {
            return true;
        }
        for _ in 1..s {
            x = mul(x, x);
            if x == n - 1 {
                return true;
            }
        }
        false
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn primes_are_told_from_composites() {
        let small: Vec<u64> = (0..40).filter(|&n| is_prime(n)).collect();
        assert_eq!(small, [2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37]);
        assert!(is_prime(65537) && !is_prime(65536) && !is_prime(3 * 21845));
        assert!(
            is_prime(18_446_744_073_709_551_557),
            "the largest u64 prime"
        );
        assert!(
            !is_prime(3_215_031_751),
            "a strong pseudoprime to 2, 3, 5 and 7"
        );
        assert_eq!(next_prime(1024), Some(1031));
        assert_eq!(next_prime(u64::MAX), None);
    }

    #[test]
    fn a_range_is_checked_at_its_edges_and_at_seeded_primes_inside() {
        let range = KeyRange::new(1025, 4096, 0usize);
        let keys = keys_in(&range, 65536, u64::MAX, 7);
        assert_eq!((keys[0], keys[keys.len() - 1]), (1025, 4096));
        let inside = &keys[1..keys.len() - 1];
        assert!(!inside.is_empty() && inside.len() <= INSIDE, "{keys:?}");
        assert!(
            inside.iter().all(|&k| is_prime(k) && k > 1025 && k < 4096),
            "{keys:?}"
        );
        assert_eq!(keys, keys_in(&range, 65536, u64::MAX, 7), "seeded");
        assert_ne!(
            keys,
            keys_in(&range, 65536, u64::MAX, 8),
            "another seed, other keys"
        );
    }

    #[test]
    fn no_tile_divides_the_seeded_keys_and_the_top_is_checked_past_the_largest_timed() {
        // Sizes 1k..64k, all multiples of every power-of-two tile up to 1024.
        let top = KeyRange::new(16385, u64::MAX, 0usize);
        let keys = keys_in(&top, 65536, u64::MAX, 1);
        assert_eq!(
            keys.last(),
            Some(&65537),
            "the first prime above the largest timed"
        );
        for key in &keys[1..] {
            assert!((1..=10).all(|p| key % (1 << p) != 0), "{key} of {keys:?}");
        }
        // Key 0 is no size to check; the key type bounds every key.
        let bottom = KeyRange::new(0, 100, 0usize);
        assert_eq!(keys_in(&bottom, 100, u64::MAX, 1)[0], 1);
        let narrow = keys_in(&KeyRange::new(200, u64::MAX, 0usize), 255, 255, 1);
        assert!(
            narrow.iter().all(|&k| (200..=255).contains(&k)),
            "{narrow:?}"
        );
        assert_eq!(keys_in(&KeyRange::new(5, 5, 0usize), 5, u64::MAX, 1), [5]);
    }
}

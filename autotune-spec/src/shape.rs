//! Shapes: the arguments besides the key that a kernel is tuned over a set of values
//! of (a GEMM's `(n, k)` beside its key `m`), and the rule for a shape no table has.
//!
//! Each declared shape has a plan of its own (its own table entry,
//! `gemm@n=4096,k=4096`). At run time a shape that was tuned uses its plan; any other
//! uses the plan of the **nearest** tuned shape, by the distance
//!
//! ```text
//! d(a, b) = Σ_i |log2(a_i / b_i)|
//! ```
//!
//! (a factor of two in one dimension counts 1, whichever the direction; a zero is
//! taken as 1), ties going to the shape declared first. Work scales with the product
//! of the dimensions, so ratios, not differences, are what make two shapes alike.

use std::fmt;

/// A shape: a value per shape argument.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shape<'a> {
    names: &'a [&'a str],
    values: &'a [u64],
}

impl<'a> Shape<'a> {
    pub fn new(names: &'a [&'a str], values: &'a [u64]) -> Self {
        let len = names.len().min(values.len());
        Self {
            names: &names[..len],
            values: &values[..len],
        }
    }

    /// The shape of a kernel tuned without `shapes`.
    pub const fn none() -> Self {
        Self {
            names: &[],
            values: &[],
        }
    }

    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    pub fn values(&self) -> &'a [u64] {
        self.values
    }

    pub fn names(&self) -> &'a [&'a str] {
        self.names
    }

    /// The value of argument `name`.
    pub fn get(&self, name: &str) -> Option<u64> {
        self.names
            .iter()
            .position(|n| *n == name)
            .map(|i| self.values[i])
    }

    /// `gemm@n=4096,k=4096`: the table entry of `kernel` at this shape (the kernel's
    /// name alone without a shape).
    pub fn entry_name(&self, kernel: &str) -> String {
        crate::names::shape_entry(kernel, &self.to_string())
    }
}

impl fmt::Display for Shape<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (index, (name, value)) in self.names.iter().zip(self.values).enumerate() {
            if index > 0 {
                f.write_str(",")?;
            }
            write!(f, "{name}={value}")?;
        }
        Ok(())
    }
}

/// `Σ |log2(a_i / b_i)|` (zeros taken as 1); infinite where the lengths differ.
pub fn distance(a: &[u64], b: &[u64]) -> f64 {
    if a.len() != b.len() {
        return f64::INFINITY;
    }
    a.iter()
        .zip(b)
        .map(|(&x, &y)| ((x.max(1) as f64).log2() - (y.max(1) as f64).log2()).abs())
        .sum()
}

/// The index in `tuned` of `shape` itself, else of the nearest shape by
/// [`distance`] (the first of equals); `None` when `tuned` is empty. The second
/// value says whether it was an exact match. No allocation: dispatch calls it, and a
/// tuned shape (the usual call) costs comparisons only, no logarithm.
pub fn nearest<'s, I>(tuned: I, shape: &[u64]) -> Option<(usize, bool)>
where
    I: IntoIterator<Item = &'s [u64]> + Clone,
{
    if let Some(index) = tuned.clone().into_iter().position(|t| t == shape) {
        return Some((index, true));
    }
    let mut best: Option<(usize, f64)> = None;
    for (index, candidate) in tuned.into_iter().enumerate() {
        let d = distance(candidate, shape);
        if best.is_none_or(|(_, b)| d < b) {
            best = Some((index, d));
        }
    }
    best.map(|(index, _)| (index, false))
}

#[cfg(test)]
mod tests {
    use super::*;

    const TUNED: [&[u64]; 3] = [&[4096, 4096], &[14336, 4096], &[4096, 14336]];

    #[test]
    fn an_exact_shape_is_its_own() {
        assert_eq!(nearest(TUNED, &[14336, 4096]), Some((1, true)));
    }

    #[test]
    fn an_unseen_shape_goes_to_the_nearest_by_log_ratio() {
        // (8192, 4096): 1 from (4096, 4096), log2(14336/8192) = 0.81 from (14336, 4096).
        assert_eq!(nearest(TUNED, &[8192, 4096]), Some((1, false)));
        // (4096, 5000): 0.29 from the first, 1.52 from the third.
        assert_eq!(nearest(TUNED, &[4096, 5000]), Some((0, false)));
        // (11585, 11585) ~ sqrt(4096 * 14336 * ...): equal to two; the first wins.
        let d1 = distance(&[14336, 4096], &[8192, 8192]);
        let d2 = distance(&[4096, 14336], &[8192, 8192]);
        assert!((d1 - d2).abs() < 1e-12);
        assert_eq!(
            nearest(TUNED[1..].iter().copied(), &[8192, 8192]),
            Some((0, false))
        );
    }

    #[test]
    fn distance_is_symmetric_and_counts_factors_of_two() {
        assert!((distance(&[2048, 4096], &[4096, 4096]) - 1.0).abs() < 1e-12);
        assert!((distance(&[8192, 4096], &[4096, 2048]) - 2.0).abs() < 1e-12);
        assert_eq!(distance(&[0], &[1]), 0.0);
        assert_eq!(distance(&[1, 2], &[1]), f64::INFINITY);
        assert_eq!(nearest(std::iter::empty(), &[1]), None);
    }

    #[test]
    fn entry_names() {
        let names = ["n", "k"];
        let shape = Shape::new(&names, &[4096, 14336]);
        assert_eq!(shape.entry_name("gemm"), "gemm@n=4096,k=14336");
        assert_eq!(shape.get("k"), Some(14336));
        assert_eq!(Shape::none().entry_name("gemm"), "gemm");
    }
}

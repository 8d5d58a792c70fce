//! The library's compiled kernels as constants, as candle-kernels ships its own
//! (`candle_kernels::REDUCE`): `SOFTMAX` is the PTX of `kernels/softmax.cu`
//! (made by `kernels/make-ptx.sh`), the very text the library hands the driver.

/// The PTX of the row softmax (`softmax_rows`, one row per block).
pub const SOFTMAX: &str = include_str!("../../kernels/softmax.ptx");

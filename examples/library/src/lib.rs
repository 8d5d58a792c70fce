//! A kernel this crate did not write, tuned from the outside: `kernels/softmax.cu`
//! is a row softmax in a kernel library's style, kept as the library ships it. Its
//! block size reaches only the launch (and an argument), so it is a launch-only
//! parameter: one compile per value of the compile-time knob `ROWS_PER_BLOCK`, and
//! every block size timed on that image. The library's own launcher, with its
//! heuristic (32 threads a row below 1024 columns, 1024 from there), is the
//! incumbent the tuned plan must beat, per width and per number of rows.
//!
//! `softmax_ptx` is the same kernel as the library might ship it, as PTX only
//! (`kernels/softmax.ptx`): nothing is compiled, its launch is tuned.
//! `softmax_constant` loads the same PTX from a Rust constant of a dependency
//! (`softmax_kernels::SOFTMAX`), as candle loads `candle_kernels::REDUCE`.

pub mod softmax;
pub mod softmax_constant;
pub mod softmax_ptx;

//! SwiGLU's activation, tuned at build time: the wrapper and its case live in
//! [`swiglu`]; `src/main.rs` loads and dispatches it.

pub mod swiglu;

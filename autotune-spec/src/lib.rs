//! The grammar of `#[autotune(...)]`, shared by the proc macro (which turns every
//! mistake into a spanned compile error) and by the build side (which scans a crate
//! for annotated wrappers).
//!
//! ```text
//! #[autotune(
//!     source = "kernels/rmsnorm.cu",      // CUDA source, relative to the crate root
//!     entry = "rmsnorm_bf16",             // kernel symbol (default: the wrapper's name)
//!     key = n_rows,                       // the wrapper argument that selects a range
//!     sizes = [512, 2k, 8k, 32k, 64k],    // key values the sweep times (k = 1024)
//!     case = RmsNormCase,                 // inputs + reference for the sweep
//!     default = (block = 256, stages = 2),
//!     where = "block * stages <= 512",    // constraint between parameters
//!     fallback = rms_norm_plain,          // another #[autotune] wrapper, same arguments
//!     flags = ["-use_fast_math"],         // extra nvcc flags
//!     max_points = 4096,                  // the most points before the constraint (default 4096)
//!     max_sizes = 64,                     // the most key values to time (default 64)
//!     above = measure,                    // keys above the sizes: measure | extend | incumbent
//!     vendor = CublasGemm,                // or: a library's kernel as the fallback
//!     vendor_points = 8,                  // with vendor: its ranked algorithms timed too
//!     shapes = [(n = 4096, k = 4096)],    // other size arguments, a plan per shape
//!     block = [64, 128, 256],             // every other name is a parameter:
//!     stages = 1..4,                      //   a list, a range (`..` or `..=`) or one value
//! )]
//! ```

//!
//! Feature `grammar` (default) holds the parser; without it, only the vocabulary the
//! other crates share remains ([`above`], [`inputs`], [`names`], [`range`], [`rng`],
//! [`shape`], [`source`], ...), for the run-time, gate and tables crates. Feature
//! `serde` makes [`KeyRange`] serializable (the tables crate's form of a range).

pub mod above;
#[cfg(feature = "grammar")]
mod attribute;
#[cfg(feature = "grammar")]
mod constraint;
#[cfg(feature = "grammar")]
mod defines;
#[cfg(feature = "grammar")]
mod diagnostics;
pub mod guarded;
pub mod image;
pub mod inputs;
#[cfg(feature = "grammar")]
pub mod like;
pub mod names;
#[cfg(feature = "grammar")]
mod pairs;
pub mod quantile;
pub mod range;
pub mod rng;
#[cfg(feature = "grammar")]
mod scan;
pub mod shape;
#[cfg(feature = "grammar")]
mod shapes;
#[cfg(feature = "grammar")]
mod signature;
pub mod source;
#[cfg(feature = "grammar")]
mod space;

#[cfg(feature = "grammar")]
pub use attribute::{OPTIONS, Spec};
#[cfg(feature = "grammar")]
pub use constraint::{Constraint, EvalError};
#[cfg(feature = "grammar")]
pub use defines::Defines;
#[cfg(feature = "grammar")]
pub use diagnostics::Diagnostics;
#[cfg(feature = "grammar")]
pub use pairs::{AttrArgs, Entry};
pub use range::KeyRange;
#[cfg(feature = "grammar")]
pub use scan::{WrapperRef, find_wrappers, is_autotune_attr};
#[cfg(feature = "grammar")]
pub use shapes::{MAX_SHAPES, Shapes};
#[cfg(feature = "grammar")]
pub use signature::{Argument, ArgumentRole, WrapperSignature};
#[cfg(feature = "grammar")]
pub use space::{Param, Point, Space};

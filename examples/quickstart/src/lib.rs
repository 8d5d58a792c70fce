//! The README's quick start: a crate made by `cargo new --lib quickstart` and
//! `cargo autotune init`, unchanged but for this comment.

pub mod scale;

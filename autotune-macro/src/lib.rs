//! The proc macros of `autotune-runtime` (use them through that crate).
//!
//! `#[autotune(...)]` expands a kernel wrapper twice over the same source: in the
//! crate, into a dispatch struct that includes the plan the build generated; in
//! `build.rs` (where `tunables!()` includes the wrapper's file as a module), into the
//! same items with an empty plan, so the sweep can launch the wrapper before the
//! crate exists. The launch logic is written once, in the wrapper.

use proc_macro::TokenStream;

mod context;
mod expand;
mod tunables;

/// Marks a kernel wrapper as tunable. See `autotune_runtime` for the grammar.
#[proc_macro_attribute]
pub fn autotune(attr: TokenStream, item: TokenStream) -> TokenStream {
    expand::autotune(attr.into(), item.into(), context::Context::detect())
        .unwrap_or_else(syn::Error::into_compile_error)
        .into()
}

/// In `build.rs`: includes every source file under `src/` that holds an
/// `#[autotune]` wrapper and evaluates to the list of their kernels.
#[proc_macro]
pub fn tunables(input: TokenStream) -> TokenStream {
    tunables::expand(input.into())
        .unwrap_or_else(syn::Error::into_compile_error)
        .into()
}

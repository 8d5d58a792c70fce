//! The proc macros of `autotune-runtime` (use them through that crate).
//!
//! `#[autotune(...)]` expands a kernel wrapper twice over the same source: in the
//! crate, into a dispatch struct that includes the plan the build generated; in
//! `build.rs` (where `tunables!()` includes the wrapper's file as a module), into the
//! same items with an empty plan, so the sweep can launch the wrapper before the
//! crate exists. The launch logic is written once, in the wrapper.

use proc_macro::TokenStream;

mod expand;
mod site;
mod tunables;

/// Marks a kernel wrapper as tunable: `build.rs` sweeps the space it declares on
/// the local GPU and bakes, per range of the key, the variant that won.
///
/// ```ignore
/// #[autotune(
///     source = "kernels/rmsnorm.cu",      // the CUDA file, relative to the crate root
///     entry = "rmsnorm_bf16",             // its kernel symbol(s); default: the fn's name
///     key = n_rows,                       // the integer argument dispatch matches on
///     sizes = [512, 2k, 8k, 32k, 64k],    // key values to time (k = 1024, m = 1024²)
///     case = RmsNormCase,                 // inputs + reference for the sweep (a type)
///     block = [64, 128, 256],             // a parameter: a list ...
///     stages = 1..4,                      // ... a half-open range (1, 2, 3) ...
///     vecs = 1..=4,                       // ... an inclusive one (1, 2, 3, 4) ...
///     bk = 32,                            // ... or one value
///     where = "block * stages <= 512",    // optional: which points exist
///     default = (block = 256, stages = 2, vecs = 1, bk = 32),
/// )]
/// pub fn rms_norm(stream: &CudaStream, variant: &Variant<RmsNormParams>,
///                 x: &CudaSlice<bf16>, out: &mut CudaSlice<bf16>, n_rows: usize)
///                 -> Result<(), KernelError> { /* grid, block, launch */ }
/// ```
///
/// **Required**: `source`, `key`, `sizes`, `case`, and the wrapper's first two
/// arguments: a `&CudaStream` and a `&Variant<P>` (`P` is generated from the
/// parameters: one `u32` field each; `Variant<()>` when there are none).
///
/// **Parameters** are any other `name = value`: lower snake case, not a Rust keyword,
/// at most 64 characters. Each becomes a field of `P` and a `-DNAME=value` for nvcc
/// (`block` -> `-DBLOCK=128`), so the CUDA source must mention `NAME`. Values are
/// integer literals without suffix, from 0 to `u32::MAX`. Ranges follow Rust:
/// `1..4` excludes 4, `1..=4` includes it.
///
/// **`sizes`**: strictly ascending key values, each `>= 1` and within the key's
/// type (`n: u16` takes at most 65535); `k` and `m` suffixes multiply by 1024 and
/// 1024². The sweep times every point at each, then refines between neighbours whose
/// winners differ. Dispatch covers the whole key range: from 0 to the first size,
/// the first size's pick; above the largest size, what `above` says.
///
/// **`above`** = `measure` (the default) | `extend` | `incumbent`: keys above the
/// largest size. `measure` times the largest size's pick against the incumbent at
/// twice that size (if the key's type and the GPU's memory allow): where the pick
/// still wins there it owns every larger key (extrapolated above twice the top),
/// else the incumbent does from a refined boundary. `extend` gives them to the
/// pick unmeasured; `incumbent` to the incumbent (the fallback, else the default).
/// The table, the report, `Baked::describe` and `selection()` say which keys were
/// measured and which are extrapolated.
///
/// **`inputs`** = `cold` (the default) | `warm`: how the kernel finds its inputs
/// when it is called, which is how the sweep times it. `cold`: each timed launch
/// reads the next of enough copies of the inputs the case names in
/// `Case::rotating` to cover the L2 three times (or, where it names none, runs
/// after the L2 flush). `warm`: the same buffers every launch, nothing evicted.
///
/// **Candidate sources**: `source = ["kernels/topk.cu", "kernels/topk_v2.cu"]` lists
/// the incumbent implementation, then candidates of the same kernels (same entries,
/// same wrapper). The space gains a first parameter `source` (0 is the incumbent; a
/// `where` may name it, `default` may omit it), every point is compiled from the
/// source it names (with `-DSOURCE=i`), and each is gated and timed like any other
/// variant. At each key a candidate must beat the incumbent *source's* best point by
/// more than the margin and the noise, not merely its default, so the old source
/// keeps every range where the new one does not clearly win.
///
/// **`shapes`**: `shapes = [(n = 4096, k = 4096), (n = 14336, k = 4096)]` tunes the
/// kernel over the key *and* a set of values of other integer arguments (a GEMM's
/// `(n, k)` beside its key `m`; a LayerNorm's hidden size beside its rows). Every
/// shape names the same arguments in the same order; values take `k`/`m` suffixes and
/// must fit their argument's type; at most 64 shapes. Each shape is swept on its own
/// and gets its own plan (its own table entry, `gemm@n=4096,k=4096`); the case is made
/// with `Case::with_shape(stream, key, &shape)` (`shape.get("n")`). At run time a
/// call at a tuned shape uses that shape's plan; any other shape uses the plan of the
/// nearest tuned one by the sum over dimensions of |log2(a / b)| (ties to the first
/// declared), less, with a fallback, the ranges that did not lead it by
/// `autotune_table::ranges::BORROW_LEAD` where they were tuned (those launch the
/// fallback). The dispatch struct gains `shape_rule(n, k)` (which plan, and why) and
/// `ranges_at(n, k)`; `describe` and `variant` take the shape arguments after the key.
/// Dispatch is still one comparison per tuned shape and a `match` on the key: no
/// allocation, no lock, no host synchronisation.
///
/// ```ignore
/// #[autotune(source = "kernels/gemm.cu", key = m, sizes = [1, 64, 1k, 8k],
///            shapes = [(n = 4096, k = 4096), (n = 14336, k = 4096)],
///            vendor = CublasGemm, case = GemmCase, bm = [64, 128], bn = [64, 128])]
/// pub fn gemm(stream: &CudaStream, variant: &Variant<GemmParams>, a: &CudaSlice<bf16>,
///             b: &CudaSlice<bf16>, c: &mut CudaSlice<bf16>, m: usize, n: usize, k: usize)
///             -> Result<(), KernelError> { /* ... */ }
/// ```
///
/// **`vendor`**: `vendor = CublasGemm` makes a library's kernel the fallback instead
/// of another wrapper of ours: a type implementing `autotune_runtime::Vendor` (its
/// `NAME`, its `library()` version, a `load(ctx)` that makes the handle and workspace
/// once) with an inherent `launch` taking the wrapper's arguments without the variant.
/// The sweep times it at every key exactly as dispatch calls it, it is the incumbent
/// every variant of ours must beat by the margin and the noise, and it owns every
/// range none does. The library's name and version are in the table's fingerprint (a
/// new cuBLAS retunes) and in the report. `vendor` and `fallback` are exclusive.
///
/// **`vendor_points`**: `vendor_points = 8` (1 to 32, with `vendor`) gives the vendor
/// its best: a library such as cuBLASLt ranks algorithms per problem, and its first
/// choice is not always its fastest. The type then also has inherent
/// `points(&self, count: u32, <the wrapper's arguments without the variant>) ->
/// Result<Vec<Vec<u32>>, E>` (up to `count` points for the call's problem, best
/// first, each a few words only the vendor reads) and `launch_point(&self, point:
/// &[u32], <the same arguments>)` (the call at one of them; where a point cannot run a
/// call, its default launch). Before each sweep, the points are asked for at every
/// size and swept against the default launch (checked, timed, a key changing hands
/// only outside the noise); the winner of each range is the incumbent every variant
/// of ours must beat there, and what dispatch runs where none does (the table's
/// `vendor_plan`).
///
/// **Kernels you did not write** (a library's file, kept as it ships):
/// - `launch = [threads, rows]` declares parameters that only reach the launch (a
///   block size passed at launch and as an argument): no `-D`, no mention needed in
///   the source; the sweep compiles once per point of the other parameters and times
///   every launch value on that image. A constraint may mix both kinds.
/// - `define_prefix = "TUNE_"` emits every compile-time parameter as `-DTUNE_BLOCK`;
///   `defines = (block = "BLOCK_DIM")` names one; the source must mention the name
///   emitted.
/// - A define that would rewrite what the source declares (`const int BLOCK_SIZE =
///   1024;`, a variable, a parameter, a function, an unguarded `#define`) is a compile
///   error naming the file and line; `#ifndef BLOCK_SIZE` / `#define BLOCK_SIZE 1024`
///   is the override the define is for.
/// - The library's own launch, its heuristic included, is the incumbent as a
///   `fallback`: an `#[autotune]` wrapper without parameters (`Variant<()>`) that
///   launches the way the library does (`examples/library`).
/// - A kernel already compiled: `source = "kernels/softmax.ptx"` (a `.ptx`,
///   `.cubin` or `.fatbin` file; `"$DEP_X_DIR/k.ptx"` starts at a variable the build
///   script has), or `source = candle_kernels::REDUCE`, the path of a constant of a
///   dependency holding PTX text or a cubin's or fatbin's bytes (`&str`, `&[u8]` or
///   `&[u8; N]`), the very bytes the library loads. Add that crate to
///   `[build-dependencies]` too: the build script reads the constant there. Nothing
///   is compiled, so every parameter is `launch`-only and there are no `flags`; the
///   image's bytes are its fingerprint, `entry` its symbol as the image spells it.
///
/// **`like = other_wrapper`**: take every option and parameter this attribute does
/// not write from another `#[autotune]` wrapper of the same file, so that a kernel
/// and its incumbent (`like = softmax_library, fallback = softmax_library,
/// threads = [...]`), or a family over data types, say `source`, `key`, `sizes`,
/// `shapes`, `case` and the rest once. `fallback` and `vendor` are never taken, and
/// the wrapper named must write its own options (one step). What it takes is
/// checked here as if written here.
///
/// **`case`** is a type implementing `autotune_runtime::prelude::Case` (generics allowed:
/// `case = LayerNormCase<768>`); its fields named like the wrapper's arguments are
/// what the sweep launches the wrapper with.
///
/// **`where`** is a Rust expression (or a string holding one) over parameter names
/// and integer literals with `+ - * / %`, unary `-`, comparisons `== != < <= > >=`,
/// `&& || !` and parentheses. It is evaluated in 64-bit signed integers at every
/// point; overflow or division by zero is a compile error naming the point. It must
/// keep at least one point, and the default.
///
/// **`default`** gives every parameter once: the incumbent a challenger must beat by
/// more than the noise, and what a GPU without a table gets. Default: the space's
/// first point.
///
/// **Other options**: `entry = ["a", "b"]` for wrappers that launch several kernels
/// (`variant.functions()[i]`); `flags = ["-use_fast_math"]` for nvcc (a flag may not
/// set a parameter's macro); `fallback = other_wrapper` (another `#[autotune]`
/// wrapper in the module with the same arguments, used where no variant of this one
/// wins); `max_points = N` (default 4096) and `max_sizes = N` (default 64) raise the
/// limits on the space and the sizes.
///
/// **Names**: the wrapper's name is lower snake case with single `_` between words
/// that start with a letter (`rms_norm` -> `RmsNorm`; `probe_` or `gemm_2` are
/// refused: another wrapper could get the same generated names).
///
/// Every malformed attribute is a compile error on the tokens at fault, all of an
/// attribute's errors at once.
#[proc_macro_attribute]
pub fn autotune(attr: TokenStream, item: TokenStream) -> TokenStream {
    // The wrapper's own file, where `like = other` finds the other wrapper.
    let file = proc_macro::Span::call_site().local_file();
    expand::autotune(attr.into(), item.into(), site::Site::detect(), file)
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

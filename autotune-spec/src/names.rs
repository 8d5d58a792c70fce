//! Naming conventions shared by the macro (generated items) and the build side
//! (generated dispatch, tables, files).

/// `rms_norm` -> `RmsNorm`: the dispatch struct generated for a wrapper.
pub fn dispatch_struct(fn_name: &str) -> String {
    fn_name
        .split('_')
        .filter(|part| !part.is_empty())
        .map(|part| {
            let mut chars = part.chars();
            match chars.next() {
                Some(first) => first.to_uppercase().chain(chars).collect::<String>(),
                None => String::new(),
            }
        })
        .collect()
}

/// The longest parameter name: it is part of every compiled file's name.
pub const MAX_PARAM_NAME: usize = 64;

/// The longest tuned wrapper's name.
pub const MAX_WRAPPER_NAME: usize = 64;

/// The longest point slug (`block128_stages4`), which names compiled files (with
/// the wrapper's name and a digest, under the 255 bytes a file name may have).
pub const MAX_SLUG: usize = 160;

/// Rust's keywords, strict and reserved: none can name a params struct's field.
const KEYWORDS: [&str; 51] = [
    "as", "break", "const", "continue", "crate", "else", "enum", "extern", "false", "fn", "for",
    "if", "impl", "in", "let", "loop", "match", "mod", "move", "mut", "pub", "ref", "return",
    "self", "static", "struct", "super", "trait", "true", "type", "unsafe", "use", "where",
    "while", "async", "await", "dyn", "abstract", "become", "box", "do", "final", "macro",
    "override", "priv", "typeof", "unsized", "virtual", "yield", "try", "gen",
];

/// Whether `name` is a Rust keyword (`type`, `match`, `gen`, ...).
pub fn is_keyword(name: &str) -> bool {
    KEYWORDS.contains(&name)
}

/// Macros the C, C++ and CUDA headers a kernel includes define themselves: a
/// parameter that became one (`-DNULL=64`, `-DNAN=1`, `-DUINT_MAX=8`) would
/// redefine it in every header.
const STANDARD_MACROS: [&str; 40] = [
    "NULL",
    "NAN",
    "INFINITY",
    "HUGE_VAL",
    "HUGE_VALF",
    "EOF",
    "TRUE",
    "FALSE",
    "BUFSIZ",
    "CHAR_BIT",
    "CHAR_MAX",
    "CHAR_MIN",
    "SCHAR_MAX",
    "SCHAR_MIN",
    "UCHAR_MAX",
    "SHRT_MAX",
    "SHRT_MIN",
    "USHRT_MAX",
    "INT_MAX",
    "INT_MIN",
    "UINT_MAX",
    "LONG_MAX",
    "LONG_MIN",
    "ULONG_MAX",
    "LLONG_MAX",
    "LLONG_MIN",
    "ULLONG_MAX",
    "SIZE_MAX",
    "FLT_MAX",
    "FLT_MIN",
    "FLT_EPSILON",
    "DBL_MAX",
    "DBL_MIN",
    "DBL_EPSILON",
    "RAND_MAX",
    "EXIT_SUCCESS",
    "EXIT_FAILURE",
    "M_PI",
    "M_E",
    "ASSERT",
];

/// Whether the macro `define` (`NULL`) is one the standard headers define, or of a
/// family they reserve (`INT8_MAX`, `CUDART_INF`, `__CUDA_ARCH__`).
pub fn is_standard_macro(define: &str) -> bool {
    STANDARD_MACROS.contains(&define)
        || define.starts_with('_')
        || define.starts_with("CUDA")
        || define.starts_with("CUB_")
        || define.starts_with("THRUST_")
        || ((define.starts_with("INT") || define.starts_with("UINT"))
            && (define.ends_with("_MAX") || define.ends_with("_MIN") || define.ends_with("_C")))
}

/// A 64-bit FNV-1a digest of `bytes`: what `tunables!()` records of each file it
/// compiles into a build script, and what the build step compares at run time.
pub fn file_digest(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
        (hash ^ u64::from(*byte)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// `block` -> `BLOCK`: the preprocessor macro a parameter becomes (`-DBLOCK=128`).
pub fn define(param: &str) -> String {
    param.to_ascii_uppercase()
}

/// `block=128,stages=2`: how a point is named in tables, logs and dispatch.
pub fn point_name(params: &[impl AsRef<str>], values: &[u32]) -> String {
    joined(params, values, "=", ",")
}

/// `block128_stages2`: a point as a file-name and identifier fragment.
pub fn point_slug(params: &[impl AsRef<str>], values: &[u32]) -> String {
    joined(params, values, "", "_")
}

/// Each parameter with its value (`name{between}value`), joined by `separator`;
/// `default` for a space without parameters.
fn joined(params: &[impl AsRef<str>], values: &[u32], between: &str, separator: &str) -> String {
    if params.is_empty() {
        return "default".to_string();
    }
    params
        .iter()
        .zip(values)
        .map(|(name, value)| format!("{}{between}{value}", name.as_ref()))
        .collect::<Vec<_>>()
        .join(separator)
}

/// `gemm@n=4096,k=4096`: the table entry of `kernel` at a shape written
/// `n=4096,k=4096` (the kernel's name alone without a shape).
pub fn shape_entry(kernel: &str, shape: &str) -> String {
    if shape.is_empty() {
        kernel.to_string()
    } else {
        format!("{kernel}@{shape}")
    }
}

/// Whether the table entry `entry` belongs to `kernel`: its own, or one of its
/// shapes' ([`shape_entry`]).
pub fn is_entry_of(entry: &str, kernel: &str) -> bool {
    entry
        .strip_prefix(kernel)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with('@'))
}

/// `gemm@n=4096,k=4096` -> `gemm_n_4096_k_4096`: a kernel's or an entry's name as a
/// file-name fragment (logs, plots, journals), one file however the name is spelt.
pub fn file_fragment(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// `NVIDIA H200` -> `nvidia-h200`: the file stem of a GPU model's tuning table.
pub fn gpu_slug(gpu_name: &str) -> String {
    let mut slug = String::new();
    for c in gpu_name.chars() {
        if c.is_ascii_alphanumeric() {
            slug.push(c.to_ascii_lowercase());
        } else if !slug.ends_with('-') && !slug.is_empty() {
            slug.push('-');
        }
    }
    slug.trim_end_matches('-').to_string()
}

/// `sm_90` for compute capability 9.0: the architecture nvcc names.
pub fn arch(compute_capability: (u32, u32)) -> String {
    format!("sm_{}{}", compute_capability.0, compute_capability.1)
}

/// `sm_90a` for compute capability 9.0: the architecture with that GPU's own
/// features (`wgmma`, `setmaxnreg` on Hopper), from Hopper on; [`arch`] before. Its
/// machine code runs on exactly that compute capability, so it is what a sweep on
/// such a GPU compiles and what a build baking its table adds beside the portable
/// architectures (the driver runs it in preference to plain `sm_90` code in the same
/// image: measured on an H200, `bench/h200/probe/fatbin_choice.cu`).
pub fn arch_specific(compute_capability: (u32, u32)) -> String {
    let arch = arch(compute_capability);
    if compute_capability.0 >= 9 {
        format!("{arch}a")
    } else {
        arch
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arch_specific_targets_from_hopper_on() {
        assert_eq!(arch((9, 0)), "sm_90");
        assert_eq!(arch_specific((8, 6)), "sm_86");
        assert_eq!(arch_specific((9, 0)), "sm_90a");
        assert_eq!(arch_specific((10, 0)), "sm_100a");
    }

    #[test]
    fn shape_entries_and_file_fragments() {
        assert_eq!(shape_entry("gemm", "n=4096,k=4096"), "gemm@n=4096,k=4096");
        assert_eq!(shape_entry("gemm", ""), "gemm");
        assert!(is_entry_of("gemm@n=4096,k=4096", "gemm") && is_entry_of("gemm", "gemm"));
        assert!(!is_entry_of("gemm_2", "gemm"));
        assert_eq!(file_fragment("gemm@n=4096,k=4096"), "gemm_n_4096_k_4096");
        assert_eq!(file_fragment("../etc/x"), "___etc_x");
    }

    #[test]
    fn names() {
        assert_eq!(dispatch_struct("rms_norm"), "RmsNorm");
        assert_eq!(dispatch_struct("topk_indexer_v2"), "TopkIndexerV2");
        assert_eq!(define("block_m"), "BLOCK_M");
        let params = ["block".to_string(), "stages".to_string()];
        assert_eq!(point_name(&params, &[64, 2]), "block=64,stages=2");
        assert_eq!(point_slug(&params, &[64, 2]), "block64_stages2");
        let none: [&str; 0] = [];
        assert_eq!(point_name(&none, &[]), "default");
        assert_eq!(gpu_slug("NVIDIA H200"), "nvidia-h200");
        assert_eq!(
            gpu_slug("NVIDIA GeForce RTX 4090 (laptop)"),
            "nvidia-geforce-rtx-4090-laptop"
        );
    }
}

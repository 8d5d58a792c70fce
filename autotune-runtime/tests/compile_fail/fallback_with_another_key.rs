use autotune_runtime::KernelSpec;

const PLAIN: KernelSpec = KernelSpec::new("plain", "w.rs", "k.cu", &["k"], "m", &[1024]);

// What `#[autotune(key = n, fallback = plain, ...)]` expands to, where `plain`'s key is `m`.
const TUNED: KernelSpec = KernelSpec {
    fallback: Some(&PLAIN),
    ..KernelSpec::new("tuned", "w.rs", "k.cu", &["k"], "n", &[1024])
};
const _: () = TUNED.check_fallback();

fn main() {}

//! Where a kernel's source is: relative to the crate root, or below the value of
//! a variable the path starts with (`$DEP_X_DIR/k.ptx`: cargo's `links` metadata
//! reaches a build script as `DEP_<LINKS>_<KEY>`).

use std::path::{Path, PathBuf};

use autotune_spec::image;

/// The file `source` (as the attribute writes it) names.
pub fn resolve(root: &Path, source: &str) -> Result<PathBuf, image::Unresolved> {
    image::resolve(root, source, variable)
}

/// The variable a source path names, in the build script's environment: the
/// user's attribute names it, so it is read here and not through `vars`.
#[allow(clippy::disallowed_methods)]
fn variable(name: &str) -> Option<PathBuf> {
    std::env::var_os(name).map(PathBuf::from)
}

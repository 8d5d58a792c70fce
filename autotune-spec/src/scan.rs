//! Finding `#[autotune]` wrappers in a parsed source file (for `tunables!()`).

use syn::{Attribute, Item};

use crate::names;

/// An annotated wrapper found in a source file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WrapperRef {
    /// Inline modules between the file and the wrapper (`mod inner { ... }`).
    pub module_path: Vec<String>,
    pub fn_name: String,
    /// The generated struct that implements `autotune_runtime::Kernel`.
    pub dispatch_struct: String,
}

/// Whether `attr` is `#[autotune(...)]` (under any path ending in `autotune`).
pub fn is_autotune_attr(attr: &Attribute) -> bool {
    attr.path()
        .segments
        .last()
        .is_some_and(|s| s.ident == "autotune")
}

/// Every function in `file` (and its inline modules) carrying `#[autotune]`.
pub fn find_wrappers(file: &syn::File) -> Vec<WrapperRef> {
    let mut found = Vec::new();
    collect(&file.items, &mut Vec::new(), &mut found);
    found
}

fn collect(items: &[Item], module_path: &mut Vec<String>, found: &mut Vec<WrapperRef>) {
    for item in items {
        match item {
            Item::Fn(function) if function.attrs.iter().any(is_autotune_attr) => {
                let fn_name = function.sig.ident.to_string();
                found.push(WrapperRef {
                    module_path: module_path.clone(),
                    dispatch_struct: names::dispatch_struct(&fn_name),
                    fn_name,
                });
            }
            Item::Mod(module) => {
                if let Some((_, items)) = &module.content {
                    module_path.push(module.ident.to_string());
                    collect(items, module_path, found);
                    module_path.pop();
                }
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_annotated_functions_in_inline_modules() {
        let file: syn::File = syn::parse_str(
            "#[autotune(block = [1])] pub fn rms_norm() {}\n\
             fn plain() {}\n\
             mod inner { #[autotune_runtime::autotune()] fn topk_v2() {} }",
        )
        .unwrap();
        let found = find_wrappers(&file);
        assert_eq!(found.len(), 2);
        assert_eq!(found[0].dispatch_struct, "RmsNorm");
        assert_eq!(found[1].module_path, ["inner"]);
        assert_eq!(found[1].dispatch_struct, "TopkV2");
    }
}

//! `like = other_wrapper`: a wrapper takes every option and parameter it does not
//! write itself from another `#[autotune]` wrapper of the same file, so that a kernel
//! and its incumbent, or a family over data types, say their shared options once.
//!
//! ```ignore
//! #[autotune(source = lib::SOFTMAX, entry = "softmax_rows", key = rows,
//!            sizes = [1k, 16k, 64k], shapes = [(cols = 768)], case = RowsCase)]
//! pub fn softmax_library(/* ... */) { /* the library's launch */ }
//!
//! #[autotune(like = softmax_library, fallback = softmax_library,
//!            threads = [32, 64, 128], launch = [threads])]
//! pub fn softmax(/* ... */) { /* ... */ }
//! ```
//!
//! What is never taken: `fallback` and `vendor` (each wrapper names its own
//! incumbent) and `like` itself (the wrapper named must write its options, not take
//! them from a third: one step, read in one place).

use syn::{Ident, Item};

use crate::{AttrArgs, Entry, is_autotune_attr};

/// The options a wrapper never takes from the one it is `like`.
pub const NOT_SHARED: [&str; 3] = ["like", "fallback", "vendor"];

/// `args` with every entry of the wrapper its `like = ...` names (in `file`, the
/// wrapper's own source file) that `args` does not give; `args` as they are without
/// `like`. The error is on the name where it names no wrapper of the file, or one
/// that is itself `like` another.
pub fn resolve(args: &AttrArgs, file: &syn::File) -> syn::Result<AttrArgs> {
    let Some(like) = args.entries.iter().find(|e| e.name == "like") else {
        return Ok(args.clone());
    };
    let name = like_name(like)?;
    let Some(other) = find(&file.items, name) else {
        return Err(syn::Error::new_spanned(
            &like.value,
            format!("`like = {name}`: this file has no `#[autotune]` wrapper `{name}`"),
        ));
    };
    let other: AttrArgs = other.parse_args().map_err(|error| {
        syn::Error::new_spanned(
            &like.value,
            format!("`like = {name}`: its attribute does not parse: {error}"),
        )
    })?;
    if let Some(chained) = other.entries.iter().find(|e| e.name == "like") {
        let third = quote::ToTokens::to_token_stream(&chained.value);
        return Err(syn::Error::new_spanned(
            &like.value,
            format!(
                "`{name}` takes its options from `{third}` itself: name `{third}` here \
                 (`like` is one step)"
            ),
        ));
    }
    let mut merged = args.clone();
    for entry in other.entries {
        let shared = !NOT_SHARED.iter().any(|n| entry.name == n);
        if shared && !args.entries.iter().any(|e| e.name == entry.name) {
            merged.entries.push(entry);
        }
    }
    Ok(merged)
}

/// The wrapper `like = name` names: a plain identifier.
fn like_name(like: &Entry) -> syn::Result<&Ident> {
    match &like.value {
        syn::Expr::Path(path) if path.qself.is_none() => path.path.get_ident(),
        _ => None,
    }
    .ok_or_else(|| {
        syn::Error::new_spanned(
            &like.value,
            "`like` names another `#[autotune]` wrapper of this file: `like = softmax_library`",
        )
    })
}

/// The `#[autotune]` attribute of the function `name` among `items` (and the inline
/// modules among them).
fn find<'a>(items: &'a [Item], name: &Ident) -> Option<&'a syn::Attribute> {
    items.iter().find_map(|item| match item {
        Item::Fn(function) if function.sig.ident == *name => {
            function.attrs.iter().find(|a| is_autotune_attr(a))
        }
        Item::Mod(module) => module
            .content
            .as_ref()
            .and_then(|(_, items)| find(items, name)),
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = r#"
        #[autotune(source = "k.cu", key = n, sizes = [1k], case = C, fallback = plain)]
        fn library() {}
        mod inner {
            #[autotune(like = library, block = [64])]
            fn chained() {}
        }
        fn not_a_wrapper() {}
    "#;

    fn resolved(attr: &str) -> syn::Result<Vec<String>> {
        let args: AttrArgs = syn::parse_str(attr)?;
        let file: syn::File = syn::parse_str(FILE)?;
        let merged = resolve(&args, &file)?;
        Ok(merged.entries.iter().map(|e| e.name.to_string()).collect())
    }

    #[test]
    fn a_wrapper_takes_what_it_does_not_write() {
        let names = resolved("like = library, fallback = library, sizes = [4k], block = [1]");
        assert_eq!(
            names.unwrap(),
            [
                "like", "fallback", "sizes", "block", "source", "key", "case"
            ]
        );
        // Without `like`, nothing is taken.
        assert_eq!(resolved("block = [1]").unwrap(), ["block"]);
    }

    #[test]
    fn like_names_one_wrapper_of_the_file_in_one_step() {
        let error = |attr: &str| resolved(attr).unwrap_err().to_string();
        assert!(error("like = not_a_wrapper").contains("no `#[autotune]` wrapper `not_a_wrapper`"));
        assert!(error("like = missing").contains("no `#[autotune]` wrapper `missing`"));
        assert!(error("like = chained").contains("takes its options from `library` itself"));
        assert!(error("like = \"library\"").contains("`like` names another"));
    }
}

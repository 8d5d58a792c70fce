//! `tunables!()`: the crate's wrapper files included into `build.rs` as modules,
//! and the list of their kernels for the build step.

use std::path::{Path, PathBuf};

use proc_macro2::{Span, TokenStream};
use quote::{format_ident, quote};
use syn::LitStr;

/// `tunables!()` or `tunables!("src", "more/src")`: includes every file under those
/// folders (default `src`) that holds `#[autotune]` wrappers, and builds the list
/// of their kernels. Every `.rs` file there is also `include_str!`ed, so that cargo
/// rebuilds the build script when any of them changes (a new module is declared in
/// one of them).
pub(crate) fn expand(input: TokenStream) -> syn::Result<TokenStream> {
    let folders: Vec<LitStr> = if input.is_empty() {
        vec![LitStr::new("src", Span::call_site())]
    } else {
        let list = syn::parse::Parser::parse2(
            syn::punctuated::Punctuated::<LitStr, syn::Token![,]>::parse_terminated,
            input,
        )?;
        list.into_iter().collect()
    };
    // What cargo sets for the crate being compiled (see `Site::detect`).
    #[allow(clippy::disallowed_methods)]
    let Some(manifest_dir) = std::env::var_os("CARGO_MANIFEST_DIR").map(PathBuf::from) else {
        return Err(syn::Error::new(
            Span::call_site(),
            "tunables!() runs under cargo (CARGO_MANIFEST_DIR is not set)",
        ));
    };
    let files = rust_files(&manifest_dir, &folders)?;

    let mut modules = Vec::new();
    let mut kernels = Vec::new();
    let mut tracked = Vec::new();
    let mut digests = Vec::new();
    for file in &files {
        let path = file.to_string_lossy().into_owned();
        tracked.push(quote!(#path));
        let Ok(text) = autotune_spec::guarded::read::read_to_string(
            file,
            autotune_spec::guarded::read::MAX_SOURCE_BYTES,
        ) else {
            continue;
        };
        // What the build step checks it runs for: the same files, with the same
        // contents (cargo shares a build script between checkouts of one crate
        // that share a target folder).
        let relative = file
            .strip_prefix(&manifest_dir)
            .unwrap_or(file)
            .to_string_lossy()
            .into_owned();
        let digest = autotune_spec::names::file_digest(text.as_bytes());
        digests.push(quote!((#relative, #digest)));
        if !text.contains("autotune") {
            continue;
        }
        // A file that does not parse is reported when the crate itself compiles.
        let Ok(parsed) = syn::parse_file(&text) else {
            continue;
        };
        let wrappers = autotune_spec::find_wrappers(&parsed);
        if wrappers.is_empty() {
            continue;
        }
        let module = format_ident!("__autotune_wrappers_{}", modules.len());
        modules.push(quote! {
            #[allow(dead_code, unused_imports, unreachable_pub, missing_debug_implementations, clippy::all)]
            #[path = #path]
            mod #module;
        });
        for wrapper in wrappers {
            let inner = wrapper.module_path.iter().map(|m| format_ident!("{}", m));
            let dispatch = format_ident!("{}", wrapper.dispatch_struct);
            kernels.push(quote!(.with::<#module #(:: #inner)* :: #dispatch>()));
        }
    }
    let root = manifest_dir.to_string_lossy().into_owned();
    Ok(quote! {
        {
            #(#modules)*
            const _: &[&str] = &[#(::core::include_str!(#tracked)),*];
            ::autotune_build::Tunables::new(#root)
                .compiled_from(&[#(#digests),*])
                #(#kernels)*
        }
    })
}

/// Every `.rs` file under the `folders` of the crate at `manifest_dir`, sorted;
/// an error on a folder that is not one.
fn rust_files(manifest_dir: &Path, folders: &[LitStr]) -> syn::Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for folder in folders {
        let dir = manifest_dir.join(folder.value());
        if !dir.is_dir() {
            return Err(syn::Error::new(
                folder.span(),
                format!("{} is not a folder", dir.display()),
            ));
        }
        collect_rs_files(&dir, &mut files);
    }
    files.sort();
    Ok(files)
}

fn collect_rs_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            collect_rs_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

//! The files a wrapper file pulls in at compile time, found in its tokens as rustc
//! would find them: `include!`, `include_str!` and `include_bytes!` (relative to the
//! including file), and out-of-line modules (`mod name;`, with or without
//! `#[path = "..."]`), which rustc reads as part of the crate, so a change there
//! changes the compiled wrapper as much as one in the wrapper file itself.
//!
//! Module paths follow the Rust reference ("Modules", "The path attribute"):
//!
//! - `mod name;` in a mod-rs file (`lib.rs`, `main.rs`, `mod.rs`, or a file loaded
//!   by `#[path]`) is `name.rs` or `name/mod.rs` beside it; in any other file
//!   `stem.rs` it is `stem/name.rs` or `stem/name/mod.rs`;
//! - `#[path = "p"] mod name;` at the top of a file is `p` beside the file;
//! - inside inline modules `mod a { mod b { ... } }` both are looked up under
//!   `a/b/` (after `stem/` in a non-mod-rs file).

use std::path::{Path, PathBuf};
use std::str::FromStr;

use proc_macro2::{Delimiter, TokenStream, TokenTree};

/// A file a wrapper file depends on, its paths relative to the depending file's
/// folder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Dependency {
    /// `include!("p")` and its kin: the bytes of `p` count.
    Include(PathBuf),
    /// An out-of-line module: the first of `paths` that exists is the module's file
    /// (one path with `#[path]`, two without), whose Rust tokens count and whose own
    /// dependencies are followed. `conditional`: it has a `#[cfg(...)]`, so rustc may
    /// not need the file (a missing one is no error then).
    Module {
        paths: Vec<PathBuf>,
        conditional: bool,
    },
}

/// Whether `file` is a mod-rs file for the modules it declares (`lib.rs`,
/// `main.rs`, `mod.rs`); a file loaded through `#[path]` is one too.
pub fn is_mod_rs(file: &Path) -> bool {
    matches!(
        file.file_name().and_then(|n| n.to_str()),
        Some("lib.rs" | "main.rs" | "mod.rs")
    )
}

/// The file of an out-of-line module with candidate `paths` (a
/// [`Dependency::Module`]'s), declared in a file of `folder`: the first that exists,
/// and whether it is a mod-rs file for the modules it declares in turn. A `#[path]`
/// module (its one candidate) is, as rustc treats it, and so is `name/mod.rs`;
/// `name.rs` is not. `None` where none of them exists.
pub fn module_file(folder: &Path, paths: &[PathBuf]) -> Option<(PathBuf, bool)> {
    let path = paths.iter().map(|p| folder.join(p)).find(|p| p.is_file())?;
    let mod_rs = paths.len() == 1 || is_mod_rs(&path);
    Some((path, mod_rs))
}

/// Why a wrapper file's dependencies cannot be followed, so that no fingerprint is
/// made that would miss a file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unfollowable {
    /// The file is not Rust tokens.
    #[error("not Rust tokens: {0}")]
    NotRust(String),
    /// `include!` or `include_str!` with a path that is not a string literal.
    #[error(
        "`{call}` reads a file whose path is not a string literal: the tuning fingerprint \
         cannot follow it (write the path as a literal, relative to this file)"
    )]
    IncludePath { call: String },
    /// A `#[path]` that is not `#[path = "file.rs"]`.
    #[error(
        "`#[{attribute}]` is not `#[path = \"file.rs\"]`: the tuning fingerprint cannot \
         follow the module"
    )]
    PathAttribute { attribute: String },
}

/// The dependencies of `text`, the contents of `file` (`mod_rs`: see
/// [`is_mod_rs`]). A path that is not a string literal
/// (`include!(concat!(env!("OUT_DIR"), ...))`) cannot be followed: an error, rather
/// than a fingerprint that misses a file.
pub fn dependencies(
    text: &str,
    file: &Path,
    mod_rs: bool,
) -> Result<Vec<Dependency>, Unfollowable> {
    let tokens = TokenStream::from_str(text).map_err(|e| Unfollowable::NotRust(e.to_string()))?;
    // Where this file's own `mod name;` declarations live.
    let modules = if mod_rs {
        PathBuf::new()
    } else {
        PathBuf::from(file.file_stem().unwrap_or_default())
    };
    let mut found = Vec::new();
    collect(
        tokens,
        &Scope {
            modules,
            inline: false,
        },
        &mut found,
    )?;
    Ok(found)
}

/// Where module declarations in the tokens being read resolve.
struct Scope {
    /// The folder of `mod name;` (relative to the file's folder).
    modules: PathBuf,
    /// Inside an inline module, where `#[path]` is relative to `modules` too.
    inline: bool,
}

fn collect(
    tokens: TokenStream,
    scope: &Scope,
    found: &mut Vec<Dependency>,
) -> Result<(), Unfollowable> {
    let tokens: Vec<TokenTree> = tokens.into_iter().collect();
    // The body of an inline module, read in its own scope, not again as a group.
    let mut inline_body = None;
    for (i, token) in tokens.iter().enumerate() {
        match token {
            TokenTree::Group(_) if inline_body == Some(i) => {}
            TokenTree::Ident(ident) if ident == "mod" => {
                let Some(TokenTree::Ident(name)) = tokens.get(i + 1) else {
                    continue;
                };
                let name = name.to_string();
                let name = name.strip_prefix("r#").unwrap_or(&name);
                match tokens.get(i + 2) {
                    // `mod name { ... }`: its declarations are one folder down.
                    Some(TokenTree::Group(body)) if body.delimiter() == Delimiter::Brace => {
                        let inner = Scope {
                            modules: scope.modules.join(name),
                            inline: true,
                        };
                        collect(body.stream(), &inner, found)?;
                        inline_body = Some(i + 2);
                    }
                    Some(TokenTree::Punct(semi)) if semi.as_char() == ';' => {
                        let attributes = outer_attributes(&tokens[..i]);
                        let conditional = attributes.iter().any(|a| {
                            matches!(a.stream().into_iter().next(), Some(TokenTree::Ident(c)) if c == "cfg")
                        });
                        let paths = match path_attribute(&attributes)? {
                            Some(path) if scope.inline => vec![scope.modules.join(path)],
                            Some(path) => vec![PathBuf::from(path)],
                            None => vec![
                                scope.modules.join(format!("{name}.rs")),
                                scope.modules.join(name).join("mod.rs"),
                            ],
                        };
                        found.push(Dependency::Module { paths, conditional });
                    }
                    _ => {}
                }
            }
            TokenTree::Group(group) => collect(group.stream(), scope, found)?,
            TokenTree::Ident(ident)
                if matches!(
                    ident.to_string().as_str(),
                    "include" | "include_str" | "include_bytes"
                ) =>
            {
                let (Some(TokenTree::Punct(bang)), Some(TokenTree::Group(args))) =
                    (tokens.get(i + 1), tokens.get(i + 2))
                else {
                    continue;
                };
                if bang.as_char() != '!' {
                    continue;
                }
                let path = syn::parse2::<IncludeArgs>(args.stream()).map_err(|_| {
                    Unfollowable::IncludePath {
                        call: format!("{ident}!({})", args.stream()),
                    }
                })?;
                found.push(Dependency::Include(PathBuf::from(path.0)));
            }
            _ => {}
        }
    }
    Ok(())
}

/// The outer attributes just before a `mod` (`before` ends at the `mod` keyword; a
/// visibility such as `pub(crate)` may sit between), as their bracketed groups.
fn outer_attributes(before: &[TokenTree]) -> Vec<proc_macro2::Group> {
    let mut end = before.len();
    // The visibility: `pub`, or `pub` and its parenthesised scope.
    if let Some(TokenTree::Group(g)) = before.get(end.wrapping_sub(1))
        && g.delimiter() == Delimiter::Parenthesis
        && matches!(before.get(end.wrapping_sub(2)), Some(TokenTree::Ident(p)) if p == "pub")
    {
        end -= 2;
    } else if matches!(before.get(end.wrapping_sub(1)), Some(TokenTree::Ident(p)) if p == "pub") {
        end -= 1;
    }
    // Last to first: `#` then `[...]`.
    let mut found = Vec::new();
    while end >= 2 {
        let (TokenTree::Punct(hash), TokenTree::Group(attribute)) =
            (&before[end - 2], &before[end - 1])
        else {
            break;
        };
        if hash.as_char() != '#' || attribute.delimiter() != Delimiter::Bracket {
            break;
        }
        found.push(attribute.clone());
        end -= 2;
    }
    found
}

/// The value of a `#[path = "..."]` among a module's attributes.
fn path_attribute(attributes: &[proc_macro2::Group]) -> Result<Option<String>, Unfollowable> {
    for attribute in attributes {
        if !matches!(attribute.stream().into_iter().next(), Some(TokenTree::Ident(p)) if p == "path")
        {
            continue;
        }
        let value = syn::parse2::<syn::MetaNameValue>(attribute.stream())
            .ok()
            .and_then(|meta| match meta.value {
                syn::Expr::Lit(syn::ExprLit {
                    lit: syn::Lit::Str(path),
                    ..
                }) => Some(path.value()),
                _ => None,
            });
        return match value {
            Some(path) => Ok(Some(path)),
            None => Err(Unfollowable::PathAttribute {
                attribute: attribute.stream().to_string(),
            }),
        };
    }
    Ok(None)
}

/// The argument of `include!("path")` (a trailing comma allowed).
struct IncludeArgs(String);

impl syn::parse::Parse for IncludeArgs {
    fn parse(input: syn::parse::ParseStream<'_>) -> syn::Result<Self> {
        let path: syn::LitStr = input.parse()?;
        let _: Option<syn::Token![,]> = input.parse()?;
        Ok(Self(path.value()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn of(text: &str, file: &str) -> Vec<Dependency> {
        let file = Path::new(file);
        dependencies(text, file, is_mod_rs(file)).unwrap()
    }

    fn include(p: &str) -> Dependency {
        Dependency::Include(PathBuf::from(p))
    }

    fn module(paths: &[&str]) -> Dependency {
        Dependency::Module {
            paths: paths.iter().map(PathBuf::from).collect(),
            conditional: false,
        }
    }

    #[test]
    fn includes_are_found_in_nested_groups_with_literal_paths() {
        let text = "fn f() { let s = include_str!(\"a.txt\"); }\n\
                    mod m { include!(\"b.rs\",); }\n\
                    const B: &[u8] = include_bytes!(\"c.bin\");\n\
                    fn include() {} // an ident alone is no include";
        assert_eq!(
            of(text, "src/gemm.rs"),
            [include("a.txt"), include("b.rs"), include("c.bin")]
        );
        let opaque = "include!(concat!(env!(\"OUT_DIR\"), \"/plan.rs\"));";
        let error = dependencies(opaque, Path::new("src/x.rs"), false).unwrap_err();
        assert!(
            matches!(&error, Unfollowable::IncludePath { call } if call.starts_with("include!")),
            "{error:?}"
        );
    }

    /// The gap of session 6: `src/gemm.rs` declares `#[path = "gemm_hopper.rs"] pub
    /// mod hopper;` and the fingerprint did not read that file.
    #[test]
    fn a_path_module_is_beside_the_file() {
        let text = "use x;\n#[path = \"gemm_hopper.rs\"]\npub mod hopper;\nuse hopper as h;";
        assert_eq!(of(text, "src/gemm.rs"), [module(&["gemm_hopper.rs"])]);
        let scoped =
            "#[cfg(feature = \"a\")]\n#[path = \"a/b.rs\"]\n#[allow(dead_code)]\npub(crate) mod b;";
        assert_eq!(
            of(scoped, "src/lib.rs"),
            [Dependency::Module {
                paths: vec![PathBuf::from("a/b.rs")],
                conditional: true
            }]
        );
    }

    #[test]
    fn a_plain_module_follows_the_file_kind() {
        let text = "mod child;\npub mod r#type;";
        assert_eq!(
            of(text, "src/gemm.rs"),
            [
                module(&["gemm/child.rs", "gemm/child/mod.rs"]),
                module(&["gemm/type.rs", "gemm/type/mod.rs"])
            ]
        );
        assert_eq!(
            of("mod child;", "src/lib.rs"),
            [module(&["child.rs", "child/mod.rs"])]
        );
        assert_eq!(
            of("mod child;", "src/gemm/mod.rs"),
            [module(&["child.rs", "child/mod.rs"])]
        );
    }

    #[test]
    fn modules_inside_inline_modules_are_a_folder_down() {
        let text = "mod outer { mod inner; #[path = \"p.rs\"] mod q; mod deeper { mod leaf; } }";
        assert_eq!(
            of(text, "src/lib.rs"),
            [
                module(&["outer/inner.rs", "outer/inner/mod.rs"]),
                module(&["outer/p.rs"]),
                module(&["outer/deeper/leaf.rs", "outer/deeper/leaf/mod.rs"])
            ]
        );
        assert_eq!(
            of("mod outer { mod inner; }", "src/gemm.rs"),
            [module(&["gemm/outer/inner.rs", "gemm/outer/inner/mod.rs"])]
        );
    }

    #[test]
    fn a_path_that_is_not_a_literal_is_an_error() {
        let error = dependencies(
            "#[path = concat!(\"a\", \".rs\")] mod a;",
            Path::new("src/lib.rs"),
            true,
        )
        .unwrap_err();
        assert!(
            matches!(&error, Unfollowable::PathAttribute { attribute } if attribute.starts_with("path")),
            "{error:?}"
        );
    }
}

//! The raw `name = value` pairs of `#[autotune(...)]`, before validation.

use proc_macro2::{TokenStream, TokenTree};
use syn::ext::IdentExt;
use syn::parse::{Parse, ParseStream};
use syn::punctuated::Punctuated;
use syn::{Expr, Ident, Token};

/// The raw contents of `#[autotune(...)]`: `name = value` pairs, before validation.
#[derive(Debug, Clone)]
pub struct AttrArgs {
    pub entries: Punctuated<Entry, Token![,]>,
}

/// One `name = value` pair. The name may be a keyword (`where`); the value is any
/// Rust expression and is interpreted by [`crate::Spec`] according to the name.
#[derive(Debug, Clone)]
pub struct Entry {
    pub name: Ident,
    pub eq: Token![=],
    pub value: Expr,
}

impl Parse for AttrArgs {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        Ok(Self {
            entries: Punctuated::parse_terminated(input)?,
        })
    }
}

impl Parse for Entry {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        let name = Ident::parse_any(input)?;
        let eq = input.parse().map_err(|error| {
            syn::Error::new(
                error.span(),
                format!("expected `=` after `{name}`: every entry is `name = value`"),
            )
        })?;
        check_size(input, &name)?;
        // `case` is a type, which may have generics (`LayerNormCase<768>`, an
        // expression would read `<` as a comparison); anything else is left to
        // `Spec` to refuse with its own message.
        if name == "case" {
            let fork = input.fork();
            if fork.parse::<syn::Type>().is_ok() && (fork.is_empty() || fork.peek(Token![,])) {
                let ty: syn::Type = input.parse()?;
                let value = Expr::Verbatim(quote::ToTokens::into_token_stream(ty));
                return Ok(Self { name, eq, value });
            }
        }
        let value = input.parse()?;
        Ok(Self { name, eq, value })
    }
}

/// The deepest nesting of brackets a value may have.
pub const MAX_DEPTH: usize = 32;

/// The most tokens a `where` constraint may have, and any other value.
pub const MAX_WHERE_TOKENS: usize = 1024;
pub const MAX_VALUE_TOKENS: usize = 16 * 1024;

/// Refuses, before anything parses it, a value nested deeper than [`MAX_DEPTH`] or
/// longer than its token limit: the parser and the constraint's evaluator recurse
/// on its shape, and 3000 nested parentheses or a sum of 20 000 terms overflowed
/// the compiler's stack inside the macro. The tokens are walked without recursion.
fn check_size(input: ParseStream<'_>, name: &Ident) -> syn::Result<()> {
    let mut value = Vec::new();
    input.fork().step(|cursor| {
        let mut rest = *cursor;
        while let Some((tree, next)) = rest.token_tree() {
            if matches!(&tree, TokenTree::Punct(p) if p.as_char() == ',') {
                break;
            }
            value.push(tree);
            rest = next;
        }
        Ok(((), rest))
    })?;
    let limit = if name == "where" {
        MAX_WHERE_TOKENS
    } else {
        MAX_VALUE_TOKENS
    };
    let mut stack = vec![(
        value.into_iter().collect::<TokenStream>().into_iter(),
        0usize,
    )];
    let mut count = 0usize;
    while let Some((tokens, depth)) = stack.last_mut() {
        let depth = *depth;
        let Some(tree) = tokens.next() else {
            stack.pop();
            continue;
        };
        count += 1;
        if count > limit {
            return Err(syn::Error::new(
                tree.span(),
                format!("`{name}` is longer than {limit} tokens"),
            ));
        }
        if let TokenTree::Group(group) = tree {
            if depth + 1 > MAX_DEPTH {
                return Err(syn::Error::new(
                    group.span(),
                    format!("`{name}` nests brackets deeper than {MAX_DEPTH}"),
                ));
            }
            stack.push((group.stream().into_iter(), depth + 1));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_keywords_ranges_lists_and_tuples() {
        let args: AttrArgs = syn::parse_str(
            "block = [64, 128], stages = 1..4, where = block * stages <= 256, \
             default = (block = 64, stages = 2), key = n, sizes = [1k, 4k]",
        )
        .unwrap();
        let names: Vec<_> = args.entries.iter().map(|e| e.name.to_string()).collect();
        assert_eq!(
            names,
            ["block", "stages", "where", "default", "key", "sizes"]
        );
        assert!(matches!(args.entries[1].value, Expr::Range(_)));
        assert!(matches!(args.entries[3].value, Expr::Tuple(_)));
    }

    /// Issue 10: `case = LayerNormCase<768>` failed with "comparison operators
    /// cannot be chained".
    #[test]
    fn case_is_a_type_with_generics() {
        let args: AttrArgs =
            syn::parse_str("case = LayerNormCase<768>, key = n, other = a < b").unwrap();
        let text = |e: &Expr| quote::ToTokens::to_token_stream(e).to_string();
        assert_eq!(text(&args.entries[0].value), "LayerNormCase < 768 >");
        assert_eq!(args.entries[1].name, "key");
        // Only `case` is read as a type.
        assert!(matches!(args.entries[2].value, Expr::Binary(_)));
        let nested: AttrArgs = syn::parse_str("case = cases::Norm<Vec<u8>, 4>").unwrap();
        assert!(matches!(nested.entries[0].value, Expr::Verbatim(_)));
    }

    #[test]
    fn missing_equals_is_an_error() {
        let error = syn::parse_str::<AttrArgs>("block [64]").unwrap_err();
        assert!(error.to_string().contains("expected `=` after `block`"));
    }

    #[test]
    fn deep_or_long_values_are_refused_before_parsing() {
        // Lexing 3000 nested groups (and dropping them) recurses in proc-macro2 itself:
        // rustc gives the macro a large stack, a test thread has 2 MiB (it overflowed
        // there, under load, in a debug build).
        let deep = std::thread::Builder::new()
            .stack_size(256 << 20)
            .spawn(|| {
                let deep = format!("where = {}block{} < 4", "(".repeat(3000), ")".repeat(3000));
                syn::parse_str::<AttrArgs>(&deep).unwrap_err().to_string()
            })
            .unwrap()
            .join()
            .unwrap();
        assert!(deep.contains("nests brackets deeper than 32"), "{deep}");
        let long = format!("where = {} < 4", vec!["block"; 20_000].join(" + "));
        let error = syn::parse_str::<AttrArgs>(&long).unwrap_err().to_string();
        assert!(error.contains("longer than 1024 tokens"), "{error}");
        let fine = format!(
            "block = [{}], where = ((block)) < 4",
            (1..=2000)
                .map(|n| n.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        );
        assert!(syn::parse_str::<AttrArgs>(&fine).is_ok());
    }
}

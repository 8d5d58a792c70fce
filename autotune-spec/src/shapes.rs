//! `shapes = [(n = 4096, k = 4096), (n = 14336, k = 4096)]`: the arguments besides
//! the key that a kernel is tuned over a set of values of, each shape with a plan of
//! its own (the run-time value and the rule for other shapes are in [`crate::shape`]).

use syn::{Expr, ExprLit, Ident, Lit};

use crate::Diagnostics;
use crate::signature::{ArgumentRole, WrapperSignature, integer_max, is_integer};

/// The most shapes a kernel may declare (each is a sweep of its own).
pub const MAX_SHAPES: usize = 64;

/// Validated shapes: the argument names (in the order written), a value per name
/// for each shape.
#[derive(Debug, Clone, Default)]
pub struct Shapes {
    pub args: Vec<Ident>,
    pub values: Vec<Vec<u64>>,
}

/// A size literal: an integer, optionally with `k` (x1024) or `m` (x1024²).
pub fn size_literal(elem: &Expr, what: &str, diag: &mut Diagnostics) -> Option<u64> {
    let Expr::Lit(ExprLit {
        lit: Lit::Int(int), ..
    }) = elem
    else {
        diag.at(
            elem,
            format!("{what} are integer literals, optionally with `k` (x1024) or `m` (x1024^2)"),
        );
        return None;
    };
    let scale: u64 = match int.suffix() {
        "" => 1,
        "k" | "K" => 1 << 10,
        "m" | "M" => 1 << 20,
        other => {
            diag.at(
                int,
                format!("unknown size suffix `{other}`: use `k` (x1024) or `m` (x1024^2)"),
            );
            return None;
        }
    };
    let Some(size) = int
        .base10_digits()
        .parse::<u64>()
        .ok()
        .and_then(|v| v.checked_mul(scale))
    else {
        diag.at(int, "size does not fit in u64");
        return None;
    };
    Some(size)
}

const EXAMPLE: &str = "e.g. `shapes = [(n = 4096, k = 4096), (n = 14336, k = 4096)]`";

/// Parses `value` against the wrapper's arguments: each name an integer argument
/// that is not the key, the same names in the same order in every shape, each value
/// at least 1 and within its argument's type, no shape twice.
pub fn parse_shapes(
    value: &Expr,
    signature: Option<&WrapperSignature>,
    key: Option<&Ident>,
    diag: &mut Diagnostics,
) -> Option<Shapes> {
    let Expr::Array(array) = value else {
        diag.at(
            value,
            format!("`shapes` is a list of values of the other size arguments, {EXAMPLE}"),
        );
        return None;
    };
    if array.elems.is_empty() {
        diag.at(
            array,
            "`shapes` is empty: leave it out to tune at the case's own shape",
        );
        return None;
    }
    if array.elems.len() > MAX_SHAPES {
        diag.at(
            array,
            format!(
                "{} shapes: at most {MAX_SHAPES} (each shape is a sweep of its own)",
                array.elems.len()
            ),
        );
        return None;
    }
    let mut shapes = Shapes::default();
    // Every shape is checked (all errors at once); one with a bad part is not
    // compared with the others, and the first good one says which arguments every
    // shape names.
    let mut all_ok = true;
    let mut first = true;
    for elem in &array.elems {
        let Some((names, values)) = parse_shape(elem, signature, key, diag) else {
            all_ok = false;
            continue;
        };
        if first {
            first = false;
            shapes.args = names;
        } else if names != shapes.args {
            let first: Vec<String> = shapes.args.iter().map(ToString::to_string).collect();
            diag.at(
                elem,
                format!(
                    "every shape names the same arguments in the same order as the first: ({})",
                    first.join(", ")
                ),
            );
            all_ok = false;
            continue;
        }
        if shapes.values.contains(&values) {
            diag.at(elem, "this shape is declared twice");
            all_ok = false;
            continue;
        }
        shapes.values.push(values);
    }
    all_ok.then_some(shapes)
}

/// The parts of `(a, b, ...)` (or of `(a)`), or `None` for anything else.
pub(crate) fn parenthesized(expr: &Expr) -> Option<Vec<&Expr>> {
    match expr {
        Expr::Tuple(tuple) => Some(tuple.elems.iter().collect()),
        Expr::Paren(paren) => Some(vec![&*paren.expr]),
        _ => None,
    }
}

/// One shape, `(argument = value, ...)`: its names and values in order, or `None`
/// (with every error said) where any part is wrong.
fn parse_shape(
    elem: &Expr,
    signature: Option<&WrapperSignature>,
    key: Option<&Ident>,
    diag: &mut Diagnostics,
) -> Option<(Vec<Ident>, Vec<u64>)> {
    let Some(parts) = parenthesized(elem) else {
        diag.at(
            elem,
            format!("each shape is `(argument = value, ...)`, {EXAMPLE}"),
        );
        return None;
    };
    let mut names: Vec<Ident> = Vec::new();
    let mut values: Vec<u64> = Vec::new();
    let mut shape_ok = true;
    for part in parts {
        match parse_shape_part(part, &names, signature, key, diag) {
            Some((name, value)) => {
                names.push(name);
                values.push(value);
            }
            None => shape_ok = false,
        }
    }
    shape_ok.then_some((names, values))
}

/// One part of a shape, `argument = value`, after the parts named `before`.
fn parse_shape_part(
    part: &Expr,
    before: &[Ident],
    signature: Option<&WrapperSignature>,
    key: Option<&Ident>,
    diag: &mut Diagnostics,
) -> Option<(Ident, u64)> {
    let Expr::Assign(assign) = part else {
        diag.at(part, "each part of a shape is `argument = value`");
        return None;
    };
    let name = match &*assign.left {
        Expr::Path(path) => path.path.get_ident(),
        _ => None,
    };
    let Some(name) = name else {
        diag.at(&assign.left, "expected an argument name");
        return None;
    };
    if before.contains(name) {
        diag.at(name, format!("`{name}` is given twice in this shape"));
        return None;
    }
    let value = size_literal(&assign.right, "shape values", diag)?;
    if value == 0 {
        diag.at(
            &assign.right,
            "shape values start at 1: a kernel of size 0 does nothing to time",
        );
        return None;
    }
    let max = argument_check(name, signature, key, diag)?;
    if value > max {
        diag.at(
            &assign.right,
            format!("{value} does not fit the argument `{name}` (at most {max})"),
        );
        return None;
    }
    Some((name.clone(), value))
}

/// The largest value argument `name` takes, where it is an integer data argument
/// other than the key (an error at `name` otherwise). Without a signature (it
/// failed to parse, and says why), no limit.
fn argument_check(
    name: &Ident,
    signature: Option<&WrapperSignature>,
    key: Option<&Ident>,
    diag: &mut Diagnostics,
) -> Option<u64> {
    let Some(signature) = signature else {
        return Some(u64::MAX);
    };
    if key == Some(name) {
        diag.at(
            name,
            format!("`{name}` is the key: a shape holds the other size arguments"),
        );
        return None;
    }
    match signature.find(&name.to_string()) {
        None => {
            let data: Vec<String> = signature.data().map(|a| format!("`{}`", a.ident)).collect();
            diag.at(
                name,
                format!(
                    "`{name}` is not an argument of the wrapper (arguments: {})",
                    data.join(", ")
                ),
            );
            None
        }
        Some(arg) if arg.role != ArgumentRole::Data || !is_integer(&arg.ty) => {
            diag.at(
                name,
                format!(
                    "`{name}` is not an integer size argument: a shape gives values of integer arguments"
                ),
            );
            None
        }
        Some(arg) => Some(integer_max(&arg.ty).unwrap_or(u64::MAX)),
    }
}

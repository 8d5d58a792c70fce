//! Which parameters reach nvcc, and under which names: `launch = [threads]` names
//! the parameters that only reach the launch (never a `-D`: the sweep compiles once
//! per point of the others and times every launch value on that image);
//! `define_prefix = "TUNE_"` and `defines = (block = "BLOCK_DIM")` choose the name
//! a compile-time parameter is emitted under (its name in upper case by default).

use syn::{Expr, ExprLit, Ident, Lit, LitStr};

use crate::shapes::parenthesized;
use crate::space::{Param, SOURCE_PARAM};
use crate::{Diagnostics, Entry, names};

/// How each parameter reaches the kernel, in the order of the space's parameters.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Defines {
    /// Per parameter: the `-D` name, or `None` for a launch-only parameter.
    pub names: Vec<Option<String>>,
}

impl Defines {
    /// Whether every parameter of `params` is compiled under its own name in upper
    /// case (the default: no `launch`, `define_prefix` or `defines`).
    pub fn is_plain(&self, params: &[Param]) -> bool {
        self.names.len() == params.len()
            && params
                .iter()
                .zip(&self.names)
                .all(|(p, name)| name.as_ref() == Some(&names::define(&p.name)))
    }
}

/// The options `launch`, `define_prefix` and `defines` (each optional) against the
/// declared parameters; every mistake is said at its tokens.
pub fn parse_defines(
    params: &[Param],
    launch: Option<&Entry>,
    prefix: Option<&Entry>,
    explicit: Option<&Entry>,
    diag: &mut Diagnostics,
) -> Defines {
    let declared = |ident: &Ident, option: &str, diag: &mut Diagnostics| {
        declared_param(params, ident, option, diag)
    };
    let mut launch_only = vec![false; params.len()];
    if let Some(entry) = launch {
        for ident in idents(&entry.value, "launch", "`launch = [threads, rows]`", diag) {
            if let Some(index) = declared(ident, "launch", diag) {
                if launch_only[index] {
                    diag.at(ident, format!("`launch` names `{ident}` twice"));
                }
                launch_only[index] = true;
            }
        }
    }
    let prefix = prefix
        .and_then(|entry| c_identifier(&entry.value, "define_prefix", true, diag))
        .map(|lit| lit.value())
        .unwrap_or_default();
    let mut names: Vec<Option<String>> = params
        .iter()
        .zip(&launch_only)
        .map(|(p, launch)| (!launch).then(|| format!("{prefix}{}", names::define(&p.name))))
        .collect();
    if let Some(entry) = explicit {
        let example = "`defines = (block = \"BLOCK_DIM\")`";
        let Some(parts) = parenthesized(&entry.value) else {
            diag.at(
                &entry.value,
                format!("`defines` gives parameters their define's name, e.g. {example}"),
            );
            return Defines { names };
        };
        for part in parts {
            let Expr::Assign(assign) = part else {
                diag.at(
                    part,
                    format!("each part of `defines` is `parameter = \"NAME\"`, e.g. {example}"),
                );
                continue;
            };
            let ident = match &*assign.left {
                Expr::Path(path) => path.path.get_ident(),
                _ => None,
            };
            let Some(ident) = ident else {
                diag.at(&assign.left, "expected a parameter's name");
                continue;
            };
            let Some(index) = declared(ident, "defines", diag) else {
                continue;
            };
            let Some(name) = c_identifier(&assign.right, "defines", false, diag) else {
                continue;
            };
            if launch_only[index] {
                diag.at(
                    ident,
                    format!("`{ident}` is launch-only (`launch`): it reaches no define to name"),
                );
                continue;
            }
            names[index] = Some(name.value());
        }
    }
    // Parameter names are unique, so only an explicit name can clash.
    if let Some(entry) = explicit {
        say_clashes(params, &names, entry, diag);
    }
    Defines { names }
}

/// The index of the parameter `ident` names in option `option`, or `None`, said
/// with the kernel's parameters.
fn declared_param(
    params: &[Param],
    ident: &Ident,
    option: &str,
    diag: &mut Diagnostics,
) -> Option<usize> {
    let found = params
        .iter()
        .position(|p| *ident == p.name && p.name != SOURCE_PARAM);
    if found.is_none() {
        let known: Vec<String> = params
            .iter()
            .filter(|p| p.name != SOURCE_PARAM)
            .map(|p| format!("`{}`", p.name))
            .collect();
        diag.at(
            ident,
            format!(
                "`{option}` names `{ident}`, which is not a parameter of this kernel \
                 (parameters: {})",
                if known.is_empty() {
                    "none".to_string()
                } else {
                    known.join(", ")
                }
            ),
        );
    }
    found
}

/// Two parameters whose explicit names (`defines`) would make one `-D`, said at
/// the option.
fn say_clashes(params: &[Param], names: &[Option<String>], entry: &Entry, diag: &mut Diagnostics) {
    for (index, name) in names.iter().enumerate() {
        let Some(name) = name else { continue };
        if let Some(other) = names[..index].iter().position(|n| n.as_ref() == Some(name)) {
            diag.at(
                &entry.value,
                format!(
                    "`{}` and `{}` would both be emitted as `-D{name}`",
                    params[other].name, params[index].name
                ),
            );
        }
    }
}

/// The identifiers of `[a, b]` or of a single `a`.
fn idents<'a>(
    value: &'a Expr,
    option: &str,
    example: &str,
    diag: &mut Diagnostics,
) -> Vec<&'a Ident> {
    let single = |expr: &'a Expr| match expr {
        Expr::Path(path) => path.path.get_ident(),
        _ => None,
    };
    let elems: Vec<&Expr> = match value {
        Expr::Array(array) => array.elems.iter().collect(),
        other => vec![other],
    };
    let mut out = Vec::new();
    for elem in elems {
        match single(elem) {
            Some(ident) => out.push(ident),
            None => diag.at(
                elem,
                format!("`{option}` lists parameters by name, e.g. {example}"),
            ),
        }
    }
    out
}

/// A string that is a C identifier (or, for a prefix, the start of one).
fn c_identifier(
    value: &Expr,
    option: &str,
    prefix: bool,
    diag: &mut Diagnostics,
) -> Option<LitStr> {
    let Expr::Lit(ExprLit {
        lit: Lit::Str(lit), ..
    }) = value
    else {
        diag.at(
            value,
            format!("`{option}` takes a string, e.g. `\"TUNE_\"`"),
        );
        return None;
    };
    let text = lit.value();
    let valid = !text.is_empty()
        && !text.starts_with(|c: char| c.is_ascii_digit())
        && text.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if valid
        && !prefix
        && let Some(why) = reserved(&text)
    {
        diag.at(
            lit,
            format!("{text:?} is {why}: a `-D{text}=...` would redefine it; choose another name"),
        );
        return None;
    }
    if valid {
        Some(lit.clone())
    } else {
        let what = if prefix {
            "the start of a C identifier"
        } else {
            "a C identifier"
        };
        diag.at(
            lit,
            format!("{text:?} is not {what} (letters, digits and `_`, not starting with a digit)"),
        );
        None
    }
}

/// C and C++ keywords and types.
const CPP_KEYWORDS: &[&str] = &[
    "alignas",
    "alignof",
    "auto",
    "bool",
    "break",
    "case",
    "catch",
    "char",
    "class",
    "const",
    "constexpr",
    "const_cast",
    "continue",
    "decltype",
    "default",
    "delete",
    "do",
    "double",
    "dynamic_cast",
    "else",
    "enum",
    "explicit",
    "export",
    "extern",
    "false",
    "float",
    "for",
    "friend",
    "goto",
    "if",
    "inline",
    "int",
    "long",
    "mutable",
    "namespace",
    "new",
    "noexcept",
    "nullptr",
    "operator",
    "private",
    "protected",
    "public",
    "register",
    "reinterpret_cast",
    "return",
    "short",
    "signed",
    "sizeof",
    "static",
    "static_assert",
    "static_cast",
    "struct",
    "switch",
    "template",
    "this",
    "throw",
    "true",
    "try",
    "typedef",
    "typeid",
    "typename",
    "union",
    "unsigned",
    "using",
    "virtual",
    "void",
    "volatile",
    "while",
    "half",
    "size_t",
    "defined",
];

/// CUDA's built-in variables.
const CUDA_BUILTINS: &[&str] = &[
    "threadIdx",
    "blockIdx",
    "blockDim",
    "gridDim",
    "warpSize",
    "clusterIdx",
    "clusterDim",
];

/// Words a define must never be named: C and C++ keywords and types, CUDA's
/// built-in variables and qualifiers, and names the implementation reserves
/// (`__CUDA_ARCH__`, anything starting with `__` or `_` and a capital).
fn reserved(name: &str) -> Option<&'static str> {
    if CPP_KEYWORDS.contains(&name) {
        Some("a C++ keyword or type")
    } else if CUDA_BUILTINS.contains(&name) {
        Some("one of CUDA's built-in variables")
    } else if name.starts_with("__")
        || (name.starts_with('_') && name[1..].starts_with(|c: char| c.is_ascii_uppercase()))
    {
        Some("a name the compiler reserves (a leading `__`, or `_` and a capital)")
    } else {
        None
    }
}

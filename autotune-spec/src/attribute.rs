//! The attribute validated into a `Spec`: every option checked, every error
//! spanned, the space enumerated.

use std::collections::BTreeMap;
use std::path::Path;

use proc_macro2::Span;
use syn::{Expr, ExprLit, Ident, Lit, LitStr, RangeLimits, Signature, Type};

use crate::above::Above;
use crate::constraint::Constraint;
use crate::defines::{Defines, parse_defines};
use crate::image;
use crate::inputs::Inputs;
use crate::shapes::{Shapes, parenthesized, parse_shapes, size_literal};
use crate::signature::{ArgumentRole, WrapperSignature, integer_max, is_integer, is_signed};
use crate::source::SourceSet;
use crate::space::{Param, Point, Space};
use crate::{AttrArgs, Diagnostics, Entry, names};

/// The option names of `#[autotune]`; every other name declares a parameter.
pub const OPTIONS: [&str; 20] = [
    "source",
    "entry",
    "key",
    "sizes",
    "case",
    "default",
    "where",
    "fallback",
    "flags",
    "max_points",
    "max_sizes",
    "above",
    "inputs",
    "vendor",
    "vendor_points",
    "shapes",
    "launch",
    "define_prefix",
    "defines",
    "like",
];

/// The most points a space may have before its constraint (each is compiled with
/// nvcc), unless `max_points = N` says more.
pub const DEFAULT_MAX_POINTS: u64 = 4096;

/// The most `max_points` may allow: nvcc runs once a point, and the build holds
/// every point in memory (`max_points = 18446744073709551615` aborted the compiler
/// on a 16 GiB allocation).
pub const MAX_POINTS_CEILING: u64 = 65_536;

/// The largest size a kernel may be timed at: tables record sizes as JSON numbers,
/// exact up to 2^53.
pub const MAX_SIZE: u64 = 1 << 53;

pub use crate::space::SOURCE_PARAM;

/// The most points of its own a vendor may be timed at per size
/// (`vendor_points = N`): each is checked and timed at every size.
pub const MAX_VENDOR_POINTS: u32 = 32;

/// The most sources (incumbent and candidates) a kernel may list.
pub const MAX_SOURCES: usize = 16;

/// The most key values a kernel may time at, unless `max_sizes = N` says more.
pub const DEFAULT_MAX_SIZES: u64 = 64;

/// A validated `#[autotune]` attribute together with the wrapper it annotates.
#[derive(Debug, Clone)]
pub struct Spec {
    pub fn_name: Ident,
    /// The CUDA source, relative to the crate root: the incumbent implementation.
    /// For a constant (`source = candle_kernels::REDUCE`), the path as text.
    pub source: LitStr,
    /// The Rust constant that holds the compiled image, where `source` names one:
    /// the bytes the library loads, read by the build script as a
    /// build-dependency.
    pub constant: Option<syn::Path>,
    /// Candidate implementations of the same kernels (`source = [incumbent,
    /// candidate, ...]`): the space gains a first parameter `source` (0 is the
    /// incumbent) and every point is compiled from the source it names.
    pub candidates: Vec<LitStr>,
    /// The kernels' symbols in the source (`extern "C" __global__`): one, or several
    /// that the wrapper launches in turn (the first is `Variant::function()`).
    pub entries: Vec<String>,
    pub key: Ident,
    pub key_ty: Type,
    /// Key values the sweep times at, strictly ascending.
    pub sizes: Vec<u64>,
    pub space: Space,
    /// The declared default, or the first point of the space.
    pub default: Point,
    pub case: syn::Type,
    pub fallback: Option<Ident>,
    /// A vendor library's kernel as the fallback (`vendor = CublasGemm`): a type
    /// implementing `autotune_runtime::Vendor` with an inherent `launch` taking the
    /// wrapper's arguments without the variant.
    pub vendor: Option<Type>,
    /// How many of the vendor's own points (its ranked algorithms) the sweep
    /// times at each size (`vendor_points = N`, with `vendor`); 0 without.
    pub vendor_points: u32,
    /// The other size arguments the kernel is tuned over a set of values of.
    pub shapes: Shapes,
    pub flags: Vec<String>,
    /// Keys above the largest size (`above = ...`, default `measure`).
    pub above: Above,
    /// How the kernel finds its inputs when called (`inputs = ...`, default `cold`).
    pub inputs: Inputs,
    /// The largest value of the key's type (what the probe above the top may reach).
    pub key_max: u64,
    pub signature: WrapperSignature,
    /// Which parameters reach nvcc, and as what (`launch`, `define_prefix`,
    /// `defines`).
    pub defines: Defines,
}

impl Spec {
    /// Validates `args` against the wrapper's signature. With `manifest_dir`, the CUDA
    /// source is read too: it must exist and mention the entry and every parameter.
    /// Every problem found is reported, each on the tokens at fault.
    pub fn parse(
        args: &AttrArgs,
        sig: &Signature,
        attr_span: Span,
        manifest_dir: Option<&Path>,
    ) -> syn::Result<Self> {
        let mut diag = Diagnostics::new();
        let signature = WrapperSignature::analyze(sig, &mut diag);
        // Read first: a parameter's range is checked against it before it is expanded.
        let (max_points, max_sizes) = limits(args, &mut diag);
        let (options, mut params) = sort_entries(args, max_points, &mut diag);

        let [source_entry, key_entry, sizes_entry, case_entry] =
            required(&options, REQUIRED, attr_span, &mut diag);

        let sources = source_entry.and_then(|e| parse_sources(&e.value, &mut diag));
        let constant = source_entry.and_then(|e| constant_source(&e.value));
        if let Some(sources) = sources.as_ref().filter(|s| s.len() > 1) {
            params.insert(0, source_param(sources.len()));
        }
        let entries = match options.get("entry") {
            Some(e) => parse_entries(&e.value, &mut diag),
            None => Some(vec![sig.ident.to_string()]),
        };
        let sizes = sizes_entry.and_then(|e| parse_sizes(&e.value, max_sizes, &mut diag));
        let case = case_entry.and_then(|e| parse_case(&e.value, &mut diag));
        let vendor = parse_vendor(&options, &mut diag);
        let vendor_points = parse_vendor_points(&options, &mut diag);
        let fallback = parse_fallback(&options, sig, &mut diag);
        let above = parse_above(&options, &mut diag);
        let inputs = parse_inputs(&options, &mut diag);
        let flags = parse_flags_option(&options, &mut diag);
        let key = key_entry.and_then(|e| parse_key(&e.value, signature.as_ref(), sig, &mut diag));
        if let (Some(sizes), Some(entry), Some((key, key_ty))) = (&sizes, sizes_entry, &key) {
            check_sizes_fit_key(sizes, &entry.value, key, key_ty, above, &mut diag);
        }
        check_wrapper_name(&sig.ident, &mut diag);
        let key_ident = key.as_ref().map(|(k, _)| k);
        let shapes = parse_shapes_option(&options, signature.as_ref(), key_ident, &mut diag);
        check_params_struct(signature.as_ref(), &params, attr_span, &mut diag);

        let space = build_space(params, &options, attr_span, max_points, &mut diag)?;
        let defines = parse_reach(&options, &space, sources.as_deref(), args, &mut diag);
        let default = match options.get("default") {
            Some(e) => parse_default(&e.value, &space, &mut diag),
            None => space.points().into_iter().next(),
        };
        if let (Some(dir), Some(sources), Some(entry_names)) = (manifest_dir, &sources, &entries) {
            let checked = Checked {
                space: &space,
                defines: &defines,
                attr: args,
            };
            let entry_option = options.get("entry").copied();
            check_sources(dir, sources, entry_names, entry_option, &checked, &mut diag);
        }

        let parts = Parts {
            signature,
            sources,
            constant,
            entries,
            key,
            sizes,
            case,
            default,
            above,
            inputs,
            shapes,
            fallback,
            vendor,
            vendor_points,
            flags,
            space,
            defines,
        };
        parts.finish(sig, diag, attr_span)
    }

    /// The name of the generated dispatch struct (`rms_norm` -> `RmsNorm`).
    pub fn dispatch_struct(&self) -> Ident {
        Ident::new(
            &names::dispatch_struct(&self.fn_name.to_string()),
            self.fn_name.span(),
        )
    }
}

/// What [`Spec::parse`] made of each part of the attribute: `None` where the part
/// had an error (said in the diagnostics).
struct Parts {
    signature: Option<WrapperSignature>,
    sources: Option<Vec<LitStr>>,
    constant: Option<syn::Path>,
    entries: Option<Vec<String>>,
    key: Option<(Ident, Type)>,
    sizes: Option<Vec<u64>>,
    case: Option<Type>,
    default: Option<Point>,
    above: Option<Above>,
    inputs: Option<Inputs>,
    shapes: Option<Shapes>,
    fallback: Option<Ident>,
    vendor: Option<Type>,
    vendor_points: u32,
    flags: Vec<String>,
    space: Space,
    defines: Defines,
}

impl Parts {
    /// The spec, where every part parsed and nothing was said; else every error.
    fn finish(self, sig: &Signature, diag: Diagnostics, attr_span: Span) -> syn::Result<Spec> {
        let (
            Some(signature),
            Some(mut sources),
            Some(entries),
            Some((key, key_ty)),
            Some(sizes),
            Some(case),
            Some(default),
            Some(above),
            Some(inputs),
            Some(shapes),
        ) = (
            self.signature,
            self.sources,
            self.entries,
            self.key,
            self.sizes,
            self.case,
            self.default,
            self.above,
            self.inputs,
            self.shapes,
        )
        else {
            return Err(invalid(diag, attr_span));
        };
        let source = sources.remove(0);
        diag.finish(Spec {
            fn_name: sig.ident.clone(),
            source,
            constant: self.constant,
            candidates: sources,
            entries,
            key,
            sizes,
            space: self.space,
            default,
            case,
            fallback: self.fallback,
            vendor: self.vendor,
            vendor_points: self.vendor_points,
            shapes,
            flags: self.flags,
            above,
            inputs,
            key_max: integer_max(&key_ty).unwrap_or(u64::MAX),
            key_ty,
            signature,
            defines: self.defines,
        })
    }
}

/// The parameter a kernel with `count` sources (candidates) gains: which one a
/// point is compiled from.
fn source_param(count: usize) -> Param {
    Param {
        name: SOURCE_PARAM.to_string(),
        values: (0..count as u32).collect(),
    }
}

/// `max_points` and `max_sizes`, each its default where not given (or wrong).
fn limits(args: &AttrArgs, diag: &mut Diagnostics) -> (u64, u64) {
    let limit = |name: &str, default: u64, diag: &mut Diagnostics| {
        let entry = args.entries.iter().find(|e| e.name == name)?;
        match &entry.value {
            Expr::Lit(ExprLit {
                lit: Lit::Int(int), ..
            }) => int
                .base10_parse::<u64>()
                .ok()
                .filter(|n| *n > 0)
                .or_else(|| {
                    diag.at(int, format!("`{name}` is a whole number > 0"));
                    None
                }),
            other => {
                diag.at(
                    other,
                    format!("`{name}` is a whole number (default {default})"),
                );
                None
            }
        }
    };
    let max_points = limit("max_points", DEFAULT_MAX_POINTS, diag).unwrap_or(DEFAULT_MAX_POINTS);
    if max_points > MAX_POINTS_CEILING
        && let Some(entry) = args.entries.iter().find(|e| e.name == "max_points")
    {
        diag.at(
            &entry.value,
            format!(
                "`max_points` is at most {MAX_POINTS_CEILING} (nvcc runs once a point); \
                 narrow the space or search it (AUTOTUNE_STRATEGY)"
            ),
        );
    }
    let max_sizes = limit("max_sizes", DEFAULT_MAX_SIZES, diag).unwrap_or(DEFAULT_MAX_SIZES);
    (max_points.min(MAX_POINTS_CEILING), max_sizes)
}

/// `flags = [...]`, or none.
fn parse_flags_option(
    options: &BTreeMap<&'static str, &Entry>,
    diag: &mut Diagnostics,
) -> Vec<String> {
    options
        .get("flags")
        .map(|e| parse_flags(&e.value, diag))
        .unwrap_or_default()
}

/// The error of an attribute some part of which did not parse: what was said, or,
/// where nothing was, that the attribute is invalid.
fn invalid(mut diag: Diagnostics, attr_span: Span) -> syn::Error {
    if diag.is_empty() {
        diag.at_span(attr_span, "invalid #[autotune] attribute");
    }
    diag.into_error()
}

/// The options every attribute must give.
const REQUIRED: [&str; 4] = ["source", "key", "sizes", "case"];

/// `shapes = [...]`, or none (one shape, the empty one).
fn parse_shapes_option(
    options: &BTreeMap<&'static str, &Entry>,
    signature: Option<&WrapperSignature>,
    key: Option<&Ident>,
    diag: &mut Diagnostics,
) -> Option<Shapes> {
    match options.get("shapes") {
        None => Some(Shapes::default()),
        Some(entry) => parse_shapes(&entry.value, signature, key, diag),
    }
}

/// The entries of the options every attribute must give, in the order asked;
/// each one missing is said at the attribute, with a hint.
fn required<'a, const N: usize>(
    options: &BTreeMap<&'static str, &'a Entry>,
    names: [&str; N],
    attr_span: Span,
    diag: &mut Diagnostics,
) -> [Option<&'a Entry>; N] {
    names.map(|option| {
        let entry = options.get(option).copied();
        if entry.is_none() {
            diag.at_span(
                attr_span,
                format!("missing `{option} = ...`{}", hint(option)),
            );
        }
        entry
    })
}

/// The entries split into options (by name) and parameters; a name given twice, or
/// one that is neither an option nor a parameter's values, is an error.
fn sort_entries<'a>(
    args: &'a AttrArgs,
    max_points: u64,
    diag: &mut Diagnostics,
) -> (BTreeMap<&'static str, &'a Entry>, Vec<Param>) {
    let mut options: BTreeMap<&'static str, &Entry> = BTreeMap::new();
    let mut params: Vec<Param> = Vec::new();
    let mut seen: BTreeMap<String, &Ident> = BTreeMap::new();
    for entry in &args.entries {
        let name = entry.name.to_string();
        if seen.contains_key(&name) {
            diag.at(&entry.name, format!("`{name}` is given more than once"));
            continue;
        }
        seen.insert(name.clone(), &entry.name);
        if let Some(option) = OPTIONS.iter().find(|o| **o == name) {
            options.insert(option, entry);
        } else if is_param_value(&entry.value) {
            if let Some(param) = parse_param(entry, max_points, diag) {
                params.push(param);
            }
        } else {
            diag.at(
                &entry.name,
                format!(
                    "unknown option `{name}`: options are {}; a parameter takes a list \
                     `[64, 128]`, a range `1..4` / `1..=4` or one integer",
                    OPTIONS.join(", ")
                ),
            );
        }
    }
    (options, params)
}

type Options<'a> = BTreeMap<&'static str, &'a Entry>;

fn parse_case(value: &Expr, diag: &mut Diagnostics) -> Option<Type> {
    type_value(value).or_else(|| {
        diag.at(
            value,
            "`case` names a type implementing `autotune_runtime::prelude::Case`, e.g. `case = RmsNormCase`",
        );
        None
    })
}

fn parse_vendor(options: &Options<'_>, diag: &mut Diagnostics) -> Option<Type> {
    let entry = options.get("vendor")?;
    let vendor = type_value(&entry.value).or_else(|| {
        diag.at(&entry.value, "`vendor` names a type implementing `autotune_runtime::Vendor` (a library's kernel as the fallback), e.g. `vendor = CublasGemm`");
        None
    });
    if let Some(fallback) = options.get("fallback") {
        diag.at(
            &fallback.name,
            "`fallback` and `vendor` both name what owns the ranges no variant wins: give one",
        );
    }
    vendor
}

/// `vendor_points = N` (1 to [`MAX_VENDOR_POINTS`], with `vendor`); 0 without it.
fn parse_vendor_points(options: &Options<'_>, diag: &mut Diagnostics) -> u32 {
    let Some(entry) = options.get("vendor_points") else {
        return 0;
    };
    if options.get("vendor").is_none() {
        diag.at(
            &entry.name,
            "`vendor_points` times the vendor's own points: it needs `vendor = ...`",
        );
    }
    let count = match &entry.value {
        Expr::Lit(ExprLit {
            lit: Lit::Int(int), ..
        }) => int.base10_parse::<u32>().ok(),
        _ => None,
    };
    match count {
        Some(count @ 1..=MAX_VENDOR_POINTS) => count,
        _ => {
            diag.at(
                &entry.value,
                format!(
                    "`vendor_points` is how many of the vendor's ranked points the sweep times \
                     at each size: a whole number from 1 to {MAX_VENDOR_POINTS}, e.g. `vendor_points = 8`"
                ),
            );
            0
        }
    }
}

fn parse_fallback(options: &Options<'_>, sig: &Signature, diag: &mut Diagnostics) -> Option<Ident> {
    let entry = options.get("fallback")?;
    match single_ident(&entry.value) {
        Some(ident) if *ident == sig.ident => {
            diag.at(ident, "a wrapper cannot be its own fallback");
            None
        }
        Some(ident) => Some(ident.clone()),
        None => {
            diag.at(&entry.value, "`fallback` names another #[autotune] wrapper in this module, e.g. `fallback = rms_norm_plain`");
            None
        }
    }
}

fn parse_above(options: &Options<'_>, diag: &mut Diagnostics) -> Option<Above> {
    parse_keyword(
        options,
        diag,
        Keyword {
            option: "above",
            default: Above::Measure,
            parse: Above::parse,
            names: &Above::NAMES,
            says: "what keys above the largest size get",
            default_means: "measure: time the top's pick at twice the top",
        },
    )
}

fn parse_inputs(options: &Options<'_>, diag: &mut Diagnostics) -> Option<Inputs> {
    parse_keyword(
        options,
        diag,
        Keyword {
            option: "inputs",
            default: Inputs::Cold,
            parse: Inputs::parse,
            names: &Inputs::NAMES,
            says: "how the kernel finds its inputs when it is called",
            default_means: "cold: read from HBM, as a model's layer reads its weights",
        },
    )
}

/// An option whose value is one of a few words (`above = measure`).
struct Keyword<T> {
    option: &'static str,
    default: T,
    parse: fn(&str) -> Option<T>,
    names: &'static [&'static str],
    /// What the option says, for the error (`what keys above the largest size get`).
    says: &'static str,
    /// The default and what it does (`measure: time the top's pick ...`).
    default_means: &'static str,
}

/// The value of `keyword`'s option, its default where absent; an error naming the
/// words it takes where the value is none of them.
fn parse_keyword<T>(
    options: &Options<'_>,
    diag: &mut Diagnostics,
    keyword: Keyword<T>,
) -> Option<T> {
    let Some(entry) = options.get(keyword.option) else {
        return Some(keyword.default);
    };
    single_ident(&entry.value)
        .and_then(|ident| (keyword.parse)(&ident.to_string()))
        .or_else(|| {
            diag.at(
                &entry.value,
                format!(
                    "`{}` says {}: one of {} (default {})",
                    keyword.option,
                    keyword.says,
                    keyword.names.join(", "),
                    keyword.default_means
                ),
            );
            None
        })
}

/// The key argument and its type: an unsigned integer argument of the wrapper.
fn parse_key(
    value: &Expr,
    signature: Option<&WrapperSignature>,
    sig: &Signature,
    diag: &mut Diagnostics,
) -> Option<(Ident, Type)> {
    let Some(ident) = single_ident(value) else {
        diag.at(
            value,
            "`key` names an argument of the wrapper, e.g. `key = n_ctx`",
        );
        return None;
    };
    match signature?.find(&ident.to_string()) {
        None => {
            let data: Vec<String> = signature?
                .data()
                .map(|a| format!("`{}`", a.ident))
                .collect();
            diag.at(
                ident,
                format!(
                    "`{ident}` is not an argument of `{}` (arguments: {})",
                    sig.ident,
                    data.join(", ")
                ),
            );
            None
        }
        Some(arg) if arg.role != ArgumentRole::Data => {
            diag.at(
                ident,
                format!("`{ident}` is the stream or the variant; the key must be a size argument"),
            );
            None
        }
        Some(arg) if !is_integer(&arg.ty) => {
            diag.at(&arg.ty, format!("the key `{ident}` must be a primitive integer (usize, u32, u64, ...) so that dispatch can `match` on ranges of it"));
            None
        }
        Some(arg) if is_signed(&arg.ty) => {
            diag.at(&arg.ty, format!("the key `{ident}` must be an unsigned integer (usize, u32, u64, ...): dispatch matches on it as u64, where a negative key would land in the top range"));
            None
        }
        Some(arg) => Some((ident.clone(), arg.ty.clone())),
    }
}

/// Every size fits the key's type and a table's exact numbers, and twice the top
/// fits where `above = measure` times there.
fn check_sizes_fit_key(
    sizes: &[u64],
    value: &Expr,
    key: &Ident,
    key_ty: &Type,
    above: Option<Above>,
    diag: &mut Diagnostics,
) {
    let (Some(max), Expr::Array(array)) = (integer_max(key_ty), value) else {
        return;
    };
    let key_ty = quote::ToTokens::to_token_stream(key_ty);
    let top = sizes.iter().max().copied().unwrap_or(0);
    if above == Some(Above::Measure)
        && top <= max
        && top.checked_mul(2).is_none_or(|twice| twice > max)
        && let Some(elem) = array
            .elems
            .iter()
            .zip(sizes)
            .find(|(_, s)| **s == top)
            .map(|(e, _)| e)
    {
        diag.at(
            elem,
            format!(
                "`above = measure` (the default) times the top's pick at twice the largest \
                 size, and 2 x {top} does not fit the key `{key}: {key_ty}`: say `above = extend` or \
                 `above = incumbent`"
            ),
        );
    }
    for (size, elem) in sizes.iter().zip(&array.elems) {
        if *size > MAX_SIZE {
            diag.at(
                elem,
                format!("{size} is larger than any size a table records exactly (at most 2^53)"),
            );
        } else if *size > max {
            diag.at(
                elem,
                format!(
                    "{size} does not fit the key `{key}: {key_ty}` (at most {max}): the sweep \
                     could not call the wrapper with it"
                ),
            );
        }
    }
}

/// A wrapper taking `Variant<()>` declares no parameter.
fn check_params_struct(
    signature: Option<&WrapperSignature>,
    params: &[Param],
    attr_span: Span,
    diag: &mut Diagnostics,
) {
    let unit_params = signature.and_then(|s| s.variant()).map(|v| &v.role)
        == Some(&ArgumentRole::Variant { params: None });
    if unit_params && let Some(first) = params.first() {
        diag.at_span(
            attr_span,
            format!("the wrapper takes `Variant<()>` but the attribute declares parameter `{}`: name a params struct, e.g. `Variant<MyParams>`", first.name),
        );
    }
}

/// The space of `params` under the constraint (`where`): at most `max_points`
/// before it, and at least one point after it.
fn build_space(
    params: Vec<Param>,
    options: &Options<'_>,
    attr_span: Span,
    max_points: u64,
    diag: &mut Diagnostics,
) -> syn::Result<Space> {
    let names: Vec<String> = params.iter().map(|p| p.name.clone()).collect();
    if let Some(entry) = options.get("flags") {
        check_flags(&entry.value, &names, diag);
    }
    check_slug_length(&params, attr_span, diag);
    let constraint = options
        .get("where")
        .and_then(|e| parse_constraint(&e.value, &names, diag));
    let count = params
        .iter()
        .fold(1u128, |n, p| n.saturating_mul(p.values.len() as u128));
    if count > u128::from(max_points) {
        diag.at_span(
            attr_span,
            format!(
                "the space has {count} points before its constraint: at most {max_points} are \
                 compiled and checked (nvcc runs once a point); `max_points = {count}` allows them"
            ),
        );
        return Err(std::mem::take(diag).into_error());
    }
    let space = Space { params, constraint };
    let product = space.product();
    let mut any_kept = false;
    let mut eval_failed = false;
    for (point, verdict) in &product {
        match verdict {
            Ok(keep) => any_kept |= keep,
            Err(error) => {
                eval_failed = true;
                if let Some(e) = options.get("where") {
                    diag.at(
                        &e.value,
                        format!(
                            "the constraint cannot be evaluated at {}: {error}",
                            space.point_name(point)
                        ),
                    );
                }
                break;
            }
        }
    }
    if !product.is_empty()
        && !any_kept
        && !eval_failed
        && let Some(e) = options.get("where")
    {
        diag.at(&e.value, "the constraint removes every point of the space");
    }
    Ok(space)
}

fn hint(option: &str) -> &'static str {
    match option {
        "source" => {
            ": the CUDA file, relative to the crate root, e.g. `source = \"kernels/rmsnorm.cu\"`"
        }
        "key" => ": the size argument dispatch selects on, e.g. `key = n_rows`",
        "sizes" => ": the key values to time, e.g. `sizes = [1k, 8k, 64k]`",
        "case" => {
            ": the type that makes inputs and checks results for the sweep, e.g. `case = RmsNormCase`"
        }
        _ => "",
    }
}

fn is_param_value(value: &Expr) -> bool {
    matches!(
        value,
        Expr::Array(_)
            | Expr::Range(_)
            | Expr::Lit(ExprLit {
                lit: Lit::Int(_),
                ..
            })
    )
}

fn parse_param(entry: &Entry, max_points: u64, diag: &mut Diagnostics) -> Option<Param> {
    let name = param_name(entry, diag)?;
    let values = param_values(&name, &entry.value, max_points, diag)?;
    Some(Param { name, values })
}

/// A parameter's name, where it can be a field, a `-D` define and a part of a file
/// name.
fn param_name(entry: &Entry, diag: &mut Diagnostics) -> Option<String> {
    let name = entry.name.to_string();
    let valid_name = name.starts_with(|c: char| c.is_ascii_lowercase())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    if !valid_name {
        diag.at(
            &entry.name,
            format!(
                "parameter names are lower snake case (`{name}` becomes a field and `-D{}`)",
                names::define(&name)
            ),
        );
        return None;
    }
    if names::is_keyword(&name) {
        diag.at(
            &entry.name,
            format!(
                "`{name}` is a Rust keyword and cannot name the params struct's field: rename \
                 the parameter (`{name}_`, `kind`, `mode`)"
            ),
        );
        return None;
    }
    if names::is_standard_macro(&names::define(&name)) {
        diag.at(
            &entry.name,
            format!(
                "`{name}` would become `-D{}`, a macro the C and CUDA headers define: rename \
                 the parameter",
                names::define(&name)
            ),
        );
        return None;
    }
    if name.len() > names::MAX_PARAM_NAME {
        diag.at(
            &entry.name,
            format!(
                "a parameter name has at most {} characters (this one has {}): it is part of \
                 every compiled file's name",
                names::MAX_PARAM_NAME,
                name.len()
            ),
        );
        return None;
    }
    Some(name)
}

/// A parameter's values: a list, a bounded range (counted before it is expanded)
/// or one value.
fn param_values(
    name: &str,
    value: &Expr,
    max_points: u64,
    diag: &mut Diagnostics,
) -> Option<Vec<u32>> {
    let values = match value {
        Expr::Array(array) => {
            if array.elems.is_empty() {
                diag.at(
                    array,
                    format!("`{name}` has no values: the space would be empty"),
                );
                return None;
            }
            let mut values = Vec::new();
            for elem in &array.elems {
                let value = param_int(elem, diag)?;
                if values.contains(&value) {
                    diag.at(elem, format!("`{value}` appears twice in `{name}`"));
                    return None;
                }
                values.push(value);
            }
            values
        }
        Expr::Range(range) => {
            let (Some(start), Some(end)) = (&range.start, &range.end) else {
                diag.at(
                    range,
                    format!("`{name}` needs a bounded range such as `1..4` or `1..=4`"),
                );
                return None;
            };
            let (start, end) = (param_int(start, diag)?, param_int(end, diag)?);
            // Counted before it is expanded: `0..=4294967295` is four billion values.
            let count = match range.limits {
                RangeLimits::HalfOpen(_) => u64::from(end).saturating_sub(u64::from(start)),
                RangeLimits::Closed(_) => (u64::from(end) + 1).saturating_sub(u64::from(start)),
            };
            if count > max_points {
                diag.at(
                    range,
                    format!(
                        "`{name}` has {count} values: a space has at most {max_points} points \
                         (nvcc runs once a point); `max_points = N` raises the limit"
                    ),
                );
                return None;
            }
            let values: Vec<u32> = match range.limits {
                RangeLimits::HalfOpen(_) => (start..end).collect(),
                RangeLimits::Closed(_) => (start..=end).collect(),
            };
            if values.is_empty() {
                diag.at(range, format!("`{name}` is an empty range: the space would be empty (ranges are half-open, as in Rust; `1..=4` includes 4)"));
                return None;
            }
            values
        }
        single => vec![param_int(single, diag)?],
    };
    Some(values)
}

fn param_int(expr: &Expr, diag: &mut Diagnostics) -> Option<u32> {
    match expr {
        Expr::Lit(ExprLit {
            lit: Lit::Int(int), ..
        }) if int.suffix().is_empty() => match int.base10_parse::<u32>() {
            Ok(value) => Some(value),
            Err(_) => {
                diag.at(int, "parameter values are integers from 0 to 4294967295");
                None
            }
        },
        other => {
            diag.at(
                other,
                "parameter values are integer literals without suffix",
            );
            None
        }
    }
}

/// The key values to time: at least one, strictly ascending, at most `max_sizes`.
fn parse_sizes(value: &Expr, max_sizes: u64, diag: &mut Diagnostics) -> Option<Vec<u64>> {
    let Expr::Array(array) = value else {
        diag.at(value, "`sizes` is a list of key values, e.g. `sizes = [1k, 4k, 128k]` (k = 1024, m = 1024 * 1024)");
        return None;
    };
    if array.elems.is_empty() {
        diag.at(
            array,
            "`sizes` is empty: the sweep needs at least one key value to time",
        );
        return None;
    }
    let mut sizes: Vec<u64> = Vec::new();
    for elem in &array.elems {
        let size = size_literal(elem, "sizes", diag)?;
        if size == 0 {
            diag.at(elem, "sizes start at 1: there is nothing to time at 0");
            return None;
        }
        if let Some(&last) = sizes.last()
            && size <= last
        {
            diag.at(
                elem,
                format!("sizes must be strictly ascending: {size} follows {last}"),
            );
            return None;
        }
        sizes.push(size);
    }
    if sizes.len() as u64 > max_sizes {
        diag.at(
            value,
            format!(
                "{} sizes: a kernel is timed at {max_sizes} at most (each size times every \
                 point); `max_sizes = {}` allows these",
                sizes.len(),
                sizes.len()
            ),
        );
    }
    Some(sizes)
}

/// The string form of `where` under the unquoted form's limits, checked before it
/// is parsed: a thousand nested parentheses or a 20 000-term sum in the string
/// overflowed the compiler's stack (the unquoted form is checked token by token).
fn where_text_fits(literal: &syn::LitStr) -> syn::Result<()> {
    use crate::pairs::{MAX_DEPTH, MAX_WHERE_TOKENS};
    let text = literal.value();
    // A token is at least one character, and most are one or two.
    if text.len() > 4 * MAX_WHERE_TOKENS {
        return Err(syn::Error::new(
            literal.span(),
            format!("`where` is longer than {} characters", 4 * MAX_WHERE_TOKENS),
        ));
    }
    let (mut depth, mut deepest) = (0usize, 0usize);
    for c in text.chars() {
        match c {
            '(' | '[' | '{' => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            ')' | ']' | '}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    if deepest > MAX_DEPTH {
        return Err(syn::Error::new(
            literal.span(),
            format!("`where` nests brackets deeper than {MAX_DEPTH}"),
        ));
    }
    let tokens = text
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|w| !w.is_empty())
        .count()
        + text
            .chars()
            .filter(|c| c.is_ascii_punctuation() && *c != '_')
            .count();
    if tokens > MAX_WHERE_TOKENS {
        return Err(syn::Error::new(
            literal.span(),
            format!("`where` is longer than {MAX_WHERE_TOKENS} tokens"),
        ));
    }
    Ok(())
}

fn parse_constraint(value: &Expr, names: &[String], diag: &mut Diagnostics) -> Option<Constraint> {
    let result = match value {
        Expr::Lit(ExprLit {
            lit: Lit::Str(text),
            ..
        }) => match where_text_fits(text).and_then(|()| text.parse::<Expr>()) {
            Ok(expr) => Constraint::compile(&expr, names)
                .map_err(|e| syn::Error::new(text.span(), format!("in `where`: {e}"))),
            Err(e) => Err(syn::Error::new(
                text.span(),
                format!("`where` is not an expression: {e}"),
            )),
        },
        expr => Constraint::compile(expr, names),
    };
    result.map_err(|error| diag.push(error)).ok()
}

/// One `parameter = value` of `default`, put into `values`; `false` where it is not
/// right (said at its tokens).
fn default_part(
    elem: &Expr,
    space: &Space,
    values: &mut [Option<u32>],
    diag: &mut Diagnostics,
) -> bool {
    let Expr::Assign(assign) = elem else {
        diag.at(elem, "each part of `default` is `parameter = value`");
        return false;
    };
    let Some(name) = single_ident(&assign.left) else {
        diag.at(&assign.left, "expected a parameter name");
        return false;
    };
    let Some(index) = space.params.iter().position(|p| *name == p.name) else {
        diag.at(
            name,
            format!(
                "`{name}` is not a parameter of this kernel (parameters: {})",
                space.names().join(", ")
            ),
        );
        return false;
    };
    if values[index].is_some() {
        diag.at(name, format!("`{name}` is given twice in `default`"));
        return false;
    }
    let Some(value) = param_int(&assign.right, diag) else {
        return false;
    };
    if !space.params[index].values.contains(&value) {
        let allowed: Vec<String> = space.params[index]
            .values
            .iter()
            .map(u32::to_string)
            .collect();
        diag.at(
            &assign.right,
            format!(
                "the default is outside the space: `{name} = {value}` is not one of [{}]",
                allowed.join(", ")
            ),
        );
        values[index] = Some(value);
        return false;
    }
    values[index] = Some(value);
    true
}

fn parse_default(value: &Expr, space: &Space, diag: &mut Diagnostics) -> Option<Point> {
    let Some(elems) = parenthesized(value) else {
        diag.at(
            value,
            "`default` is a point, e.g. `default = (block = 128, stages = 2)`",
        );
        return None;
    };
    let mut values: Vec<Option<u32>> = vec![None; space.params.len()];
    let mut ok = true;
    for elem in elems {
        ok &= default_part(elem, space, &mut values, diag);
    }
    // With candidate sources, the default is the incumbent's unless it says otherwise.
    if space.params.first().is_some_and(|p| p.name == SOURCE_PARAM) && values[0].is_none() {
        values[0] = Some(0);
    }
    let missing: Vec<&str> = space
        .params
        .iter()
        .zip(&values)
        .filter(|(_, v)| v.is_none())
        .map(|(p, _)| p.name.as_str())
        .collect();
    if ok && !missing.is_empty() {
        diag.at(
            value,
            format!(
                "`default` must give every parameter; missing: {}",
                missing.join(", ")
            ),
        );
        return None;
    }
    if !ok {
        return None;
    }
    let point = Point(values.into_iter().flatten().collect());
    if !space.contains(&point) {
        diag.at(
            value,
            format!(
                "the default {} is excluded by the `where` constraint",
                space.point_name(&point)
            ),
        );
        return None;
    }
    Some(point)
}

/// What the sources are checked against: the space, how its parameters reach nvcc,
/// and the attribute (to point at a parameter's tokens).
struct Checked<'a> {
    space: &'a Space,
    defines: &'a Defines,
    attr: &'a AttrArgs,
}

/// Every source must exist and mention every entry; every compile-time parameter's
/// define must appear in at least one of them (or the headers they include), and
/// none may declare it (a `-D` would rewrite the declaration).
fn check_sources(
    dir: &Path,
    sources: &[LitStr],
    entries: &[String],
    entry_option: Option<&Entry>,
    checked: &Checked<'_>,
    diag: &mut Diagnostics,
) {
    let mut sets = Vec::new();
    for source in sources {
        // A constant is read by the build script (a build-dependency), which
        // checks its symbols there.
        if image::is_constant(&source.value()) {
            continue;
        }
        let path = match image::resolve_here(dir, &source.value()) {
            Ok(path) => path,
            // Set for the build script (cargo's `DEP_*`), which checks it there.
            Err(image::Unresolved::Unset(_)) => continue,
            // Malformed: said when the attribute was parsed.
            Err(image::Unresolved::Malformed) => continue,
        };
        if image::precompiled(&source.value()).is_some() {
            check_image(&path, source, entries, entry_option, sources.len(), diag);
            continue;
        }
        let set = match SourceSet::load(&path) {
            Ok(set) => set,
            Err(error) => {
                diag.at(
                    source,
                    format!("cannot read CUDA source {}: {error}", path.display()),
                );
                return;
            }
        };
        for entry in entries {
            if !set.mentions(entry) {
                let message = format!(
                    "`{entry}` does not appear in {}: name the kernel's symbol with `entry = \"...\"`",
                    source.value()
                );
                missing_entry(diag, entry_option, sources.len(), source, message);
            }
        }
        sets.push(set);
    }
    check_defines(dir, sources, &sets, checked, diag);
}

/// Every compile-time parameter's define appears in one of the sources' `sets`
/// and none declares it; a launch-only parameter's default define is read by none.
fn check_defines(
    dir: &Path,
    sources: &[LitStr],
    sets: &[SourceSet],
    checked: &Checked<'_>,
    diag: &mut Diagnostics,
) {
    let shown: Vec<String> = sources.iter().map(LitStr::value).collect();
    let params = checked.space.params.iter().zip(&checked.defines.names);
    for (param, define) in params.filter(|(p, _)| p.name != SOURCE_PARAM) {
        let Some(e) = checked.attr.entries.iter().find(|e| e.name == param.name) else {
            continue;
        };
        // A launch-only parameter reaches no define: a source that expects one (a
        // default the `-D` would replace) compiles every variant with its default.
        let Some(define) = define else {
            let define = names::define(&param.name);
            if let Some((file, line)) = sets.iter().find_map(|set| set.default_of(&define)) {
                let shown_file = file.strip_prefix(dir).unwrap_or(file).display();
                diag.at(
                    &e.name,
                    format!(
                        "`{}` is launch-only (`launch`), but {shown_file}:{line} reads `{define}`                          (a default for its `-D`): every variant would compile with that                          default. Drop it from `launch`, or emit another name",
                        param.name
                    ),
                );
            }
            continue;
        };
        if !sets.iter().any(|set| set.mentions(define)) {
            diag.at(&e.name, format!("parameter `{}` is never used: `{define}` does not appear in {} or the headers it includes; a parameter that only reaches the launch is declared `launch = [{}]`", param.name, shown.join(" or "), param.name));
        }
        if let Some((file, line, text)) = sets.iter().find_map(|set| set.declaration_of(define)) {
            let shown_file = file.strip_prefix(dir).unwrap_or(file).display();
            diag.at(
                &e.name,
                format!(
                    "`-D{define}` (parameter `{}`) would rewrite what {shown_file}:{line} declares: \
                     `{text}`; emit another name (`defines = ({} = \"...\")` or \
                     `define_prefix = \"...\"`), or, if it only reaches the launch, \
                     `launch = [{}]`",
                    param.name, param.name, param.name
                ),
            );
        }
    }
}

/// How each parameter reaches the kernel (`launch`, `define_prefix`, `defines`),
/// checked against sources that are already compiled.
fn parse_reach(
    options: &BTreeMap<&str, &Entry>,
    space: &Space,
    sources: Option<&[LitStr]>,
    args: &AttrArgs,
    diag: &mut Diagnostics,
) -> Defines {
    let [launch, prefix, named] =
        ["launch", "define_prefix", "defines"].map(|o| options.get(o).copied());
    let defines = parse_defines(&space.params, launch, prefix, named, diag);
    if let Some(sources) = sources {
        let flags = options.get("flags").copied();
        check_precompiled(sources, space, &defines, args, flags, diag);
    }
    defines
}

/// Says that an entry is missing from `source` (one of `count`): on `entry = ...`
/// where it was written and there is one source, else on the source.
fn missing_entry(
    diag: &mut Diagnostics,
    entry_option: Option<&Entry>,
    count: usize,
    source: &LitStr,
    message: String,
) {
    match entry_option {
        Some(option) if count == 1 => diag.at(&option.value, message),
        _ => diag.at(source, message),
    }
}

/// A precompiled image must exist and hold every entry's symbol.
fn check_image(
    path: &Path,
    source: &LitStr,
    entries: &[String],
    entry_option: Option<&Entry>,
    count: usize,
    diag: &mut Diagnostics,
) {
    let bytes = match crate::guarded::read::read(path, crate::guarded::read::MAX_SOURCE_BYTES) {
        Ok(bytes) => bytes,
        Err(error) => {
            diag.at(
                source,
                format!("cannot read the kernel image {}: {error}", path.display()),
            );
            return;
        }
    };
    for entry in entries {
        let found = bytes
            .windows(entry.len().max(1))
            .any(|w| w == entry.as_bytes());
        if !found {
            let message = format!(
                "`{entry}` is not a symbol of {}: name the kernel's symbol with `entry = \"...\"` \
                 (as the image spells it, mangled for a C++ kernel)",
                source.value()
            );
            missing_entry(diag, entry_option, count, source, message);
        }
    }
}

/// A source path that starts with `$` names a variable. With a precompiled source
/// (PTX, a cubin, a fatbin) nothing is compiled: every parameter must reach the
/// launch only, and there are no nvcc flags to give.
fn check_precompiled(
    sources: &[LitStr],
    space: &Space,
    defines: &Defines,
    attr: &AttrArgs,
    flags: Option<&Entry>,
    diag: &mut Diagnostics,
) {
    for source in sources {
        let path = source.value();
        if path.starts_with('$') && image::variable_of(&path).is_none() {
            diag.at(source, image::Unresolved::Malformed.to_string());
        }
    }
    let Some(image) = sources.iter().find(|s| image::is_image(&s.value())) else {
        return;
    };
    let image = image.value();
    for (param, define) in space.params.iter().zip(&defines.names) {
        if param.name == SOURCE_PARAM || define.is_none() {
            continue;
        }
        if let Some(e) = attr.entries.iter().find(|e| e.name == param.name) {
            diag.at(
                &e.name,
                format!(
                    "parameter `{}` would be compiled in, but {image} is already compiled: \
                     declare it `launch = [{}]` (it then reaches the launch only)",
                    param.name, param.name
                ),
            );
        }
    }
    if let Some(flags) = flags {
        diag.at(
            &flags.name,
            format!("`flags` go to nvcc, which never sees {image} (it is already compiled)"),
        );
    }
}

/// `source = "k.cu"`, or `source = ["k.cu", "k_v2.cu"]`: the incumbent, then its
/// candidates, each once.
fn parse_sources(value: &Expr, diag: &mut Diagnostics) -> Option<Vec<LitStr>> {
    if let Some(path) = constant_source(value) {
        return Some(vec![LitStr::new(
            &path_text(&path),
            syn::spanned::Spanned::span(&path),
        )]);
    }
    let Expr::Array(array) = value else {
        if let Expr::Lit(ExprLit {
            lit: Lit::Str(source),
            ..
        }) = value
        {
            return Some(vec![source.clone()]);
        }
        diag.at(value, SOURCE_FORMS);
        return None;
    };
    if array.elems.is_empty() || array.elems.len() > MAX_SOURCES {
        diag.at(
            array,
            format!(
                "`source` lists the incumbent CUDA file, then up to {} candidates",
                MAX_SOURCES - 1
            ),
        );
        return None;
    }
    let mut sources: Vec<LitStr> = Vec::new();
    for elem in &array.elems {
        if constant_source(elem).is_some() {
            diag.at(
                elem,
                "a constant image is the only source of its kernel: candidates are \
                 CUDA files (`source = [\"k.cu\", \"k_v2.cu\"]`)",
            );
            return None;
        }
        let source = lit_str(elem, "each source", diag)?;
        if sources.iter().any(|s| s.value() == source.value()) {
            diag.at(elem, format!("`{}` is listed twice", source.value()));
            return None;
        }
        sources.push(source);
    }
    Some(sources)
}

/// What `source` may be, said where it is something else.
const SOURCE_FORMS: &str = "`source` takes a string literal (a CUDA file or a compiled image, \
     `\"kernels/k.cu\"`) or the path of a constant that holds a compiled image \
     (`candle_kernels::REDUCE`)";

/// `source = candle_kernels::REDUCE`: a path of two or more segments, no generics.
fn constant_source(value: &Expr) -> Option<syn::Path> {
    let Expr::Path(expr) = value else {
        return None;
    };
    let path = &expr.path;
    let plain = expr.qself.is_none()
        && path.segments.len() > 1
        && path.segments.iter().all(|s| s.arguments.is_none());
    plain.then(|| path.clone())
}

/// A path as `a::b::C` (a leading `::` dropped).
fn path_text(path: &syn::Path) -> String {
    let segments: Vec<String> = path.segments.iter().map(|s| s.ident.to_string()).collect();
    segments.join("::")
}

/// A wrapper's name must map to generated names no other wrapper's can: lower
/// snake case, each `_` between two words that start with a letter (`probe` and
/// `probe_`, or `gemm2` and `gemm_2`, would both make `Probe` / `Gemm2`).
/// A wrapper name that keeps the rule: digits joined to the word before them,
/// empty words dropped, lower case (`layer_norm_768` -> `layer_norm768`).
fn suggestion(name: &str) -> String {
    let mut out = String::new();
    for word in name.split('_').filter(|w| !w.is_empty()) {
        let word = word.to_ascii_lowercase();
        if !out.is_empty() && !word.starts_with(|c: char| c.is_ascii_digit()) {
            out.push('_');
        }
        out.push_str(&word);
    }
    out
}

fn check_wrapper_name(ident: &Ident, diag: &mut Diagnostics) {
    let name = ident.to_string();
    let name = name.strip_prefix("r#").unwrap_or(&name);
    let words: Vec<&str> = name.split('_').collect();
    let regular = words
        .iter()
        .all(|w| w.starts_with(|c: char| c.is_ascii_lowercase()))
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    if !regular {
        // The rule the name breaks, said as such (`layer_norm_768` is lower snake
        // case: its fault is the word that starts with a digit).
        let why = if let Some(word) = words
            .iter()
            .find(|w| w.starts_with(|c: char| c.is_ascii_digit()))
        {
            format!(
                "its word `{word}` starts with a digit, so `{}` could also come from `{}`",
                names::dispatch_struct(name),
                name.replacen(&format!("_{word}"), word, 1)
            )
        } else if words.iter().any(|w| w.is_empty()) {
            "it has a leading, trailing or doubled `_`".to_string()
        } else {
            "it holds characters other than lower-case letters, digits and `_`".to_string()
        };
        diag.at(
            ident,
            format!(
                "`{name}` would give generated items (`{}`, its params type, files) names another \
                 wrapper could also get: {why}; every `_` must be followed by a letter \
                 (`{}`)",
                names::dispatch_struct(name),
                suggestion(name)
            ),
        );
    } else if name.len() > names::MAX_WRAPPER_NAME {
        diag.at(
            ident,
            format!(
                "a tuned wrapper's name has at most {} characters (this one has {}): it names \
                 its tables' entries and compiled files",
                names::MAX_WRAPPER_NAME,
                name.len()
            ),
        );
    }
}

/// A flag may not define or undefine a parameter's macro: the parameter sets it
/// per point, and nvcc would take one or the other silently.
fn check_flags(value: &Expr, names: &[String], diag: &mut Diagnostics) {
    let Expr::Array(array) = value else { return };
    let mut previous: Option<String> = None;
    for elem in &array.elems {
        let Expr::Lit(ExprLit {
            lit: Lit::Str(text),
            ..
        }) = elem
        else {
            continue;
        };
        let flag = text.value();
        if let Some(why) = refused_flag(&flag, previous.as_deref()) {
            diag.at(elem, why);
        }
        let (defined, shown) = match previous.as_deref() {
            Some(option @ ("-D" | "-U" | "--define-macro" | "--undefine-macro")) => {
                (Some(flag.as_str()), format!("{option} {flag}"))
            }
            _ => (
                ["-D", "-U", "--define-macro=", "--undefine-macro="]
                    .iter()
                    .find_map(|prefix| flag.strip_prefix(prefix)),
                flag.clone(),
            ),
        };
        if let Some(defined) = defined {
            let macro_name = defined.split(['=', '(']).next().unwrap_or("").trim();
            if let Some(param) = names.iter().find(|n| names::define(n) == macro_name) {
                diag.at(
                    elem,
                    format!(
                        "`{shown}` sets `{macro_name}`, which parameter `{param}` defines for each \
                         point: remove the flag (or make `{param}` a single value, `{param} = 64`)"
                    ),
                );
            }
        }
        previous = Some(flag);
    }
}

/// Options whose value is the next flag (`"-Xptxas", "-v"`).
const TAKES_A_VALUE: [&str; 14] = [
    "-D",
    "--define-macro",
    "-U",
    "--undefine-macro",
    "-I",
    "--include-path",
    "-Xptxas",
    "--ptxas-options",
    "-maxrregcount",
    "--maxrregcount",
    "-std",
    "--std",
    "-t",
    "--threads",
];

/// Why nvcc must not be given `flag` (after `previous`, when that takes a value),
/// if it must not. An allow-list of what a kernel may need: optimisation and code
/// generation switches, `-Xptxas` options for registers, caching and reports,
/// `-lineinfo`, the fast-math switches, `-maxrregcount`, `-std`, `--expt-*`,
/// defines, and include folders inside the crate. Everything else is refused:
/// output paths (`-o`, `--time=FILE`, `-save-temps`), programs nvcc would run
/// (`-run`, `-Xcompiler=-wrapper,...`, `-ccbin`), option files, and any flag of
/// several words in one string.
fn refused_flag(flag: &str, previous: Option<&str>) -> Option<String> {
    if flag.chars().any(char::is_whitespace) {
        return Some(format!(
            "`{flag}` holds several words in one string: give each argument its own string"
        ));
    }
    if flag.is_empty() {
        return Some("an empty flag".to_string());
    }
    if let Some(option) = previous.filter(|p| TAKES_A_VALUE.contains(p)) {
        return refused_value(option, flag);
    }
    let name = flag.split('=').next().unwrap_or(flag);
    if let Some((option, what)) = DANGEROUS.iter().find(|(option, _)| name == *option) {
        let shown = if flag == *option {
            format!("`{option}`")
        } else {
            format!("`{flag}`: `{option}`")
        };
        return Some(format!(
            "{shown} {what}; the build decides that, not a kernel's flags"
        ));
    }
    let optimisation = matches!(flag, "-O0" | "-O1" | "-O2" | "-O3");
    let ptxas_inline = ["-Xptxas=", "--ptxas-options="]
        .iter()
        .find_map(|prefix| flag.strip_prefix(prefix))
        .is_some_and(|value| refused_value("-Xptxas", value).is_none());
    let with_value = ALLOWED_WITH_VALUE.iter().any(|option| {
        flag.strip_prefix(option)
            .and_then(|rest| rest.strip_prefix('='))
            .is_some_and(|value| refused_value(option, value).is_none())
    });
    // `-DNAME=1`, `-UNAME`, `-Ikernels`: the value attached.
    let attached = ["-D", "-U", "-I"].iter().any(|prefix| {
        flag.strip_prefix(prefix)
            .filter(|rest| !rest.is_empty() && !rest.starts_with('='))
            .is_some_and(|value| refused_value(prefix, value).is_none())
    });
    let allowed = ALLOWED.contains(&flag)
        || optimisation
        || ptxas_inline
        || with_value
        || attached
        || TAKES_A_VALUE.contains(&flag);
    if allowed {
        return None;
    }
    Some(format!(
        "`{flag}` is not among the flags a kernel may pass to nvcc (optimisation, `-Xptxas` \
         options, `-lineinfo`, fast-math switches, `-maxrregcount`, `-std`, `--expt-*`, \
         defines, include folders inside the crate)"
    ))
}

/// Flags explained by name when refused.
const DANGEROUS: [(&str, &str); 27] = [
    ("-o", "chooses where nvcc writes"),
    ("--output-file", "chooses where nvcc writes"),
    ("-odir", "chooses where nvcc writes"),
    ("--output-directory", "chooses where nvcc writes"),
    ("-MF", "chooses where nvcc writes"),
    ("--dependency-output", "chooses where nvcc writes"),
    ("--time", "writes a file"),
    ("-time", "writes a file"),
    ("-fdevice-time-trace", "writes a file"),
    ("--fdevice-time-trace", "writes a file"),
    ("-save-temps", "leaves nvcc's intermediate files behind"),
    ("--save-temps", "leaves nvcc's intermediate files behind"),
    ("-R", "runs a program"),
    ("-run", "runs a program"),
    ("--run", "runs a program"),
    ("-run-args", "runs a program"),
    ("--run-args", "runs a program"),
    (
        "-Xcompiler",
        "passes options to the host compiler (which can run programs)",
    ),
    (
        "--compiler-options",
        "passes options to the host compiler (which can run programs)",
    ),
    (
        "-ccbin",
        "chooses the program nvcc runs as host compiler (NVCC_CCBIN does)",
    ),
    (
        "--compiler-bindir",
        "chooses the program nvcc runs as host compiler (NVCC_CCBIN does)",
    ),
    ("-optf", "reads more options from a file"),
    ("--options-file", "reads more options from a file"),
    ("-keep", "leaves nvcc's intermediate files behind"),
    ("--keep", "leaves nvcc's intermediate files behind"),
    ("-keep-dir", "leaves nvcc's intermediate files behind"),
    ("--keep-dir", "leaves nvcc's intermediate files behind"),
];

/// Flags a kernel may pass as they are.
const ALLOWED: [&str; 22] = [
    "-lineinfo",
    "--generate-line-info",
    "-use_fast_math",
    "--use_fast_math",
    "--expt-relaxed-constexpr",
    "-expt-relaxed-constexpr",
    "--expt-extended-lambda",
    "-expt-extended-lambda",
    "--extended-lambda",
    "-extended-lambda",
    "-restrict",
    "--restrict",
    "--extra-device-vectorization",
    "-extra-device-vectorization",
    "-w",
    "--disable-warnings",
    "-Wno-deprecated-gpu-targets",
    "--resource-usage",
    "-res-usage",
    "-G",
    "--device-debug",
    "-src-in-ptx",
];

/// Options a kernel may give a value with `=` (checked by [`refused_value`]).
const ALLOWED_WITH_VALUE: [&str; 15] = [
    "-ftz",
    "--ftz",
    "-prec-div",
    "--prec-div",
    "-prec-sqrt",
    "--prec-sqrt",
    "-fmad",
    "--fmad",
    "-maxrregcount",
    "--maxrregcount",
    "-std",
    "--std",
    "--define-macro",
    "--include-path",
    "--threads",
];

/// Why `value` may not follow (or be given with `=` to) `option`, if it may not.
fn refused_value(option: &str, value: &str) -> Option<String> {
    let ok = match option {
        "-D" | "--define-macro" | "-U" | "--undefine-macro" => {
            let name = value.split(['=', '(']).next().unwrap_or("");
            !name.is_empty()
                && !name.starts_with(|c: char| c.is_ascii_digit())
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        }
        // Inside the crate: relative, and never climbing out of it.
        "-I" | "--include-path" => {
            let path = std::path::Path::new(value);
            !value.is_empty()
                && path.is_relative()
                && path.components().all(|c| {
                    matches!(
                        c,
                        std::path::Component::Normal(_) | std::path::Component::CurDir
                    )
                })
        }
        "-Xptxas" | "--ptxas-options" => value.split(',').all(|option| {
            let name = option.split('=').next().unwrap_or(option);
            [
                "-v",
                "--verbose",
                "-O0",
                "-O1",
                "-O2",
                "-O3",
                "-warn-spills",
                "--warn-on-spills",
                "-warn-lmem-usage",
                "--warn-on-local-memory-usage",
                "-dlcm",
                "-dscm",
                "--def-load-cache",
                "--def-store-cache",
                "-maxrregcount",
                "--maxrregcount",
                "--allow-expensive-optimizations",
                "-allow-expensive-optimizations",
                "-lineinfo",
                "--generate-line-info",
                "-Werror",
                "--warning-as-error",
            ]
            .contains(&name)
        }),
        "-maxrregcount" | "--maxrregcount" | "-t" | "--threads" => {
            value.parse::<u32>().is_ok_and(|n| n <= 255)
        }
        "-std" | "--std" => matches!(value, "c++11" | "c++14" | "c++17" | "c++20" | "c++03"),
        "-ftz" | "--ftz" | "-prec-div" | "--prec-div" | "-prec-sqrt" | "--prec-sqrt" | "-fmad"
        | "--fmad" => matches!(value, "true" | "false"),
        _ => false,
    };
    (!ok).then(|| format!("`{option} {value}` is not a value a kernel may give `{option}`"))
}

/// The longest point slug (`block128_stages4`) must leave room in a file name.
fn check_slug_length(params: &[Param], attr_span: Span, diag: &mut Diagnostics) {
    let longest: usize = params
        .iter()
        .map(|p| {
            let digits = p.values.iter().max().map_or(1, |v| v.to_string().len());
            p.name.len() + digits
        })
        .sum::<usize>()
        + params.len().saturating_sub(1);
    if longest > names::MAX_SLUG {
        diag.at_span(
            attr_span,
            format!(
                "the parameters' names make file names of {longest} characters for a point, more \
                 than {}: shorten them",
                names::MAX_SLUG
            ),
        );
    }
}

fn lit_str(value: &Expr, option: &str, diag: &mut Diagnostics) -> Option<LitStr> {
    match value {
        Expr::Lit(ExprLit {
            lit: Lit::Str(s), ..
        }) => Some(s.clone()),
        other => {
            diag.at(other, format!("`{option}` takes a string literal"));
            None
        }
    }
}

fn parse_entries(value: &Expr, diag: &mut Diagnostics) -> Option<Vec<String>> {
    let (elems, what): (Vec<&Expr>, &str) = match value {
        Expr::Array(array) if array.elems.is_empty() => {
            diag.at(array, "`entry` lists at least one kernel symbol");
            return None;
        }
        Expr::Array(array) => (array.elems.iter().collect(), "each entry"),
        single => (vec![single], "entry"),
    };
    // Every element is looked at, so that all of its errors are said at once.
    let mut names: Vec<String> = Vec::new();
    let mut valid = true;
    for elem in elems {
        let Some(name) = lit_str(elem, what, diag).map(|s| s.value()) else {
            valid = false;
            continue;
        };
        if !is_symbol(&name) {
            diag.at(elem, format!("{name:?} is not a kernel symbol: `extern \"C\"` names are C identifiers (letters, digits, `_`)"));
            valid = false;
        } else if names.contains(&name) {
            diag.at(elem, format!("`{name}` is listed twice"));
            valid = false;
        } else {
            names.push(name);
        }
    }
    valid.then_some(names)
}

/// Whether `name` is a C identifier, as an `extern "C"` kernel's symbol is.
fn is_symbol(name: &str) -> bool {
    name.len() <= 1024
        && name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// A type given as an option's value (`case = LayerNormCase<768>`, `vendor = CublasGemm`).
fn type_value(value: &Expr) -> Option<Type> {
    match value {
        Expr::Verbatim(tokens) => syn::parse2::<Type>(tokens.clone()).ok(),
        Expr::Path(path) if path.qself.is_none() => Some(Type::Path(syn::TypePath {
            qself: None,
            path: path.path.clone(),
        })),
        _ => None,
    }
}

fn single_ident(value: &Expr) -> Option<&Ident> {
    match value {
        Expr::Path(path) if path.qself.is_none() && path.attrs.is_empty() => path.path.get_ident(),
        _ => None,
    }
}

fn parse_flags(value: &Expr, diag: &mut Diagnostics) -> Vec<String> {
    let Expr::Array(array) = value else {
        diag.at(
            value,
            "`flags` is a list of nvcc flags, e.g. `flags = [\"-use_fast_math\"]`",
        );
        return Vec::new();
    };
    array
        .elems
        .iter()
        .filter_map(|elem| lit_str(elem, "each flag", diag).map(|s| s.value()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const WRAPPER: &str = "fn rms_norm(stream: &CudaStream, v: &Variant<P>, x: &CudaSlice<u16>, n_rows: usize, eps: f32) -> Result<(), E> {}";

    fn spec(attr: &str) -> syn::Result<Spec> {
        let args: AttrArgs = syn::parse_str(attr)?;
        let item: syn::ItemFn = syn::parse_str(WRAPPER)?;
        Spec::parse(&args, &item.sig, Span::call_site(), None)
    }

    fn errors(attr: &str) -> Vec<String> {
        spec(attr)
            .unwrap_err()
            .into_iter()
            .map(|e| e.to_string())
            .collect()
    }

    const BASE: &str = "source = \"k.cu\", key = n_rows, sizes = [512, 2k, 1m], case = C";

    #[test]
    fn a_constant_is_a_compiled_image() {
        let tail = "key = n_rows, sizes = [512], case = C";
        let s = spec(&format!(
            "source = lib_kernels::SOFTMAX, {tail}, threads = [32, 64], launch = [threads]"
        ))
        .unwrap();
        assert_eq!(s.source.value(), "lib_kernels::SOFTMAX");
        let constant = s.constant.as_ref().map(path_text);
        assert_eq!(constant.as_deref(), Some("lib_kernels::SOFTMAX"));
        // Nothing compiles it: no parameter reaches nvcc, no flags.
        let compiled = errors(&format!(
            "source = lib_kernels::SOFTMAX, {tail}, threads = [32]"
        ));
        assert!(compiled[0].contains("lib_kernels::SOFTMAX is already compiled"));
        let flags = errors(&format!(
            "source = lib_kernels::SOFTMAX, {tail}, flags = [\"-O3\"]"
        ));
        assert!(flags[0].contains("never sees lib_kernels::SOFTMAX"));
        // Alone: no candidates beside it, and a bare name is no constant.
        let listed = errors(&format!("source = [\"k.cu\", lib::K], {tail}"));
        assert!(listed[0].contains("a constant image is the only source"));
        assert!(errors(&format!("source = SOFTMAX, {tail}"))[0].contains("the path of a constant"));
        assert!(spec(BASE).unwrap().constant.is_none());
    }

    #[test]
    fn vendor_points_count_the_vendor_s_own_points() {
        let s = spec(&format!(
            "{BASE}, vendor = Cublas, vendor_points = 8, block = [64]"
        ))
        .unwrap();
        assert_eq!(s.vendor_points, 8);
        assert_eq!(
            spec(&format!("{BASE}, vendor = Cublas, block = [64]"))
                .unwrap()
                .vendor_points,
            0
        );
        let alone = errors(&format!("{BASE}, vendor_points = 8, block = [64]"));
        assert_eq!(alone.len(), 1, "{alone:?}");
        assert!(alone[0].contains("it needs `vendor = ...`"), "{alone:?}");
        for count in ["0", "33", "\"8\"", "2.5"] {
            let wrong = errors(&format!(
                "{BASE}, vendor = Cublas, vendor_points = {count}, block = [64]"
            ));
            assert!(wrong[0].contains("from 1 to 32"), "{count}: {wrong:?}");
        }
    }

    #[test]
    fn parses_the_card_shape() {
        let s = spec(&format!(
            "{BASE}, block = [64, 128, 256], stages = 1..4, default = (block = 128, stages = 2)"
        ))
        .unwrap();
        assert_eq!(s.sizes, [512, 2048, 1 << 20]);
        assert_eq!(s.space.points().len(), 9);
        assert_eq!(s.default, Point(vec![128, 2]));
        assert_eq!(s.entries, ["rms_norm"]);
        assert_eq!(s.dispatch_struct(), "RmsNorm");
    }

    /// Issue 15: candidate sources are a first parameter `source`, the incumbent's
    /// index 0 by default; the constraint may name it.
    #[test]
    fn candidate_sources_become_the_source_parameter() {
        let s = spec(
            "source = [\"k.cu\", \"k_v2.cu\"], key = n_rows, sizes = [512], case = C, \
             block = [64, 128], where = \"source == 0 || block == 128\", default = (block = 64)",
        )
        .unwrap();
        assert_eq!(s.source.value(), "k.cu");
        assert_eq!(s.candidates.len(), 1);
        assert_eq!(s.space.names(), ["source", "block"]);
        assert_eq!(s.space.points().len(), 3);
        assert_eq!(s.default, Point(vec![0, 64]));
        let twice = errors(
            "source = [\"k.cu\", \"k.cu\"], key = n_rows, sizes = [512], case = C, block = [64]",
        );
        assert!(twice[0].contains("`k.cu` is listed twice"), "{twice:?}");
        let empty = errors("source = [], key = n_rows, sizes = [512], case = C, block = [64]");
        assert!(
            empty[0].contains("lists the incumbent CUDA file"),
            "{empty:?}"
        );
    }

    #[test]
    fn default_is_first_point_when_not_declared() {
        let s = spec(&format!(
            "{BASE}, block = [64, 128], stages = 1..=2, where = \"block * stages > 64\""
        ))
        .unwrap();
        assert_eq!(s.default, Point(vec![64, 2]));
    }

    #[test]
    fn reports_every_error_at_once() {
        let all = errors(
            "source = 1, key = n_cols, sizes = [4k, 1k], case = C, block = [], stages = 4..4, \
             soruce = \"x\", default = (block = 3)",
        );
        let expect = [
            "`source` takes a string literal",
            "`n_cols` is not an argument",
            "sizes must be strictly ascending",
            "`block` has no values",
            "`stages` is an empty range",
            "unknown option `soruce`",
            "`block` is not a parameter",
        ];
        for needle in expect {
            assert!(
                all.iter().any(|e| e.contains(needle)),
                "missing {needle:?} in {all:#?}"
            );
        }
    }

    #[test]
    fn rejects_defaults_outside_the_space() {
        let all = errors(&format!(
            "{BASE}, block = [64, 128], default = (block = 512)"
        ));
        assert!(all[0].contains("outside the space"), "{all:?}");
        let all = errors(&format!(
            "{BASE}, block = [64, 128], stages = 1..3, default = (block = 64)"
        ));
        assert!(all[0].contains("missing: stages"), "{all:?}");
        let all = errors(&format!(
            "{BASE}, block = [64, 128], where = block > 64, default = (block = 64)"
        ));
        assert!(
            all[0].contains("excluded by the `where` constraint"),
            "{all:?}"
        );
    }

    #[test]
    fn rejects_bad_keys_and_constraints() {
        assert!(
            errors("source = \"k.cu\", key = eps, sizes = [1], case = C")[0]
                .contains("primitive integer")
        );
        assert!(
            errors("source = \"k.cu\", key = stream, sizes = [1], case = C")[0]
                .contains("the stream or the variant")
        );
        assert!(
            errors(&format!("{BASE}, block = [64], where = \"block > 64\""))[0]
                .contains("removes every point")
        );
        assert!(
            errors(&format!("{BASE}, block = [64], where = \"block / 0 > 1\""))[0]
                .contains("division by zero")
        );
        assert!(
            errors(&format!("{BASE}, block = [64], where = \"block *\""))[0]
                .contains("not an expression")
        );
        assert!(
            errors(&format!("{BASE}, block = [64], block = [128]"))[0].contains("more than once")
        );
        assert!(
            errors("source = \"k.cu\", sizes = [1], case = C")[0].contains("missing `key = ...`")
        );
        assert!(
            errors("source = \"k.cu\", key = n_rows, sizes = [1q], case = C")[0]
                .contains("unknown size suffix")
        );
    }

    #[test]
    fn checks_the_cuda_source() {
        let dir = std::env::temp_dir().join(format!("autotune-spec-check-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("k.cu"),
            "extern \"C\" __global__ void rms_norm() { int b = BLOCK; }",
        )
        .unwrap();
        let args: AttrArgs = syn::parse_str(&format!("{BASE}, block = [64], blcok = [1]")).unwrap();
        let item: syn::ItemFn = syn::parse_str(WRAPPER).unwrap();
        let error = Spec::parse(&args, &item.sig, Span::call_site(), Some(&dir)).unwrap_err();
        let all: Vec<String> = error.into_iter().map(|e| e.to_string()).collect();
        assert_eq!(all.len(), 1, "{all:?}");
        assert!(all[0].contains("`BLCOK` does not appear"), "{all:?}");
        let args: AttrArgs =
            syn::parse_str("source = \"missing.cu\", key = n_rows, sizes = [1], case = C").unwrap();
        let error = Spec::parse(&args, &item.sig, Span::call_site(), Some(&dir)).unwrap_err();
        assert!(error.to_string().contains("cannot read CUDA source"));
        std::fs::remove_dir_all(dir).unwrap();
    }

    /// Issue 50, item 5: the flags a kernel needs pass the allow-list.
    #[test]
    fn the_flags_a_kernel_needs_are_allowed() {
        let flags = "\"-O3\", \"-Xptxas\", \"-v\", \"-Xptxas=-v,-warn-spills\", \"-lineinfo\", \
            \"-DTOPK_KEEP_ALL\", \"-D\", \"WIDE=1\", \"-Ikernels\", \"-I\", \"kernels/sub\", \
            \"--use_fast_math\", \"-maxrregcount=128\", \"-std=c++17\", \
            \"--expt-relaxed-constexpr\", \"-ftz=true\"";
        let parsed = spec(&format!("{BASE}, block = [64], flags = [{flags}]"));
        assert!(parsed.is_ok(), "{:?}", parsed.err());
    }

    #[test]
    fn limits_are_explicit_and_can_be_raised() {
        let big = format!("{BASE}, block = 1..100, stages = 1..100");
        assert!(errors(&big)[0].contains("9801 points before its constraint"));
        assert_eq!(
            spec(&format!("{big}, max_points = 9801"))
                .unwrap()
                .space
                .points()
                .len(),
            9801
        );
        let huge = format!("{BASE}, block = 0..=4294967295");
        assert!(errors(&huge)[0].contains("4294967296 values"));
        let sizes: Vec<String> = (1..=65).map(|n| n.to_string()).collect();
        let many = format!(
            "source = \"k.cu\", key = n_rows, sizes = [{}], case = C, block = [64]",
            sizes.join(", ")
        );
        assert!(errors(&many)[0].contains("65 sizes"));
        assert!(spec(&format!("{many}, max_sizes = 65")).is_ok());
    }

    /// A kernel in a library's style: the block size reaches the launch and an
    /// argument, and the file declares `BLOCK_SIZE` itself.
    const LIBRARY: &str = "const int BLOCK_SIZE = 1024;\n\
        extern \"C\" __global__ void rms_norm(const float* x, int block_size) {}\n";

    fn in_dir(source: &str, attr: &str) -> Result<Spec, Vec<String>> {
        let dir = std::env::temp_dir().join(format!(
            "autotune-spec-defines-{}-{}",
            std::process::id(),
            attr.len()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("k.cu"), source).unwrap();
        let args: AttrArgs = syn::parse_str(&format!("{BASE}, {attr}")).unwrap();
        let item: syn::ItemFn = syn::parse_str(WRAPPER).unwrap();
        let parsed = Spec::parse(&args, &item.sig, Span::call_site(), Some(&dir));
        std::fs::remove_dir_all(dir).unwrap();
        parsed.map_err(|e| e.into_iter().map(|e| e.to_string()).collect())
    }

    #[test]
    fn a_launch_only_parameter_needs_no_define() {
        // It was refused: "parameter `rows` is never used".
        let s = in_dir(LIBRARY, "rows = [1, 4], launch = [rows]").unwrap();
        assert_eq!(s.defines.names, [None]);
        let error = in_dir(LIBRARY, "rows = [1, 4]").unwrap_err();
        assert!(error[0].contains("launch = [rows]"), "{error:?}");
    }

    /// Issue 50, item 14: `launch = [block]` for a source that reads `BLOCK`
    /// through an `#ifndef` default compiled every variant with the default.
    #[test]
    fn a_launch_only_parameter_the_source_expects_as_a_define_is_refused() {
        let guarded = "#ifndef BLOCK\n#define BLOCK 128\n#endif\n\
            extern \"C\" __global__ void rms_norm(float* y) { y[threadIdx.x] = BLOCK; }\n";
        let error = in_dir(guarded, "block = [64, 128], launch = [block]").unwrap_err();
        assert!(
            error.len() == 1 && error[0].contains("k.cu:1 reads `BLOCK`"),
            "{error:?}"
        );
        assert!(in_dir(guarded, "block = [64, 128]").is_ok());
    }

    #[test]
    fn a_define_that_rewrites_a_declaration_names_its_file_and_line() {
        // `block_size` matched the library's own constant, and every point failed
        // with "expected an identifier" on `const int 32 = 1024;`.
        let error = in_dir(LIBRARY, "block_size = [32, 1024]").unwrap_err();
        assert_eq!(error.len(), 1, "{error:?}");
        assert!(
            error[0].contains("k.cu:1 declares: `const int BLOCK_SIZE = 1024;`"),
            "{error:?}"
        );
        // Launch-only, or under another name, it compiles.
        assert!(in_dir(LIBRARY, "block_size = [32, 1024], launch = [block_size]").is_ok());
        let renamed = format!("{LIBRARY}#define DIM_X 1\nint y = TUNE_BLOCK_SIZE;");
        let s = in_dir(&renamed, "block_size = [32], define_prefix = \"TUNE_\"").unwrap();
        assert_eq!(s.defines.names, [Some("TUNE_BLOCK_SIZE".to_string())]);
        let named = format!("{LIBRARY}int y = THREADS;");
        let s = in_dir(
            &named,
            "block_size = [32], defines = (block_size = \"THREADS\")",
        )
        .unwrap();
        assert_eq!(s.defines.names, [Some("THREADS".to_string())]);
        // The mention check looks for the name emitted.
        let error = in_dir(
            LIBRARY,
            "block_size = [32], defines = (block_size = \"NOPE\")",
        )
        .unwrap_err();
        assert!(error[0].contains("`NOPE` does not appear"), "{error:?}");
    }

    /// Issue 52: `min(C, BLOCK * ITEMS)` read as a declaration of `ITEMS` (type
    /// `BLOCK*`) refused a correct kernel. The everyday uses of a define compile; a
    /// declaration of it is still refused, at the parameter.
    #[test]
    fn uses_of_a_define_compile_and_declarations_do_not() {
        let uses = "extern \"C\" __global__ void rms_norm(const float* x, float* y, int C) {\n\
            __shared__ float staged[BLOCK * ITEMS]; // BLOCK threads, ITEMS each\n\
            const int end = min(C, BLOCK * ITEMS);\n\
            const int first = tile<BLOCK>(C) * ITEMS;\n\
            y[end - first] = x[0];\n}\n";
        assert!(in_dir(uses, "block = [64], items = [1, 2]").is_ok());
        for declared in [
            "const int ITEMS = 4;\n",
            "__device__ void f(float* ITEMS);\n",
            "#define ITEMS 4\n",
        ] {
            let error =
                in_dir(&format!("{declared}{uses}"), "block = [64], items = [1, 2]").unwrap_err();
            assert!(
                error.len() == 1
                    && error[0].contains("`-DITEMS` (parameter `items`) would rewrite"),
                "{declared}: {error:?}"
            );
        }
    }

    #[test]
    fn the_define_options_say_what_is_wrong_at_once() {
        let all = errors(&format!(
            "{BASE}, block = [64], rows = [1], launch = [rowz], define_prefix = \"9x\", \
             defines = (block = \"A\", rows = \"A B\", stages = \"C\")"
        ));
        for expected in [
            "`launch` names `rowz`, which is not a parameter of this kernel (parameters: `block`, `rows`)",
            "\"9x\" is not the start of a C identifier",
            "\"A B\" is not a C identifier",
            "`defines` names `stages`, which is not a parameter",
        ] {
            assert!(
                all.iter().any(|e| e.contains(expected)),
                "{expected}: {all:?}"
            );
        }
        let clash = errors(&format!(
            "{BASE}, block = [64], rows = [1], defines = (block = \"ROWS\")"
        ));
        assert!(
            clash[0].contains("`block` and `rows` would both be emitted as `-DROWS`"),
            "{clash:?}"
        );
        let launch_named = errors(&format!(
            "{BASE}, rows = [1], launch = [rows], defines = (rows = \"R\")"
        ));
        assert!(
            launch_named[0].contains("`rows` is launch-only"),
            "{launch_named:?}"
        );
    }
}

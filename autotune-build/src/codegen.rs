//! The Rust the crate includes for each kernel: its compiled variants and one
//! `match` per plan, rustfmt-style (prettyplease), under a "do not edit" header.

use std::path::PathBuf;

use proc_macro2::TokenStream;
use quote::{format_ident, quote};

use autotune_runtime::dispatch::{Choice, Range};
use autotune_spec::KeyRange;
use autotune_table::shown;

use crate::error::BuildError;

/// A variant to embed; `binary` is `None` when nvcc was unavailable.
#[derive(Debug, Clone)]
pub struct ImageData {
    pub name: String,
    pub values: Vec<u32>,
    pub binary: Option<PathBuf>,
}

#[derive(Debug, Clone)]
pub struct OriginData {
    pub path: String,
    pub gpu: String,
    pub compute_capability: (u32, u32),
    pub sm_count: u32,
}

#[derive(Debug, Clone)]
pub struct PlanData {
    pub origin: OriginData,
    /// The shape the plan was tuned at; empty without shapes.
    pub shape: Vec<u64>,
    /// Ascending, covering `0..=u64::MAX`.
    pub ranges: Vec<Range>,
    /// The same for a shape that was not tuned and borrows this plan: the ranges
    /// that led the fallback by enough where they were tuned, the fallback elsewhere.
    pub borrowed: Vec<Range>,
    /// Which keys were measured and what the ones above them get, in one line.
    pub above: String,
    /// The vendor's point the fallback runs per range of the key (`None`: its
    /// default launch); empty where the vendor has no points of its own.
    pub vendor_points: Vec<KeyRange<Option<PointData>>>,
}

/// One of the vendor's points, as dispatch gets it.
#[derive(Debug, Clone, PartialEq)]
pub struct PointData {
    /// What the listing calls it (`cuBLAS@1f0c3a9e`).
    pub name: String,
    /// Its words, which only the vendor's `launch_point` reads.
    pub words: Vec<u32>,
}

/// Everything generated for one kernel.
#[derive(Debug, Clone)]
pub struct Generated {
    pub kernel: String,
    /// The kernel's shape arguments (`["n", "k"]`), empty without shapes.
    pub shape_args: Vec<String>,
    /// What the fallback is called in `describe` (`fallback`, or the vendor's name).
    pub fallback: String,
    pub images: Vec<ImageData>,
    pub plans: Vec<PlanData>,
    /// Index of the declared default in `images`.
    pub default: usize,
    /// Whether a fallback (a library's launch, a vendor's kernel) is declared: it,
    /// not the default point, is what runs where no table says otherwise.
    pub incumbent: bool,
    pub note: String,
    pub not_compiled: Option<String>,
}

/// An unsuffixed literal, with `_` every three digits, or `u64::MAX`.
fn number(value: u64) -> TokenStream {
    if value == u64::MAX {
        return quote!(u64::MAX);
    }
    let digits = value.to_string();
    let mut grouped = String::new();
    for (index, digit) in digits.chars().enumerate() {
        if index > 0 && (digits.len() - index).is_multiple_of(3) && digits.len() > 4 {
            grouped.push('_');
        }
        grouped.push(digit);
    }
    grouped
        .parse::<proc_macro2::Literal>()
        .map_or_else(|_| quote!(#value), |lit| quote!(#lit))
}

fn choice(choice: Choice) -> TokenStream {
    match choice {
        Choice::Variant(index) => {
            let index = proc_macro2::Literal::usize_unsuffixed(index);
            quote!(::autotune_runtime::Choice::Variant(#index))
        }
        Choice::Fallback => quote!(::autotune_runtime::Choice::Fallback),
    }
}

/// The `match` arm of `first..=last` (the last one `_`, a single key alone).
fn arm(first: u64, last: u64, value: TokenStream) -> TokenStream {
    if last == u64::MAX {
        quote!(_ => #value,)
    } else if first == last {
        let first = number(first);
        quote!(#first => #value,)
    } else {
        let (first, last) = (number(first), number(last));
        quote!(#first..=#last => #value,)
    }
}

fn select_fn(name: &proc_macro2::Ident, ranges: &[Range]) -> TokenStream {
    key_match_fn(name, quote!(::autotune_runtime::Choice), ranges, |c| {
        choice(*c)
    })
}

/// `fn name(key) -> Option<&'static [u32]>`: the vendor's point per range of the
/// key, as a `match`.
fn vendor_point_fn(
    name: &proc_macro2::Ident,
    ranges: &[KeyRange<Option<PointData>>],
) -> TokenStream {
    let returns = quote!(::core::option::Option<&'static [u32]>);
    key_match_fn(name, returns, ranges, |point| match point {
        Some(point) => {
            let words = point.words.iter().map(|w| number(u64::from(*w)));
            quote!(::core::option::Option::Some(&[#(#words),*]))
        }
        None => quote!(::core::option::Option::None),
    })
}

/// `fn name(key: u64) -> returns`: a `match` on the key with an arm per range
/// (`value` of its choice), or the one value where there is one range.
fn key_match_fn<C>(
    name: &proc_macro2::Ident,
    returns: TokenStream,
    ranges: &[KeyRange<C>],
    value: impl Fn(&C) -> TokenStream,
) -> TokenStream {
    if let [only] = ranges {
        let only = value(&only.choice);
        return quote! {
            fn #name(_key: u64) -> #returns {
                #only
            }
        };
    }
    let arms = ranges
        .iter()
        .map(|range| arm(range.first, range.last, value(&range.choice)));
    quote! {
        fn #name(key: u64) -> #returns {
            match key {
                #(#arms)*
            }
        }
    }
}

/// The ranges where the vendor runs a point, by its name (`Plan::vendor_ranges`).
fn point_ranges_static(
    name: &proc_macro2::Ident,
    ranges: &[KeyRange<Option<PointData>>],
) -> TokenStream {
    let items: Vec<TokenStream> = ranges
        .iter()
        .filter_map(|range| {
            let point = range.choice.as_ref()?;
            let (first, last, name) = (
                number(range.first),
                number(range.last),
                shown::line(&point.name),
            );
            Some(quote!(::autotune_runtime::dispatch::PointRange::new(#first, #last, #name)))
        })
        .collect();
    let count = proc_macro2::Literal::usize_unsuffixed(items.len());
    quote!(static #name: [::autotune_runtime::dispatch::PointRange; #count] = [#(#items),*];)
}

fn ranges_static(name: &proc_macro2::Ident, ranges: &[Range]) -> TokenStream {
    let count = proc_macro2::Literal::usize_unsuffixed(ranges.len());
    let items = ranges.iter().map(|range| {
        let c = choice(range.choice);
        let (first, last) = (number(range.first), number(range.last));
        quote!(::autotune_runtime::dispatch::Range::new(#first, #last, #c))
    });
    quote!(static #name: [::autotune_runtime::dispatch::Range; #count] = [#(#items),*];)
}

impl Generated {
    /// The formatted source of `OUT_DIR/autotune/<kernel>.rs`.
    pub fn render(&self) -> Result<String, BuildError> {
        let kernel = &self.kernel;
        let image_count = proc_macro2::Literal::usize_unsuffixed(self.images.len());
        // Table text (GPU names, file names, notes) reaches string literals and
        // comments: escaped, since rustc refuses direction-changing characters there.
        let images = self.images.iter().map(|image| {
            let name = shown::line(&image.name);
            let values = image.values.iter().map(|v| number(u64::from(*v)));
            let binary = match &image.binary {
                Some(path) => {
                    let path = path.to_string_lossy().into_owned();
                    quote!(include_bytes!(#path))
                }
                None => quote!(&[]),
            };
            quote!(::autotune_runtime::dispatch::Image::new(#name, &[#(#values),*], #binary))
        });
        let (plan_items, plans) = self.plan_tokens();
        let plan_count = proc_macro2::Literal::usize_unsuffixed(plans.len());
        // Where no table speaks (another GPU, no table yet), what a user who never
        // tuned gets: the declared fallback (the library's own launch) where there
        // is one, unchanged, else the default point.
        let untuned = if self.incumbent {
            Choice::Fallback
        } else {
            Choice::Variant(self.default)
        };
        let defaults = vec![Range::new(0, u64::MAX, untuned)];
        let select_defaults = select_fn(&format_ident!("select_defaults"), &defaults);
        let ranges_defaults = ranges_static(&format_ident!("RANGES_DEFAULTS"), &defaults);
        let note = shown::line(&self.note);
        let shape_args = &self.shape_args;
        let with_shape_args =
            (!shape_args.is_empty()).then(|| quote!(.with_shape_args(&[#(#shape_args),*])));
        let fallback = &self.fallback;
        let not_compiled = self.not_compiled.as_ref().map(|reason| {
            let reason = shown::line(reason);
            quote!(.not_compiled(#reason))
        });
        let tokens = quote! {
            static IMAGES: [::autotune_runtime::dispatch::Image; #image_count] = [#(#images),*];
            #(#plan_items)*
            static PLANS: [::autotune_runtime::dispatch::Plan; #plan_count] = [#(#plans),*];
            #select_defaults
            #ranges_defaults
            pub(super) static BAKED: ::autotune_runtime::dispatch::Baked =
                ::autotune_runtime::dispatch::Baked::new(
                    #kernel,
                    &IMAGES,
                    ::autotune_runtime::dispatch::Plan::defaults(&RANGES_DEFAULTS, select_defaults),
                )
                .with_plans(&PLANS)
                #with_shape_args
                .with_fallback(#fallback)
                .with_note(#note)
                #not_compiled;
        };
        let file: syn::File = syn::parse2(tokens).map_err(|e| BuildError::Codegen {
            kernel: kernel.clone(),
            message: e.to_string(),
        })?;
        let mut header = format!(
            "// @generated by autotune-build {} from build.rs. Do not edit: it is rewritten on every build.\n",
            env!("CARGO_PKG_VERSION")
        );
        header.push_str(&format!("// {note}\n"));
        Ok(header + "\n" + &prettyplease::unparse(&file))
    }

    /// Each plan's `match` and ranges (`plan_items`, a borrowed form where it
    /// differs) and its `Plan` expression.
    fn plan_tokens(&self) -> (Vec<TokenStream>, Vec<TokenStream>) {
        let mut plan_items = Vec::new();
        let mut plans = Vec::new();
        for (index, plan) in self.plans.iter().enumerate() {
            let select = format_ident!("select_{}", index);
            let ranges = format_ident!("RANGES_{}", index);
            plan_items.push(select_fn(&select, &plan.ranges));
            plan_items.push(ranges_static(&ranges, &plan.ranges));
            // A plan borrowed as it is (no fallback, or every range leads by enough)
            // shares its match.
            let (select_borrowed, borrowed) = if plan.borrowed == plan.ranges {
                (select.clone(), ranges.clone())
            } else {
                let select = format_ident!("select_borrowed_{}", index);
                let ranges = format_ident!("RANGES_BORROWED_{}", index);
                plan_items.push(select_fn(&select, &plan.borrowed));
                plan_items.push(ranges_static(&ranges, &plan.borrowed));
                (select, ranges)
            };
            let above = shown::line(&plan.above);
            let shape = plan.shape.iter().map(|v| number(*v));
            let at_shape = (!plan.shape.is_empty()).then(|| quote!(.at_shape(&[#(#shape),*])));
            let OriginData {
                path,
                gpu,
                compute_capability: (major, minor),
                sm_count,
            } = &plan.origin;
            let (path, gpu) = (shown::line(path), shown::line(gpu));
            let (major, minor, sm_count) = (
                number(u64::from(*major)),
                number(u64::from(*minor)),
                number(u64::from(*sm_count)),
            );
            let rt = quote!(::autotune_runtime::dispatch);
            let vendor_points = plan
                .vendor_points
                .iter()
                .any(|r| r.choice.is_some())
                .then(|| {
                    let name = format_ident!("vendor_point_{}", index);
                    let named = format_ident!("VENDOR_RANGES_{}", index);
                    plan_items.push(vendor_point_fn(&name, &plan.vendor_points));
                    plan_items.push(point_ranges_static(&named, &plan.vendor_points));
                    quote!(.with_vendor_points(#name, &#named))
                });
            let lending =
                (borrowed != ranges).then(|| quote!(.lending(&#borrowed, #select_borrowed)));
            plans.push(quote! {
                #rt::Plan::defaults(&#ranges, #select)
                    .from_table(#rt::TableOrigin::new(#path, #gpu, (#major, #minor), #sm_count))
                    #at_shape
                    #lending
                    .above(#above)
                    #vendor_points
            });
        }
        (plan_items, plans)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use autotune_table::testing::assert_contains;

    fn h200() -> OriginData {
        OriginData {
            path: "tuning/nvidia-h200.json".into(),
            gpu: "NVIDIA H200".into(),
            compute_capability: (9, 0),
            sm_count: 132,
        }
    }

    #[test]
    fn renders_a_match_per_plan() {
        let generated = Generated {
            kernel: "rms_norm".into(),
            shape_args: Vec::new(),
            fallback: "fallback".into(),
            images: vec![
                ImageData {
                    name: "block=256".into(),
                    values: vec![256],
                    binary: None,
                },
                ImageData {
                    name: "block=64".into(),
                    values: vec![64],
                    binary: Some(PathBuf::from("/tmp/x.fatbin")),
                },
            ],
            plans: vec![PlanData {
                origin: h200(),
                shape: Vec::new(),
                ranges: vec![
                    Range::new(0, 4095, Choice::Variant(1)),
                    Range::new(4096, 4096, Choice::Variant(0)),
                    Range::new(4097, u64::MAX, Choice::Fallback),
                ],
                borrowed: vec![
                    Range::new(0, 4095, Choice::Variant(1)),
                    Range::new(4096, u64::MAX, Choice::Fallback),
                ],
                above: "measured up to n=4096; above it, the incumbent".into(),
                vendor_points: Vec::new(),
            }],
            default: 0,
            incumbent: true,
            note: "rms_norm: tuned".into(),
            not_compiled: None,
        };
        let text = generated.render().unwrap();
        // Issue 49: with a fallback declared, what runs without a table is it.
        let plain = Generated {
            incumbent: false,
            ..generated.clone()
        }
        .render()
        .unwrap();
        let defaults_of = |text: &str| {
            let at = text.find("fn select_defaults").unwrap();
            text[at..].lines().take(6).collect::<Vec<_>>().join("\n")
        };
        assert!(
            defaults_of(&text).contains("Choice::Fallback"),
            "{}",
            defaults_of(&text)
        );
        assert!(
            defaults_of(&plain).contains("Choice::Variant(0)"),
            "{}",
            defaults_of(&plain)
        );
        assert!(text.starts_with("// @generated by autotune-build"));
        assert_contains(
            &text,
            &[
                "0..=4095 => ::autotune_runtime::Choice::Variant(1),",
                "4096 => ::autotune_runtime::Choice::Variant(0),",
                "4097,\n        u64::MAX,\n",
            ],
        );
        assert_eq!(number(65536).to_string(), "65_536");
        assert_eq!(number(4096).to_string(), "4096");
        assert!(
            text.contains("_ => ::autotune_runtime::Choice::Fallback,"),
            "{text}"
        );
        assert!(text.contains("include_bytes!(\"/tmp/x.fatbin\")"), "{text}");
        // The borrowed ranges have their own match, which the plan names.
        assert_contains(
            &text,
            &[
                "fn select_borrowed_0(key: u64)",
                ".lending(&RANGES_BORROWED_0, select_borrowed_0)",
                ".above(\"measured up to n=4096; above it, the incumbent\")",
            ],
        );
        assert!(
            !text.contains("vendor_point"),
            "no vendor points, no match: {text}"
        );
    }

    /// Where the vendor has points of its own, the plan carries their `match`:
    /// the point per range, `None` where its default launch runs.
    #[test]
    fn renders_the_vendor_s_point_per_range() {
        let point = |name: &str, words| PointData {
            name: name.into(),
            words,
        };
        let mut generated = Generated {
            kernel: "gemm".into(),
            shape_args: vec!["n".into()],
            fallback: "cuBLAS".into(),
            images: vec![ImageData {
                name: "bm=64".into(),
                values: vec![64],
                binary: None,
            }],
            plans: vec![PlanData {
                origin: h200(),
                shape: vec![4096],
                ranges: vec![Range::new(0, u64::MAX, Choice::Fallback)],
                borrowed: vec![Range::new(0, u64::MAX, Choice::Fallback)],
                above: String::new(),
                vendor_points: vec![
                    KeyRange::new(0, 15, None),
                    KeyRange::new(16, 16, Some(point("cuBLAS@00000001", vec![7, 0, 123_456]))),
                    KeyRange::new(17, u64::MAX, Some(point("cuBLAS@00000002", vec![9, 1]))),
                ],
            }],
            default: 0,
            incumbent: true,
            note: "gemm: tuned".into(),
            not_compiled: None,
        };
        let text = generated.render().unwrap();
        assert_contains(
            &text,
            &[
                "fn vendor_point_0(key: u64) -> ::core::option::Option<&'static [u32]> {",
                "0..=15 => ::core::option::Option::None,",
                "16 => ::core::option::Option::Some(&[7, 0, 123_456]),",
                "_ => ::core::option::Option::Some(&[9, 1]),",
                ".with_vendor_points(vendor_point_0, &VENDOR_RANGES_0)",
                "PointRange::new(16, 16, \"cuBLAS@00000001\")",
                "PointRange::new(17, u64::MAX, \"cuBLAS@00000002\")",
            ],
        );
        // The default launch everywhere: nothing to bake.
        generated.plans[0].vendor_points = vec![KeyRange::new(0, u64::MAX, None)];
        let text = generated.render().unwrap();
        assert!(!text.contains("vendor_point"), "{text}");
    }
}

//! The roles of a wrapper's arguments: stream, variant, key, data, plain values.

use syn::{FnArg, GenericArgument, Ident, Pat, PathArguments, ReturnType, Signature, Type};

use crate::Diagnostics;

/// What each argument of an annotated wrapper is for.
#[derive(Debug, Clone)]
pub struct WrapperSignature {
    pub args: Vec<Argument>,
    pub output: ReturnType,
}

#[derive(Debug, Clone)]
pub struct Argument {
    pub ident: Ident,
    pub ty: Type,
    pub role: ArgumentRole,
}

#[derive(Debug, Clone, PartialEq)]
pub enum ArgumentRole {
    /// `&CudaStream` or `&Arc<CudaStream>`: where the kernel is launched.
    Stream,
    /// `&Variant<P>`: the compiled point to launch. `params` names the struct the macro
    /// generates for the point's values; `None` for `Variant<()>` (no parameters).
    Variant { params: Option<Ident> },
    /// Anything else: forwarded unchanged by the dispatch, filled from the case's
    /// field of the same name by the sweep.
    Data,
}

impl WrapperSignature {
    /// Classifies the arguments of `sig`, recording what is unsupported.
    pub fn analyze(sig: &Signature, diag: &mut Diagnostics) -> Option<Self> {
        let errors_before = diag.len();
        if let Some(asyncness) = &sig.asyncness {
            diag.at(
                asyncness,
                "#[autotune] wrappers cannot be `async`: launches are already asynchronous",
            );
        }
        if let Some(constness) = &sig.constness {
            diag.at(constness, "#[autotune] wrappers cannot be `const`");
        }
        if let Some(param) = sig.generics.type_params().next() {
            diag.at(param, "#[autotune] wrappers cannot be generic over types: the sweep must call them with concrete inputs");
        }
        if let Some(param) = sig.generics.const_params().next() {
            diag.at(param, "#[autotune] wrappers cannot take const generics: make it a tunable parameter instead");
        }
        let mut args = Vec::new();
        for input in &sig.inputs {
            let typed = match input {
                FnArg::Receiver(receiver) => {
                    diag.at(
                        receiver,
                        "#[autotune] wrappers are free functions, not methods",
                    );
                    continue;
                }
                FnArg::Typed(typed) => typed,
            };
            let Pat::Ident(pat) = &*typed.pat else {
                diag.at(
                    &typed.pat,
                    "#[autotune] wrapper arguments must be plain names (no patterns)",
                );
                continue;
            };
            let role = classify(&typed.ty);
            args.push(Argument {
                ident: pat.ident.clone(),
                ty: (*typed.ty).clone(),
                role,
            });
        }
        let count =
            |wanted: fn(&ArgumentRole) -> bool| args.iter().filter(|a| wanted(&a.role)).count();
        let streams = count(|r| *r == ArgumentRole::Stream);
        let variants = count(|r| matches!(r, ArgumentRole::Variant { .. }));
        if streams != 1 {
            diag.at(
                &sig.inputs,
                format!("an #[autotune] wrapper takes exactly one `&CudaStream` (or `&Arc<CudaStream>`) argument; found {streams}"),
            );
        }
        if variants != 1 {
            diag.at(
                &sig.inputs,
                format!("an #[autotune] wrapper takes exactly one `&Variant<Params>` argument (the compiled point to launch); found {variants}"),
            );
        }
        if matches!(sig.output, ReturnType::Default) {
            diag.at(
                &sig.ident,
                "an #[autotune] wrapper returns a `Result` (launches can fail)",
            );
        }
        if diag.len() > errors_before {
            return None;
        }
        Some(Self {
            args,
            output: sig.output.clone(),
        })
    }

    pub fn find(&self, name: &str) -> Option<&Argument> {
        self.args.iter().find(|a| a.ident == name)
    }

    pub fn stream(&self) -> Option<&Argument> {
        self.args.iter().find(|a| a.role == ArgumentRole::Stream)
    }

    pub fn variant(&self) -> Option<&Argument> {
        self.args
            .iter()
            .find(|a| matches!(a.role, ArgumentRole::Variant { .. }))
    }

    /// The name of the params struct the wrapper asks for (`Variant<RmsNormParams>`).
    pub fn params_struct(&self) -> Option<&Ident> {
        match &self.variant()?.role {
            ArgumentRole::Variant { params } => params.as_ref(),
            _ => None,
        }
    }

    /// The arguments the dispatch forwards, in order (neither stream nor variant).
    pub fn data(&self) -> impl Iterator<Item = &Argument> {
        self.args.iter().filter(|a| a.role == ArgumentRole::Data)
    }
}

/// Whether `ty` is a primitive integer, the only kind of key a `match` can range over.
pub(crate) fn is_integer(ty: &Type) -> bool {
    integer_max(ty).is_some()
}

/// Whether `ty` is a signed primitive integer (`i32`, `isize`, ...).
pub(crate) fn is_signed(ty: &Type) -> bool {
    match ty {
        Type::Path(path) if path.qself.is_none() => path.path.get_ident().is_some_and(|i| {
            matches!(
                i.to_string().as_str(),
                "i8" | "i16" | "i32" | "i64" | "isize" | "i128"
            )
        }),
        Type::Paren(inner) => is_signed(&inner.elem),
        Type::Group(inner) => is_signed(&inner.elem),
        _ => false,
    }
}

/// The largest value of the primitive integer type `ty` (`usize` taken as 64
/// bits, the targets CUDA runs on), `None` for any other type.
pub(crate) fn integer_max(ty: &Type) -> Option<u64> {
    match ty {
        Type::Path(path) if path.qself.is_none() => {
            let ident = path.path.get_ident()?.to_string();
            Some(match ident.as_str() {
                "u8" => u8::MAX.into(),
                "i8" => i8::MAX as u64,
                "u16" => u16::MAX.into(),
                "i16" => i16::MAX as u64,
                "u32" => u32::MAX.into(),
                "i32" => i32::MAX as u64,
                "u64" | "usize" => u64::MAX,
                "i64" | "isize" => i64::MAX as u64,
                _ => return None,
            })
        }
        Type::Paren(inner) => integer_max(&inner.elem),
        Type::Group(inner) => integer_max(&inner.elem),
        _ => None,
    }
}

fn classify(ty: &Type) -> ArgumentRole {
    let Type::Reference(reference) = ty else {
        return ArgumentRole::Data;
    };
    let Type::Path(path) = &*reference.elem else {
        return ArgumentRole::Data;
    };
    let Some(last) = path.path.segments.last() else {
        return ArgumentRole::Data;
    };
    if last.ident == "CudaStream" && reference.mutability.is_none() {
        return ArgumentRole::Stream;
    }
    let single_type_arg = || match &last.arguments {
        PathArguments::AngleBracketed(args) if args.args.len() == 1 => match &args.args[0] {
            GenericArgument::Type(inner) => Some(inner),
            _ => None,
        },
        _ => None,
    };
    if last.ident == "Arc"
        && single_type_arg()
            .is_some_and(|inner| last_ident(inner).is_some_and(|i| i == "CudaStream"))
    {
        return ArgumentRole::Stream;
    }
    if last.ident == "Variant"
        && let Some(inner) = single_type_arg()
    {
        return match inner {
            Type::Tuple(tuple) if tuple.elems.is_empty() => ArgumentRole::Variant { params: None },
            Type::Path(p) if p.qself.is_none() => match p.path.get_ident() {
                Some(ident) => ArgumentRole::Variant {
                    params: Some(ident.clone()),
                },
                None => ArgumentRole::Data,
            },
            _ => ArgumentRole::Data,
        };
    }
    ArgumentRole::Data
}

fn last_ident(ty: &Type) -> Option<&Ident> {
    match ty {
        Type::Path(path) => path.path.segments.last().map(|s| &s.ident),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn analyze(item: &str) -> Result<WrapperSignature, String> {
        let item: syn::ItemFn = syn::parse_str(item).unwrap();
        let mut diag = Diagnostics::new();
        let sig = WrapperSignature::analyze(&item.sig, &mut diag);
        diag.finish(()).map_err(|e| e.to_string())?;
        Ok(sig.unwrap())
    }

    #[test]
    fn classifies_stream_variant_and_data() {
        let sig = analyze(
            "fn f(s: &Arc<CudaStream>, v: &Variant<P>, x: &CudaSlice<f32>, n: usize) -> Result<(), E> {}",
        )
        .unwrap();
        assert_eq!(sig.stream().unwrap().ident, "s");
        assert_eq!(sig.params_struct().unwrap(), "P");
        assert_eq!(
            sig.data().map(|a| a.ident.to_string()).collect::<Vec<_>>(),
            ["x", "n"]
        );
        assert!(is_integer(&sig.find("n").unwrap().ty));
        assert!(!is_integer(&sig.find("x").unwrap().ty));
        let unit = analyze("fn f(s: &CudaStream, v: &Variant<()>) -> Result<(), E> {}").unwrap();
        assert_eq!(unit.params_struct(), None);
    }

    #[test]
    fn reports_missing_stream_and_variant_and_async() {
        let error = analyze("async fn f(x: usize) {}").unwrap_err();
        assert!(error.contains("cannot be `async`"), "{error}");
        let error = analyze("fn f(x: usize) -> Result<(), E> {}").unwrap_err();
        assert!(error.contains("`&CudaStream`"), "{error}");
    }
}

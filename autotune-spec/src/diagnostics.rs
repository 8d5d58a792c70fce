//! Errors of one attribute collected, so that they are reported all at once.

use std::fmt::Display;

use proc_macro2::Span;
use quote::ToTokens;

/// Collects every error of one attribute so that they are reported together.
#[derive(Debug, Default)]
pub struct Diagnostics {
    error: Option<syn::Error>,
    count: usize,
}

impl Diagnostics {
    pub fn new() -> Self {
        Self::default()
    }

    /// Records an error spanning `tokens` (`syn::Error::new_spanned`).
    pub fn at<T: ToTokens, M: Display>(&mut self, tokens: T, message: M) {
        self.push(syn::Error::new_spanned(tokens, message));
    }

    /// Records an error at `span`.
    pub fn at_span<M: Display>(&mut self, span: Span, message: M) {
        self.push(syn::Error::new(span, message));
    }

    pub fn push(&mut self, error: syn::Error) {
        self.count += 1;
        match &mut self.error {
            Some(existing) => existing.combine(error),
            None => self.error = Some(error),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.error.is_none()
    }

    /// How many errors were recorded.
    pub fn len(&self) -> usize {
        self.count
    }

    /// Every recorded error at once (a generic one if, wrongly, none was recorded).
    pub fn into_error(self) -> syn::Error {
        self.error
            .unwrap_or_else(|| syn::Error::new(Span::call_site(), "invalid #[autotune] attribute"))
    }

    /// `Ok(value)` when nothing was recorded, else every recorded error at once.
    pub fn finish<T>(self, value: T) -> syn::Result<T> {
        match self.error {
            Some(error) => Err(error),
            None => Ok(value),
        }
    }
}

//! A wrapper whose fallback is dispatched over another key does not compile: the
//! macro's `const _: () = SPEC.check_fallback();` fails to evaluate.

#[test]
fn a_fallback_over_another_key_is_a_compile_error() {
    trybuild::TestCases::new().compile_fail("tests/compile_fail/*.rs");
}

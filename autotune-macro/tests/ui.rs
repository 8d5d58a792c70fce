//! Every malformed `#[autotune]` attribute is a compile error on the tokens at
//! fault, all of one attribute's errors at once (`tests/ui/*.rs` and the `.stderr`
//! beside each).

#[test]
fn malformed_attributes() {
    trybuild::TestCases::new().compile_fail("tests/ui/*.rs");
}

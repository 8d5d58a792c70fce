//! The PTX-only kernel is baked with its image whether or not nvcc is here: there
//! is nothing to compile (a machine without nvcc builds the CUDA kernels without
//! binaries, and says so).

use library_softmax::softmax_constant::{SoftmaxConstant, SoftmaxConstantLibrary};
use library_softmax::softmax_ptx::{SoftmaxPtx, SoftmaxPtxLibrary};

#[test]
fn the_ptx_is_baked_with_or_without_nvcc() {
    let ptx = std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/kernels/softmax.ptx"))
        .expect("the committed PTX");
    for baked in [SoftmaxPtx::baked(), SoftmaxPtxLibrary::baked()] {
        assert_eq!(baked.not_compiled, None, "{}", baked.note);
        for image in baked.images {
            // The file as it is, with the NUL the driver reads PTX text up to.
            assert_eq!(
                image.binary.strip_suffix(&[0]),
                Some(&ptx[..]),
                "{}",
                image.name
            );
        }
    }
}

/// The constant form bakes the constant's bytes, the very text the library loads,
/// read by the build script through its build-dependency.
#[test]
fn the_constant_is_baked_as_the_library_ships_it() {
    for baked in [SoftmaxConstant::baked(), SoftmaxConstantLibrary::baked()] {
        assert_eq!(baked.not_compiled, None, "{}", baked.note);
        assert!(!baked.images.is_empty());
        for image in baked.images {
            assert_eq!(
                image.binary.strip_suffix(&[0]),
                Some(softmax_kernels::SOFTMAX.as_bytes()),
                "{}",
                image.name
            );
        }
    }
}

//! Inputs timed cold (`inputs = cold`, `Case::rotating`): the copies the sweep
//! rotates a case's input through hold the original's values, each launch reads
//! another buffer, and the case reads its original again once timing is over. On a
//! GPU; reported ignored without one.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a failure is the test's
#![allow(clippy::disallowed_methods)] // tests read and set up their own environment

use autotune_harness::{self as harness, trials};
#[path = "fixtures/device.rs"]
mod device;

use std::collections::BTreeSet;

use autotune_runtime::cudarc::driver::{CudaSlice, CudaStream, DevicePtr};
use autotune_runtime::gate::input::Input;
use autotune_runtime::gate::random::fill_uniform;
use autotune_runtime::gate::rotation::{Rotate, Rotating, copies_for};
use autotune_runtime::half::bf16;

/// The device address `buffer` starts at.
fn address<T>(buffer: &CudaSlice<T>, stream: &CudaStream) -> u64 {
    let (pointer, _record) = buffer.device_ptr(stream);
    pointer
}

fn each_copy_holds_the_draw_and_each_launch_reads_another_buffer() {
    let Some(ctx) = device::open_or_skip() else {
        return;
    };
    let stream = ctx.default_stream();
    let len = 3 << 20; // 6 MiB of bf16: 25 buffers cover a 50 MiB L2 three times
    let mut input = Input::<bf16>::alloc(&stream, len).unwrap();
    input
        .draw(&stream, 11, |host| fill_uniform(host, 11, -1.0, 1.0))
        .unwrap();
    let drawn = input.host().to_vec();
    let original = address(&input, &stream);
    let buffers = copies_for(input.bytes(), 50 << 20).expect("6 MiB rotates");
    assert_eq!(buffers, 25);
    input.make_copies(&stream, buffers as usize).unwrap();
    let mut seen = BTreeSet::new();
    for launch in 0..buffers as usize {
        input.select(launch);
        seen.insert(address(&input, &stream));
        assert_eq!(
            stream.clone_dtoh(&*input).unwrap(),
            drawn,
            "buffer {launch} holds the draw"
        );
    }
    assert_eq!(
        seen.len(),
        buffers as usize,
        "one buffer per launch of a round"
    );
    input.select(buffers as usize);
    assert_eq!(
        address(&input, &stream),
        original,
        "a round wraps to the original"
    );
    input.select(3);
    input.release();
    assert_eq!(
        address(&input, &stream),
        original,
        "released: the original again"
    );
    // A later draw lands in the original, not in a copy.
    input
        .draw(&stream, 12, |host| fill_uniform(host, 12, -1.0, 1.0))
        .unwrap();
    assert_eq!(stream.clone_dtoh(&*input).unwrap(), input.host());
}

fn a_plain_rotating_buffer_rotates_the_same_way() {
    let Some(ctx) = device::open_or_skip() else {
        return;
    };
    let stream = ctx.default_stream();
    let values: Vec<f32> = (0..1000).map(|i| i as f32).collect();
    let mut buffer = Rotating::new(stream.clone_htod(&values).unwrap());
    buffer.make_copies(&stream, 3).unwrap();
    let addresses: BTreeSet<u64> = (0..3)
        .map(|i| {
            buffer.select(i);
            assert_eq!(stream.clone_dtoh(&*buffer).unwrap(), values);
            address(&buffer, &stream)
        })
        .collect();
    assert_eq!(addresses.len(), 3);
    buffer.release();
    assert_eq!(buffer.bytes(), 4000);
}

/// An input's copies are compared with its draw (on the device where the gate's
/// kernels run), not with whatever its buffer holds: a buffer a launch wrote over
/// gives no copies, and the error says where they differ.
fn an_input_no_longer_holding_its_draw_gives_no_copies() {
    let Some(ctx) = device::open_or_skip() else {
        return;
    };
    let stream = ctx.default_stream();
    let mut input = Input::<bf16>::alloc(&stream, 1 << 16).unwrap();
    input
        .draw(&stream, 5, |host| fill_uniform(host, 5, -1.0, 1.0))
        .unwrap();
    let original = address(&input, &stream);
    let mut written = input.host().to_vec();
    written[777] = bf16::from_f32(1e4);
    stream.memcpy_htod(&written, &mut *input).unwrap();
    let error = input.make_copies(&stream, 4).unwrap_err().to_string();
    assert!(
        error.contains("does not hold the original's values") && error.contains("at 777"),
        "{error}"
    );
    input.select(1);
    assert_eq!(address(&input, &stream), original, "no copy was kept");
}

/// A copy the judge finds different drops every copy made before it.
fn a_copy_judged_different_drops_the_copies() {
    let Some(ctx) = device::open_or_skip() else {
        return;
    };
    let stream = ctx.default_stream();
    let mut buffer = Rotating::new(stream.clone_htod(&[1.0f32; 64]).unwrap());
    let original = address(&buffer, &stream);
    let mut judged = 0;
    let error = buffer
        .make_copies_judged(&stream, 4, |_| {
            judged += 1;
            Ok((judged == 2).then(|| "planted".to_string()))
        })
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("copy 2") && error.contains("planted"),
        "{error}"
    );
    buffer.select(1);
    assert_eq!(address(&buffer, &stream), original, "no copy was kept");
}

fn main() -> std::process::ExitCode {
    harness::run(
        trials![],
        trials![
            each_copy_holds_the_draw_and_each_launch_reads_another_buffer,
            a_plain_rotating_buffer_rotates_the_same_way,
            an_input_no_longer_holding_its_draw_gives_no_copies,
            a_copy_judged_different_drops_the_copies
        ],
    )
}

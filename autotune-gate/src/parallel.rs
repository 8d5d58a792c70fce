//! Splitting CPU work (random inputs, references, comparisons) over all cores, with
//! results that do not depend on the number of cores.

use std::ops::Range;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Elements per chunk: the unit of work and of random-number streams.
pub const CHUNK: usize = 1 << 16;

/// Runs `task(i)` for every `i` in `0..count` on all cores; results in index order.
pub fn map_indices<R: Send>(count: usize, task: impl Fn(usize) -> R + Sync) -> Vec<R> {
    let workers = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(count)
        .max(1);
    let results: Vec<Mutex<Option<R>>> = (0..count).map(|_| Mutex::new(None)).collect();
    let next = AtomicUsize::new(0);
    std::thread::scope(|scope| {
        for _ in 0..workers {
            scope.spawn(|| {
                loop {
                    let index = next.fetch_add(1, Ordering::Relaxed);
                    if index >= count {
                        break;
                    }
                    let value = task(index);
                    if let Ok(mut slot) = results[index].lock() {
                        *slot = Some(value);
                    }
                }
            });
        }
    });
    results
        .into_iter()
        .filter_map(|slot| slot.into_inner().ok().flatten())
        .collect()
}

/// Calls `f(chunk_index, chunk)` for every `CHUNK`-sized piece of `data`, in parallel.
pub fn for_chunks_mut<T: Send>(data: &mut [T], f: impl Fn(usize, &mut [T]) + Sync) {
    for_pieces_mut(data, CHUNK, f);
}

/// Calls `f(index, piece)` for every `size`-sized piece of `data` (the last may be
/// shorter), in parallel: a whole number of rows per piece, say.
pub fn for_pieces_mut<T: Send>(data: &mut [T], size: usize, f: impl Fn(usize, &mut [T]) + Sync) {
    let pieces: Vec<Mutex<&mut [T]>> = data.chunks_mut(size.max(1)).map(Mutex::new).collect();
    map_indices(pieces.len(), |index| {
        if let Ok(mut piece) = pieces[index].lock() {
            f(index, &mut piece);
        }
    });
}

/// Runs `f` over `chunk`-sized ranges of `0..len` on all cores; results in order.
pub fn map_ranges<R: Send>(
    len: usize,
    chunk: usize,
    f: impl Fn(Range<usize>) -> R + Sync,
) -> Vec<R> {
    let chunk = chunk.max(1);
    map_indices(len.div_ceil(chunk), |index| {
        f(index * chunk..((index + 1) * chunk).min(len))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_are_the_size_asked_for_the_last_shorter() {
        let mut data = vec![0usize; 25];
        for_pieces_mut(&mut data, 10, |index, piece| {
            let len = piece.len();
            piece.iter_mut().for_each(|v| *v = 100 * index + len)
        });
        assert_eq!((data[0], data[19], data[20], data[24]), (10, 110, 205, 205));
    }

    #[test]
    fn covers_every_element_once() {
        let mut data = vec![0u32; 3 * CHUNK + 17];
        for_chunks_mut(&mut data, |index, chunk| {
            chunk.iter_mut().for_each(|v| *v += index as u32 + 1)
        });
        assert_eq!(data[0], 1);
        assert_eq!(data[3 * CHUNK + 16], 4);
        let parts: Vec<(f64, f64)> = map_ranges(data.len(), CHUNK, |r| {
            (r.clone().map(|i| f64::from(data[i])).sum(), r.len() as f64)
        });
        assert_eq!(parts.len(), 4, "one result per chunk, in order");
        let (sum, count) = parts
            .iter()
            .fold((0.0, 0.0), |(a, b), (x, y)| (a + x, b + y));
        assert_eq!(count, data.len() as f64);
        assert_eq!(sum, (CHUNK * (1 + 2 + 3) + 17 * 4) as f64);
        assert_eq!(map_indices(5, |i| i * i), [0, 1, 4, 9, 16]);
    }
}

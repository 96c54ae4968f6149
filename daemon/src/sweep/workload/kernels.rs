//! The loop bodies. Each runs one chunk of work and returns how many operations it did, so
//! the caller can add the chunk to its counter and look at the stop flag between chunks.
//! A chunk is sized to take well under 1 ms even in an unoptimised build on a slow core:
//! spin 4096 steps of a few ns, memory 256 cache-missing loads of 100-800 ns (800 ns measured
//! in a virtual machine, where every miss also walks nested page tables), pause 1024 hints of
//! 10-150 cycles.

use std::hint::black_box;

/// Spin steps per chunk.
pub(super) const SPIN_CHUNK: u64 = 4096;
/// Dependent loads per chunk.
pub(super) const MEMORY_CHUNK: u64 = 256;
/// Pause hints per chunk.
pub(super) const PAUSE_CHUNK: u64 = 1024;

/// Register-resident state of the compute-bound loop.
pub(super) struct SpinState {
    x: u64,
    f: f64,
}

impl SpinState {
    pub(super) fn new(seed: u64) -> SpinState {
        SpinState {
            x: seed | 1,
            f: 1.0,
        }
    }
}

/// One chunk of the compute-bound loop: an xorshift64 step (integer ALU) feeding a
/// multiply-add (FP unit) per operation, all in registers. `black_box` on the state at both
/// ends keeps the optimiser from folding or deleting the chunk.
pub(super) fn spin_chunk(state: &mut SpinState) -> u64 {
    let mut x = black_box(state.x);
    let mut f = black_box(state.f);
    for _ in 0..SPIN_CHUNK {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        // Decays towards a bounded value, so it never overflows to inf or NaN.
        f = f * 0.999_999_9 + (x & 0xff) as f64 * 1e-9;
    }
    state.x = black_box(x);
    state.f = black_box(f);
    SPIN_CHUNK
}

/// One chunk of the memory-bound loop: `MEMORY_CHUNK` loads, each address taken from the
/// value of the load before, starting from `*at` and leaving `*at` where it stopped.
pub(super) fn memory_chunk(next: &[u32], at: &mut usize) -> u64 {
    let mut i = black_box(*at);
    for _ in 0..MEMORY_CHUNK {
        // The permutation only holds in-range indices; `get` keeps bad input from panicking.
        i = next.get(i).map_or(0, |&n| n as usize);
    }
    *at = black_box(i);
    MEMORY_CHUNK
}

/// One chunk of the spin-wait loop: `PAUSE_CHUNK` CPU pause hints (`PAUSE` on x86, `YIELD`
/// or `ISB` on Arm), the instruction a polite spin lock executes while it waits.
pub(super) fn pause_chunk() -> u64 {
    for _ in 0..PAUSE_CHUNK {
        std::hint::spin_loop();
    }
    PAUSE_CHUNK
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spin_state_changes_and_stays_finite() {
        let mut s = SpinState::new(7);
        let before = s.x;
        for _ in 0..100 {
            assert_eq!(spin_chunk(&mut s), SPIN_CHUNK);
        }
        assert_ne!(s.x, before);
        assert!(s.f.is_finite() && s.f > 0.0);
    }

    #[test]
    fn memory_chunk_follows_the_chain() {
        // 0 -> 2 -> 1 -> 0: after 256 steps (256 % 3 == 1) we stand one step on.
        let next = [2u32, 0, 1];
        let mut at = 0;
        assert_eq!(memory_chunk(&next, &mut at), MEMORY_CHUNK);
        assert_eq!(at, 2);
    }
}

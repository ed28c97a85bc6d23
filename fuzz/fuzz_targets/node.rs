//! Frames a live node never asked for.
//!
//! A pair of nodes is brought up once (as in `proto/tests/pair.rs`); every
//! input is split into frames that are fed to one node of a copy of that
//! pair. Each frame is checked against the oracle shared with the property
//! test `tests/tests/wire_props.rs`: it is counted exactly where it should be
//! (`malformed` by reason, `stale_epoch`, `stale_slot_frames`), garbage
//! leaves no trace, and memory never changes unless the input forged a
//! well-formed REQUEST with the current epochs and the region's key (which a
//! target must apply: keys are OAE's only access control). Afterwards the
//! pair talks and lets time pass, and memory is checked again.
//!
//! With bit 1 of the first byte the pair's link is authenticated (as
//! `oaed` runs it with a key): no input was sealed for the node, so each
//! frame must be dropped by its authenticator, counted once, before the
//! link sees it, and the pair must talk on (the harness's `SealedFeeder`).
//! The captured frames are then the authenticated pair's own.
//!
//! Input: one byte choosing the node (bit 0) and the pair (bit 1), then
//! chunks, each starting with a mode byte:
//! - `0`: raw, `len: u16 BE` (mod 1100), then `len` bytes fed as they are;
//! - `1`: the same, with the CRC recomputed;
//! - `2`: a captured real frame (`index: u8`), `at: u16 BE`, `n: u8` (mod 64)
//!   then `n` bytes XORed into it from `at` on (wrapping), CRC recomputed;
//! - `3`: as `2`, preceded by `new_len: u16 BE` (mod 1100) resizing the frame.

#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use oae_proto::wire::{self, MAX_FRAME, TRAILER_LEN};
use oae_proto::{Nanos, Node};

#[path = "../../tests/tests/wire_props/harness.rs"]
#[allow(dead_code)]
mod harness;

const MAX_LEN: usize = MAX_FRAME + 76;
const MAX_CHUNKS: usize = 128;

struct Setup {
    nodes: [Node; 2],
    now: Nanos,
    frames: Vec<Vec<u8>>,
}

fn setup() -> &'static Setup {
    static SETUP: OnceLock<Setup> = OnceLock::new();
    SETUP.get_or_init(|| {
        let (nodes, now, _) = harness::live_pair();
        Setup {
            nodes,
            now,
            frames: harness::captured_frames(),
        }
    })
}

fn sealed_setup() -> &'static Setup {
    static SETUP: OnceLock<Setup> = OnceLock::new();
    SETUP.get_or_init(|| {
        let (nodes, now, frames) = harness::live_sealed_pair();
        Setup { nodes, now, frames }
    })
}

struct Input<'a> {
    data: &'a [u8],
}

impl<'a> Input<'a> {
    fn u8(&mut self) -> Option<u8> {
        let (&b, rest) = self.data.split_first()?;
        self.data = rest;
        Some(b)
    }
    fn u16(&mut self) -> Option<u16> {
        Some(u16::from_be_bytes([self.u8()?, self.u8()?]))
    }
    fn take(&mut self, n: usize) -> &'a [u8] {
        let (head, rest) = self.data.split_at(n.min(self.data.len()));
        self.data = rest;
        head
    }

    fn next_frame(&mut self, frames: &[Vec<u8>]) -> Option<Vec<u8>> {
        let mode = self.u8()? % 4;
        match mode {
            0 | 1 => {
                let len = usize::from(self.u16()?) % MAX_LEN;
                let mut f = self.take(len).to_vec();
                if mode == 1 && f.len() >= TRAILER_LEN {
                    wire::seal(&mut f);
                }
                Some(f)
            }
            _ => {
                let mut f = frames[usize::from(self.u8()?) % frames.len()].clone();
                if mode == 3 {
                    f.resize(usize::from(self.u16()?) % MAX_LEN, 0);
                }
                let at = usize::from(self.u16()?);
                let n = usize::from(self.u8()? % 64);
                let xor = self.take(n);
                if !f.is_empty() {
                    let len = f.len();
                    for (i, x) in xor.iter().enumerate() {
                        f[(at + i) % len] ^= x;
                    }
                }
                if f.len() >= TRAILER_LEN {
                    wire::seal(&mut f);
                }
                Some(f)
            }
        }
    }
}

impl Input<'_> {
    /// Each frame of the input, up to [`MAX_CHUNKS`], made from `frames`.
    fn each_frame(&mut self, frames: &[Vec<u8>], mut feed: impl FnMut(&[u8])) {
        for _ in 0..MAX_CHUNKS {
            let Some(frame) = self.next_frame(frames) else {
                break;
            };
            feed(&frame);
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let mut input = Input { data };
    let Some(first) = input.u8() else {
        return;
    };
    let to = usize::from(first & 1);
    if first & 2 != 0 {
        let s = sealed_setup();
        let mut feeder = harness::SealedFeeder::new(s.nodes.clone(), s.now, to);
        input.each_frame(&s.frames, |f| feeder.feed(f));
        feeder.finish();
    } else {
        let s = setup();
        let mut feeder = harness::Feeder::new(s.nodes.clone(), s.now, to);
        input.each_frame(&s.frames, |f| feeder.feed(f));
        feeder.finish();
    }
});

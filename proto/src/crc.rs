//! CRC32C (Castagnoli), the check every OAE frame ends with.
//!
//! Frames are short (60 bytes are checked in the smallest class), and a
//! verb computes four CRCs: two frames sealed, two checked. The `crc32c`
//! crate dispatches at run time on every call and is built for long
//! buffers; on a 64-byte frame that costs about three times the crc32
//! instructions themselves (`perf/benches/cas_round_trip.rs` prints both).
//! So on x86_64 with SSE4.2 (every server CPU since 2008, found at run
//! time) the CPU's instruction runs here, eight bytes at a time; anywhere
//! else the crate does. The one `unsafe` is the call into the SSE4.2
//! function, after the check that the CPU has it.
#![allow(unsafe_code)]

/// The CRC32C of `data`, as `crc32c::crc32c` gives it.
#[inline]
pub fn crc32c(data: &[u8]) -> u32 {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("sse4.2") {
        // SAFETY: `sse42` needs SSE4.2 and nothing else, and the CPU has it
        // (checked just above).
        return unsafe { sse42(data) };
    }
    crc32c::crc32c(data)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "sse4.2")]
fn sse42(data: &[u8]) -> u32 {
    use core::arch::x86_64::{_mm_crc32_u8, _mm_crc32_u32, _mm_crc32_u64};
    let mut words = data.chunks_exact(8);
    let mut crc = u64::from(u32::MAX);
    for word in &mut words {
        crc = _mm_crc32_u64(
            crc,
            u64::from_le_bytes(word.try_into().expect("eight bytes")),
        );
    }
    let mut crc = crc as u32;
    let mut quads = words.remainder().chunks_exact(4);
    for quad in &mut quads {
        crc = _mm_crc32_u32(
            crc,
            u32::from_le_bytes(quad.try_into().expect("four bytes")),
        );
    }
    for &byte in quads.remainder() {
        crc = _mm_crc32_u8(crc, byte);
    }
    !crc
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn the_check_value_of_the_standard() {
        // RFC 3720, B.4: CRC32C of "123456789".
        assert_eq!(crc32c(b"123456789"), 0xE306_9283);
        assert_eq!(crc32c(&[]), 0);
    }

    proptest! {
        #[test]
        fn equals_the_portable_crate(data in prop::collection::vec(any::<u8>(), 0..2100)) {
            prop_assert_eq!(crc32c(&data), crc32c::crc32c(&data));
        }

        #[test]
        fn equals_the_portable_crate_at_any_alignment(
            data in prop::collection::vec(any::<u8>(), 0..200),
            skip in 0usize..8,
        ) {
            let data = &data[skip.min(data.len())..];
            prop_assert_eq!(crc32c(data), crc32c::crc32c(data));
        }
    }
}

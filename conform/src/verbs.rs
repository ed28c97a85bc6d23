//! Verb payloads (docs/PROTOCOL.md, "Verbs") and a model of the target's
//! memory to check results against.

use crate::frame;

/// A verb as the tester sends it to the IUT's region.
#[derive(Clone, Debug)]
pub enum Verb {
    Read {
        offset: u32,
        len: u16,
    },
    Write {
        offset: u32,
        data: Vec<u8>,
    },
    Cas {
        offset: u32,
        expected: u64,
        new: u64,
    },
    Faa {
        offset: u32,
        add: u64,
    },
    Swap {
        offset: u32,
        new: u64,
    },
    Mcas {
        words: Vec<(u32, u64, u64)>,
    },
    Bswap {
        offset: u32,
        block: Vec<u8>,
    },
}

impl Verb {
    pub fn name(&self) -> &'static str {
        match self {
            Verb::Read { .. } => "READ",
            Verb::Write { .. } => "WRITE",
            Verb::Cas { .. } => "CAS",
            Verb::Faa { .. } => "FETCH_ADD",
            Verb::Swap { .. } => "SWAP",
            Verb::Mcas { .. } => "MULTI-WORD COMMIT",
            Verb::Bswap { .. } => "BILATERAL SWAP",
        }
    }

    /// The request payload for region `region` with `key`.
    pub fn request(&self, region: u16, key: u32) -> Vec<u8> {
        let (opcode, count) = match self {
            Verb::Read { .. } => (1, 0),
            Verb::Write { .. } => (2, 0),
            Verb::Cas { .. } => (3, 0),
            Verb::Faa { .. } => (4, 0),
            Verb::Swap { .. } => (5, 0),
            Verb::Mcas { words } => (6, words.len() as u8),
            Verb::Bswap { .. } => (7, 0),
        };
        let mut p = vec![opcode, count];
        p.extend(region.to_be_bytes());
        p.extend(key.to_be_bytes());
        match self {
            Verb::Read { offset, len } => {
                p.extend(offset.to_be_bytes());
                p.extend(len.to_be_bytes());
            }
            Verb::Write { offset, data }
            | Verb::Bswap {
                offset,
                block: data,
            } => {
                p.extend(offset.to_be_bytes());
                p.extend((data.len() as u16).to_be_bytes());
                p.extend(data);
            }
            Verb::Cas {
                offset,
                expected,
                new,
            } => {
                p.extend(offset.to_be_bytes());
                p.extend(expected.to_be_bytes());
                p.extend(new.to_be_bytes());
            }
            Verb::Faa { offset, add: v } | Verb::Swap { offset, new: v } => {
                p.extend(offset.to_be_bytes());
                p.extend(v.to_be_bytes());
            }
            Verb::Mcas { words } => {
                for (offset, expected, new) in words {
                    p.extend(offset.to_be_bytes());
                    p.extend(expected.to_be_bytes());
                    p.extend(new.to_be_bytes());
                }
            }
        }
        p
    }

    fn result_len(&self) -> usize {
        match self {
            Verb::Read { len, .. } => 2 + usize::from(*len),
            Verb::Write { .. } => 0,
            Verb::Cas { .. } | Verb::Faa { .. } | Verb::Swap { .. } => 8,
            Verb::Mcas { words } => 2 + 8 * words.len(),
            Verb::Bswap { block, .. } => 2 + block.len(),
        }
    }

    /// The smallest class holding the request and the echo (V1).
    pub fn class(&self) -> u8 {
        let need = (self.request(0, 0).len()).max(8 + self.result_len());
        (0..=4)
            .find(|&c| frame::capacity(c) >= need)
            .expect("fits a 1024-byte frame")
    }

    /// The result the IUT must echo, given its memory `m` (`base` = the
    /// region offset `m` starts at), and applies the verb to `m`.
    pub fn apply(&self, m: &mut [u8], base: u32) -> Vec<u8> {
        let at = |offset: &u32| (offset - base) as usize;
        let word = |m: &[u8], i: usize| u64::from_le_bytes(m[i..i + 8].try_into().unwrap());
        let mut r = Vec::new();
        match self {
            Verb::Read { offset, len } => {
                r.extend(len.to_be_bytes());
                r.extend(&m[at(offset)..at(offset) + usize::from(*len)]);
            }
            Verb::Write { offset, data } => {
                m[at(offset)..at(offset) + data.len()].copy_from_slice(data);
            }
            Verb::Cas {
                offset,
                expected,
                new,
            } => {
                let old = word(m, at(offset));
                if old == *expected {
                    m[at(offset)..at(offset) + 8].copy_from_slice(&new.to_le_bytes());
                }
                r.extend(old.to_be_bytes());
            }
            Verb::Faa { offset, add } => {
                let old = word(m, at(offset));
                m[at(offset)..at(offset) + 8]
                    .copy_from_slice(&old.wrapping_add(*add).to_le_bytes());
                r.extend(old.to_be_bytes());
            }
            Verb::Swap { offset, new } => {
                let old = word(m, at(offset));
                m[at(offset)..at(offset) + 8].copy_from_slice(&new.to_le_bytes());
                r.extend(old.to_be_bytes());
            }
            Verb::Mcas { words } => {
                let olds: Vec<u64> = words.iter().map(|(o, _, _)| word(m, at(o))).collect();
                let all = words.iter().zip(&olds).all(|((_, e, _), old)| e == old);
                if all {
                    for (o, _, new) in words {
                        m[at(o)..at(o) + 8].copy_from_slice(&new.to_le_bytes());
                    }
                }
                r.push(u8::from(all));
                r.push(words.len() as u8);
                for old in olds {
                    r.extend(old.to_be_bytes());
                }
            }
            Verb::Bswap { offset, block } => {
                let range = at(offset)..at(offset) + block.len();
                r.extend((block.len() as u16).to_be_bytes());
                r.extend(&m[range.clone()]);
                m[range].copy_from_slice(block);
            }
        }
        r
    }
}

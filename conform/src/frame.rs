//! OAE frames as docs/PROTOCOL.md ("Frames") defines them, written from
//! the specification alone.

pub const ETHERTYPE: u16 = 0x88B5;
pub const VERSION: u8 = 2;
/// Context, epochs and order slices.
pub const HEADER: usize = 24;

/// (state, code) of each transition.
pub const HELLO: (u8, u8) = (1, 1);
pub const TICK: (u8, u8) = (1, 2);
pub const TOCK: (u8, u8) = (1, 3);
pub const HANDSHAKE: (u8, u8) = (1, 4);
pub const REQUEST: (u8, u8) = (2, 1);
pub const ECHO: (u8, u8) = (2, 2);
pub const COMMIT: (u8, u8) = (2, 3);
pub const COMMIT_ACK: (u8, u8) = (2, 4);
pub const REFUSE: (u8, u8) = (2, 5);
pub const REVERSE: (u8, u8) = (2, 6);
pub const REVERSE_ACK: (u8, u8) = (2, 7);

pub fn name(t: (u8, u8)) -> &'static str {
    match t {
        HELLO => "HELLO",
        TICK => "TICK",
        TOCK => "TOCK",
        HANDSHAKE => "HANDSHAKE",
        REQUEST => "REQUEST",
        ECHO => "ECHO",
        COMMIT => "COMMIT",
        COMMIT_ACK => "COMMIT_ACK",
        REFUSE => "REFUSE",
        REVERSE => "REVERSE",
        REVERSE_ACK => "REVERSE_ACK",
        (3, 1) => "ADVERT",
        (3, 2) => "FORWARD",
        _ => "unknown",
    }
}

/// Whether a transition carries the direction bit.
pub fn is_reverse(t: (u8, u8)) -> bool {
    matches!(t, REFUSE | REVERSE | REVERSE_ACK)
}

pub fn frame_len(class: u8) -> usize {
    64 << class
}

/// Payload bytes of a frame of `class`.
pub fn capacity(class: u8) -> usize {
    frame_len(class) - HEADER - 4
}

/// Every field of a frame's first three slices.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    pub class: u8,
    pub level: u8,
    pub bob: bool,
    pub transition: (u8, u8),
    pub previous_committed: bool,
    pub field: u32,
    pub sender_epoch: u32,
    pub receiver_epoch: u32,
    pub order: u32,
    pub seen: u32,
}

impl Header {
    pub fn slot(&self) -> u16 {
        (self.field >> 16) as u16
    }

    pub fn seq(&self) -> u16 {
        self.field as u16
    }

    pub fn context(&self) -> [u8; 8] {
        let mut transition = self.transition.1;
        if is_reverse(self.transition) {
            transition |= 0x80;
        }
        if self.previous_committed {
            transition |= 0x40;
        }
        let f = self.field.to_be_bytes();
        [
            (VERSION << 4) | self.class,
            self.level | if self.bob { 0x04 } else { 0 },
            self.transition.0,
            transition,
            f[0],
            f[1],
            f[2],
            f[3],
        ]
    }
}

/// A frame: the header, then `payload` (zero-padded to the class's size),
/// then the CRC32C.
pub fn build(h: &Header, payload: &[u8]) -> Vec<u8> {
    let mut f = vec![0u8; frame_len(h.class)];
    f[..8].copy_from_slice(&h.context());
    f[8..12].copy_from_slice(&h.sender_epoch.to_be_bytes());
    f[12..16].copy_from_slice(&h.receiver_epoch.to_be_bytes());
    f[16..20].copy_from_slice(&h.order.to_be_bytes());
    f[20..24].copy_from_slice(&h.seen.to_be_bytes());
    f[HEADER..HEADER + payload.len()].copy_from_slice(payload);
    seal(&mut f);
    f
}

/// Rewrites the CRC after an edit.
pub fn seal(f: &mut [u8]) {
    let n = f.len();
    let crc = crc32c::crc32c(&f[..n - 4]);
    f[n - 4..].copy_from_slice(&crc.to_be_bytes());
}

/// The reflection of a context slice: halves swapped.
pub fn reflect(context: &[u8]) -> [u8; 8] {
    let mut r = [0u8; 8];
    r[..4].copy_from_slice(&context[4..8]);
    r[4..].copy_from_slice(&context[..4]);
    r
}

/// A frame the IUT sent, checked against every rule of "Frames" that
/// does not depend on the link's state.
#[derive(Clone, Debug)]
pub struct Received {
    pub header: Header,
    pub bytes: Vec<u8>,
}

impl Received {
    pub fn payload(&self) -> &[u8] {
        &self.bytes[HEADER..self.bytes.len() - 4]
    }

    pub fn transition(&self) -> (u8, u8) {
        self.header.transition
    }
}

pub fn parse(bytes: &[u8]) -> Result<Received, String> {
    if bytes.len() < 64 {
        return Err(format!("{} bytes, shorter than a frame", bytes.len()));
    }
    let version = bytes[0] >> 4;
    let class = bytes[0] & 0x0F;
    if version != VERSION {
        return Err(format!("version {version}"));
    }
    if class > 4 {
        return Err(format!("class {class}"));
    }
    if bytes.len() != frame_len(class) {
        return Err(format!("{} bytes for class {class}", bytes.len()));
    }
    let n = bytes.len();
    if crc32c::crc32c(&bytes[..n - 4]) != u32::from_be_bytes(bytes[n - 4..].try_into().unwrap()) {
        return Err("bad CRC".into());
    }
    if bytes[1] & 0xF8 != 0 || bytes[1] & 3 == 3 {
        return Err(format!("liveness byte {:#04x}", bytes[1]));
    }
    let transition = (bytes[2], bytes[3] & 0x1F);
    if name(transition) == "unknown" {
        return Err(format!("state {} code {}", transition.0, transition.1));
    }
    if (bytes[3] & 0x80 != 0) != is_reverse(transition) {
        return Err(format!("direction bit of {}", name(transition)));
    }
    if bytes[3] & 0x20 != 0 {
        return Err("reserved bit 5 of the transition byte".into());
    }
    let previous_committed = bytes[3] & 0x40 != 0;
    if previous_committed && !matches!(transition, REQUEST | COMMIT | REVERSE) {
        return Err(format!("previous-committed on {}", name(transition)));
    }
    let word = |at: usize| u32::from_be_bytes(bytes[at..at + 4].try_into().unwrap());
    let header = Header {
        class,
        level: bytes[1] & 3,
        bob: bytes[1] & 0x04 != 0,
        transition,
        previous_committed,
        field: word(4),
        sender_epoch: word(8),
        receiver_epoch: word(12),
        order: word(16),
        seen: word(20),
    };
    if header.sender_epoch == 0 {
        return Err("sender epoch 0".into());
    }
    // HELLO and HANDSHAKE come before any order.
    let unordered = matches!(transition, HELLO | HANDSHAKE);
    if unordered != (header.order == 0) || (unordered && header.seen != 0) {
        return Err("order slice inconsistent with the transition".into());
    }
    Ok(Received {
        header,
        bytes: bytes.to_vec(),
    })
}

pub fn hex(bytes: &[u8]) -> String {
    oae_common::hex::encode(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every frame the core sends in the test vectors (`vectors/`) parses
    /// with this codec, written from the specification alone, and builds
    /// back to the same bytes.
    #[test]
    fn the_vectors_frames_parse_and_rebuild() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../vectors");
        let mut frames = 0;
        for entry in std::fs::read_dir(dir).expect("vectors/") {
            let path = entry.unwrap().path();
            if path.extension().is_none_or(|e| e != "vec") {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            for line in text.lines().filter_map(|l| l.strip_prefix("send ")) {
                let bytes: Vec<u8> = (0..line.len())
                    .step_by(2)
                    .map(|i| u8::from_str_radix(&line[i..i + 2], 16).unwrap())
                    .collect();
                let f = parse(&bytes).unwrap_or_else(|e| panic!("{}: {e}: {line}", path.display()));
                let payload = &bytes[HEADER..bytes.len() - 4];
                assert_eq!(build(&f.header, payload), bytes, "{}", path.display());
                frames += 1;
            }
        }
        assert!(frames > 100, "{frames} frames");
    }

    #[test]
    fn a_flipped_bit_fails_the_crc() {
        let h = Header {
            class: 0,
            level: 2,
            bob: true,
            transition: TICK,
            previous_committed: false,
            field: 1,
            sender_epoch: 3,
            receiver_epoch: 4,
            order: 5,
            seen: 6,
        };
        let mut f = build(&h, &[0, 0, 0, 0, 0, 0, 0, 9]);
        assert_eq!(parse(&f).unwrap().header, h);
        f[20] ^= 1;
        assert_eq!(parse(&f).unwrap_err(), "bad CRC");
    }
}

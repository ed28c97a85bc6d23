//! Types shared by the XDP program (`ebpf/`, built for `bpfel-unknown-none`)
//! and userspace (`pmd/`). `no_std`, `#[repr(C)]`, plain old data: both sides
//! read the same bytes out of the same BPF maps.

#![no_std]
#![cfg_attr(feature = "user", allow(unsafe_code))]

#[cfg(feature = "std")]
extern crate std;

#[cfg(feature = "std")]
pub mod hex;
#[cfg(feature = "std")]
pub mod mac;
#[cfg(feature = "std")]
pub mod rng;
#[cfg(feature = "std")]
pub mod topology;

/// EtherType of OAE frames (IEEE local experimental 2).
pub const OAE_ETHERTYPE: u16 = 0x88B5;

/// Length of the Ethernet header the XDP program skips (no VLAN tags).
pub const ETH_HEADER_LEN: usize = 14;

/// EtherType of IPv4, the frames a wider [`FaultScope`] reaches.
pub const IPV4_ETHERTYPE: u16 = 0x0800;

/// Map names, as the XDP program declares them and userspace looks them up.
pub mod maps {
    /// XSKMAP: receive queue index → AF_XDP socket.
    pub const SOCKETS: &str = "OAE_SOCKETS";
    /// ARRAY with one [`super::FaultConfig`] at index 0.
    pub const FAULTS: &str = "OAE_FAULTS";
    /// PERCPU_ARRAY of u64 indexed by [`super::Counter`].
    pub const COUNTERS: &str = "OAE_COUNTERS";
    /// PERCPU_ARRAY of [`super::RngState`] at index 0: the fault dice.
    pub const RNG: &str = "OAE_RNG";
}

/// Name of the XDP program inside the object file.
pub const PROGRAM: &str = "oae_steer";

/// Capacity of the XSKMAP: receive queues one interface can steer to.
pub const MAX_QUEUES: u32 = 64;

/// Per-CPU counters kept by the XDP program.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Counter {
    /// OAE frames redirected to an AF_XDP socket.
    Steered = 0,
    /// Frames of other EtherTypes handed to the kernel stack, including
    /// those in the fault scope that no fault dropped (corrupted or not).
    Passed = 1,
    /// Frames in the fault scope dropped by the fault injector
    /// (probabilistic or link down): OAE frames unless the scope is wider.
    DroppedByFault = 2,
    /// Frames in the fault scope with one bit flipped by the fault injector;
    /// OAE frames are then steered, others passed to the kernel stack.
    CorruptedByFault = 3,
    /// OAE frames that arrived on a queue with no socket bound (dropped).
    NoSocket = 4,
}

impl Counter {
    pub const ALL: [Counter; 5] = [
        Counter::Steered,
        Counter::Passed,
        Counter::DroppedByFault,
        Counter::CorruptedByFault,
        Counter::NoSocket,
    ];
    pub const COUNT: u32 = Self::ALL.len() as u32;

    pub const fn name(self) -> &'static str {
        match self {
            Counter::Steered => "steered",
            Counter::Passed => "passed",
            Counter::DroppedByFault => "dropped_by_fault",
            Counter::CorruptedByFault => "corrupted_by_fault",
            Counter::NoSocket => "no_socket",
        }
    }
}

/// Offset value meaning "flip a bit at a random offset inside the payload"
/// (everything after the Ethernet header).
pub const CORRUPT_RANDOM_OFFSET: u32 = u32::MAX;

/// Bytes of the longest OAE frame on the wire: the Ethernet header, a
/// class-4 frame (1024 bytes, `oae_proto::wire::MAX_FRAME`) and an
/// authentication trailer (24 bytes). A corruption offset must fall inside
/// it for faults scoped to OAE frames (the dataplane's tests check the sum
/// against the core's constants).
pub const MAX_OAE_FRAME_ON_WIRE: u32 = ETH_HEADER_LEN as u32 + 1024 + 24;

/// One million: probabilities are in parts per million.
pub const PPM: u32 = 1_000_000;

/// [`FaultConfig`]'s `scope` for OAE frames only (the default).
pub const SCOPE_OAE: u32 = 0;
/// [`FaultConfig`]'s `scope` for every IPv4 frame (EtherType 0x0800, no
/// VLAN tag), and no OAE frame.
pub const SCOPE_IPV4: u32 = 1;
/// [`FaultConfig`]'s `scope` for IPv4 TCP and UDP segments whose source or
/// destination port is [`FaultConfig::port`], and nothing else.
pub const SCOPE_PORT: u32 = 2;

/// Which received frames the fault injector may touch. Frames outside the
/// scope are never dropped or corrupted, whatever the probabilities; frames
/// inside it that are not OAE frames and survive go to the kernel stack as
/// before (a corrupted one too: the kernel's checksums catch it).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum FaultScope {
    /// OAE frames only (EtherType 0x88B5).
    #[default]
    Oae,
    /// Every IPv4 frame without a VLAN tag; OAE frames are left alone.
    Ipv4,
    /// IPv4 TCP and UDP segments with this source or destination port (the
    /// first fragment of a datagram, which carries the ports); everything
    /// else, OAE frames included, is left alone.
    Port(u16),
}

impl FaultScope {
    /// The scope as [`FaultConfig`] stores it: `(scope, port)`.
    pub const fn to_raw(self) -> (u32, u16) {
        match self {
            FaultScope::Oae => (SCOPE_OAE, 0),
            FaultScope::Ipv4 => (SCOPE_IPV4, 0),
            FaultScope::Port(port) => (SCOPE_PORT, port),
        }
    }

    /// The scope [`FaultConfig`] stores as `(scope, port)`; `None` for an
    /// unknown scope value.
    pub const fn from_raw(scope: u32, port: u16) -> Option<FaultScope> {
        match scope {
            SCOPE_OAE => Some(FaultScope::Oae),
            SCOPE_IPV4 => Some(FaultScope::Ipv4),
            SCOPE_PORT => Some(FaultScope::Port(port)),
            _ => None,
        }
    }
}

/// `oae`, `ipv4` or `port:N`, as [`FaultScope`]'s `FromStr` reads it.
impl core::fmt::Display for FaultScope {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            FaultScope::Oae => f.write_str("oae"),
            FaultScope::Ipv4 => f.write_str("ipv4"),
            FaultScope::Port(port) => write!(f, "port:{port}"),
        }
    }
}

/// A fault scope that did not parse; its message says what is accepted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InvalidScope;

impl core::fmt::Display for InvalidScope {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(
            "expected oae (OAE frames, the default), ipv4 (every IPv4 frame) or port:N \
             (IPv4 TCP and UDP with source or destination port N, 1 to 65535)",
        )
    }
}

impl core::error::Error for InvalidScope {}

impl core::str::FromStr for FaultScope {
    type Err = InvalidScope;

    fn from_str(s: &str) -> Result<FaultScope, InvalidScope> {
        match s.trim() {
            "oae" => Ok(FaultScope::Oae),
            "ipv4" => Ok(FaultScope::Ipv4),
            other => other
                .strip_prefix("port:")
                .and_then(|n| n.parse::<u16>().ok())
                .filter(|&n| n != 0)
                .map(FaultScope::Port)
                .ok_or(InvalidScope),
        }
    }
}

/// Fault injection applied by the XDP program to the received frames in
/// its scope (OAE frames by default). Zero probabilities and
/// `link_down == 0` mean no faults, whatever the offset, seed and scope.
///
/// 32 bytes with no implicit padding, the same for the XDP program and
/// userspace (asserted below).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FaultConfig {
    /// Probability, in parts per million, of dropping a frame in scope.
    pub drop_ppm: u32,
    /// Probability, in parts per million, of flipping one bit.
    pub corrupt_ppm: u32,
    /// Byte offset from the start of the Ethernet frame of the flipped bit,
    /// or [`CORRUPT_RANDOM_OFFSET`] for a random byte after the Ethernet
    /// header.
    pub corrupt_offset: u32,
    /// Non-zero: drop every frame in scope (the link is down).
    pub link_down: u32,
    /// Seed of the per-CPU dice; changing it restarts the sequence, so the
    /// same seed and the same frames give the same faults.
    pub seed: u64,
    /// Which frames the faults apply to: [`SCOPE_OAE`] (the default),
    /// [`SCOPE_IPV4`] or [`SCOPE_PORT`]; [`FaultConfig::scope()`] reads it
    /// as a [`FaultScope`].
    pub scope: u32,
    /// The TCP or UDP port of [`SCOPE_PORT`], in host byte order; 0
    /// otherwise.
    pub port: u16,
    /// Explicit padding, always zero, so no byte of the map value is
    /// undefined.
    pub pad: u16,
}

const _: () = assert!(core::mem::size_of::<FaultConfig>() == 32);
const _: () = assert!(core::mem::align_of::<FaultConfig>() == 8);

impl Default for FaultConfig {
    /// No faults, OAE frames in scope; should corruption be switched on
    /// later, it picks a random payload byte rather than byte 0 (the
    /// destination MAC).
    fn default() -> FaultConfig {
        FaultConfig {
            drop_ppm: 0,
            corrupt_ppm: 0,
            corrupt_offset: CORRUPT_RANDOM_OFFSET,
            link_down: 0,
            seed: 0,
            scope: SCOPE_OAE,
            port: 0,
            pad: 0,
        }
    }
}

/// What the fault dice decide for one frame in scope.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FaultRoll {
    /// Goes on untouched.
    Keep,
    /// Dropped: the link is down, or the drop roll hit.
    Drop,
    /// Goes on with bit `bit` of byte `offset` flipped.
    Corrupt { offset: u32, bit: u8 },
}

impl FaultConfig {
    /// Rolls `dice` for one frame in scope, `len` bytes long. The XDP
    /// program and the in-memory fault injector both decide by this, so a
    /// seed gives the same faults to the same frames in either:
    ///
    /// 1. a link that is down drops every frame, without a roll;
    /// 2. the drop roll;
    /// 3. the corruption roll, then the byte: `corrupt_offset`, or with
    ///    [`CORRUPT_RANDOM_OFFSET`] one drawn after the Ethernet header;
    ///    then the bit. A frame with no such byte is kept whole, and no
    ///    bit is drawn for it.
    #[inline(always)]
    pub fn roll(&self, dice: &mut RngState, len: u32) -> FaultRoll {
        if self.link_down != 0 {
            return FaultRoll::Drop;
        }
        if self.drop_ppm != 0 && dice.chance_ppm(self.drop_ppm) {
            return FaultRoll::Drop;
        }
        if self.corrupt_ppm == 0 || !dice.chance_ppm(self.corrupt_ppm) {
            return FaultRoll::Keep;
        }
        let offset = if self.corrupt_offset == CORRUPT_RANDOM_OFFSET {
            let payload = len.saturating_sub(ETH_HEADER_LEN as u32);
            if payload == 0 {
                return FaultRoll::Keep;
            }
            ETH_HEADER_LEN as u32 + dice.below(payload)
        } else {
            self.corrupt_offset
        };
        if offset >= len {
            return FaultRoll::Keep;
        }
        FaultRoll::Corrupt {
            offset,
            bit: dice.below(8) as u8,
        }
    }

    /// True when the XDP program would leave every frame alone.
    pub const fn is_clear(&self) -> bool {
        self.drop_ppm == 0 && self.corrupt_ppm == 0 && self.link_down == 0
    }

    /// The frames the faults apply to; `None` if `scope` holds an unknown
    /// value (the XDP program then touches no frame).
    pub const fn scope(&self) -> Option<FaultScope> {
        FaultScope::from_raw(self.scope, self.port)
    }

    /// This configuration applied to the frames of `scope` instead.
    pub const fn with_scope(self, scope: FaultScope) -> FaultConfig {
        let (scope, port) = scope.to_raw();
        FaultConfig {
            scope,
            port,
            pad: 0,
            ..self
        }
    }
}

/// `drop=0.01 corrupt=0 offset=random link=up seed=0`, then ` scope=ipv4` or
/// ` scope=port:N` when the scope is not the default: probabilities as exact
/// decimals of the parts per million, so the text reads back to the same
/// configuration.
impl core::fmt::Display for FaultConfig {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("drop=")?;
        write_ppm(f, self.drop_ppm)?;
        f.write_str(" corrupt=")?;
        write_ppm(f, self.corrupt_ppm)?;
        if self.corrupt_offset == CORRUPT_RANDOM_OFFSET {
            f.write_str(" offset=random")?;
        } else {
            write!(f, " offset={}", self.corrupt_offset)?;
        }
        let link = if self.link_down != 0 { "down" } else { "up" };
        write!(f, " link={link} seed={}", self.seed)?;
        match self.scope() {
            Some(FaultScope::Oae) => Ok(()),
            Some(scope) => write!(f, " scope={scope}"),
            None => write!(f, " scope=unknown({})", self.scope),
        }
    }
}

/// Writes `ppm / 10^6` as a decimal without trailing zeros; integer
/// arithmetic only, so no rounding.
fn write_ppm(f: &mut core::fmt::Formatter<'_>, ppm: u32) -> core::fmt::Result {
    let (whole, mut frac) = (ppm / PPM, ppm % PPM);
    write!(f, "{whole}")?;
    if frac == 0 {
        return Ok(());
    }
    let mut digits = 6;
    while frac % 10 == 0 {
        frac /= 10;
        digits -= 1;
    }
    write!(f, ".{frac:0digits$}")
}

/// Per-CPU generator state of the fault dice: xorshift64*, started from
/// `splitmix64(seed ^ cpu)`. The XDP program and userspace share this code,
/// so a run's faults can be replayed from its seed.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RngState {
    /// The seed this state was derived from; a new seed in the config
    /// reseeds.
    pub seed: u64,
    /// Never zero once seeded (xorshift would stay at zero forever), so an
    /// all-zero entry means "not seeded yet".
    pub state: u64,
}

impl RngState {
    /// The generator of CPU `cpu` under `seed`.
    #[inline(always)]
    pub const fn seeded(seed: u64, cpu: u32) -> RngState {
        let state = splitmix64(seed ^ cpu as u64);
        RngState {
            seed,
            // splitmix64 is a bijection: exactly one input maps to zero.
            state: if state == 0 { GOLDEN_GAMMA } else { state },
        }
    }

    /// True when this state must be derived afresh for `seed`.
    #[inline(always)]
    pub const fn needs_seed(&self, seed: u64) -> bool {
        self.state == 0 || self.seed != seed
    }

    /// The next 64 random bits.
    #[inline(always)]
    pub const fn next_u64(&mut self) -> u64 {
        let mut x = self.state;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.state = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// True with probability `ppm` parts per million.
    #[inline(always)]
    pub const fn chance_ppm(&mut self, ppm: u32) -> bool {
        self.next_u64() % (PPM as u64) < (ppm as u64)
    }

    /// Uniform in `0..n` (0 when `n` is 0), by multiply-and-shift: no
    /// division, which keeps the XDP program cheap.
    #[inline(always)]
    pub const fn below(&mut self, n: u32) -> u32 {
        (((self.next_u64() >> 32) * n as u64) >> 32) as u32
    }
}

const GOLDEN_GAMMA: u64 = 0x9E37_79B9_7F4A_7C15;

/// Steele, Lea and Flood's SplitMix64 finaliser: spreads nearby seeds (CPU 0
/// and CPU 1 of the same seed) over unrelated states.
#[inline(always)]
pub const fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(GOLDEN_GAMMA);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[cfg(feature = "user")]
// SAFETY: FaultConfig is repr(C), Copy, and every bit pattern is valid.
unsafe impl aya::Pod for FaultConfig {}

#[cfg(feature = "user")]
// SAFETY: RngState is repr(C), Copy, and every bit pattern is valid.
unsafe impl aya::Pod for RngState {}

#[cfg(test)]
mod tests {
    extern crate std;
    use std::string::ToString;

    use super::*;

    #[test]
    fn seeding_is_deterministic_and_per_cpu() {
        let mut a = RngState::seeded(42, 0);
        let mut b = RngState::seeded(42, 0);
        let mut c = RngState::seeded(42, 1);
        let (xa, xb, xc) = (a.next_u64(), b.next_u64(), c.next_u64());
        assert_eq!(xa, xb);
        assert_ne!(xa, xc);
        assert!(!a.needs_seed(42));
        assert!(a.needs_seed(43));
        assert!(RngState::default().needs_seed(0));
    }

    #[test]
    fn every_seed_gives_a_live_generator() {
        // The one input splitmix64 maps to zero must still give a live state.
        for seed in [0, u64::MAX, GOLDEN_GAMMA.wrapping_neg()] {
            let mut r = RngState::seeded(seed, 0);
            assert_ne!(r.state, 0);
            assert_ne!(r.next_u64(), r.next_u64());
        }
    }

    #[test]
    fn a_roll_drops_corrupts_or_keeps_as_configured() {
        let mut dice = RngState::seeded(3, 0);
        let untouched = dice;
        let down = FaultConfig {
            link_down: 1,
            ..FaultConfig::default()
        };
        assert_eq!(down.roll(&mut dice, 64), FaultRoll::Drop);
        assert_eq!(dice, untouched, "a link down rolls no dice");
        let always = FaultConfig {
            corrupt_ppm: PPM,
            ..FaultConfig::default()
        };
        for _ in 0..1000 {
            match always.roll(&mut dice, 64) {
                FaultRoll::Corrupt { offset, bit } => {
                    assert!((ETH_HEADER_LEN as u32..64).contains(&offset) && bit < 8)
                }
                other => panic!("{other:?}"),
            }
        }
        let past_the_end = FaultConfig {
            corrupt_offset: 64,
            ..always
        };
        assert_eq!(past_the_end.roll(&mut dice, 64), FaultRoll::Keep);
        assert_eq!(
            always.roll(&mut dice, ETH_HEADER_LEN as u32),
            FaultRoll::Keep
        );
        let lossy = FaultConfig {
            drop_ppm: PPM,
            ..always
        };
        assert_eq!(lossy.roll(&mut dice, 64), FaultRoll::Drop);
        assert_eq!(FaultConfig::default().roll(&mut dice, 64), FaultRoll::Keep);
    }

    #[test]
    fn chance_matches_its_probability() {
        let mut r = RngState::seeded(7, 0);
        let hits = (0..100_000).filter(|_| r.chance_ppm(250_000)).count();
        assert!((23_500..26_500).contains(&hits), "{hits}");
        assert!((0..1000).all(|_| !r.chance_ppm(0)));
        assert!((0..1000).all(|_| r.chance_ppm(PPM)));
    }

    #[test]
    fn below_stays_in_range() {
        let mut r = RngState::seeded(9, 3);
        let mut seen = [false; 50];
        for _ in 0..10_000 {
            seen[r.below(50) as usize] = true;
        }
        assert!(seen.iter().all(|&s| s));
        assert_eq!(r.below(0), 0);
    }

    #[test]
    fn displays_exact_probabilities() {
        let f = FaultConfig {
            drop_ppm: 10_000,
            corrupt_ppm: 1,
            corrupt_offset: 20,
            link_down: 1,
            seed: 5,
            scope: SCOPE_OAE,
            port: 0,
            pad: 0,
        };
        assert_eq!(
            f.to_string(),
            "drop=0.01 corrupt=0.000001 offset=20 link=down seed=5"
        );
        assert_eq!(
            FaultConfig::default().to_string(),
            "drop=0 corrupt=0 offset=random link=up seed=0"
        );
        let all = FaultConfig {
            drop_ppm: PPM,
            ..FaultConfig::default()
        };
        assert!(all.to_string().starts_with("drop=1 "));
        assert!(FaultConfig::default().is_clear());
        assert!(!all.is_clear());
        assert_eq!(
            f.with_scope(FaultScope::Port(6379)).to_string(),
            "drop=0.01 corrupt=0.000001 offset=20 link=down seed=5 scope=port:6379"
        );
        assert_eq!(
            all.with_scope(FaultScope::Ipv4).to_string(),
            "drop=1 corrupt=0 offset=random link=up seed=0 scope=ipv4"
        );
    }

    #[test]
    fn scopes_read_back_and_refuse_the_rest() {
        for scope in [
            FaultScope::Oae,
            FaultScope::Ipv4,
            FaultScope::Port(1),
            FaultScope::Port(6379),
            FaultScope::Port(65535),
        ] {
            assert_eq!(scope.to_string().parse::<FaultScope>(), Ok(scope));
            let (raw, port) = scope.to_raw();
            assert_eq!(FaultScope::from_raw(raw, port), Some(scope));
            let f = FaultConfig::default().with_scope(scope);
            assert_eq!(f.scope(), Some(scope));
            assert_eq!(f.pad, 0);
        }
        assert_eq!(FaultConfig::default().scope(), Some(FaultScope::Oae));
        for bad in [
            "",
            "tcp",
            "port",
            "port:",
            "port:0",
            "port:65536",
            "port:-1",
            "IPV4",
        ] {
            assert_eq!(bad.parse::<FaultScope>(), Err(InvalidScope), "{bad}");
        }
        assert!(InvalidScope.to_string().contains("port:N"));
        assert_eq!(FaultScope::from_raw(7, 0), None);
    }
}

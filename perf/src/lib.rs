//! Benchmark helpers: a counting global allocator, a two-node driver that
//! pushes verbs through the sans-IO core of both ends over a perfect in-memory
//! wire, batch statistics, CPU pinning and machine facts for reports; in
//! [`raw`], the driver-level references (reflector, flood, ping-pong) OAE
//! over a real link is compared against; and in [`link`], OAE itself over
//! that link.
//!
//! Nothing here reads a clock inside the core: the driver advances a
//! simulated `now` itself and never calls `handle_timeout`, so what is
//! measured is the per-verb work of both cores and nothing else.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU64, Ordering};

use oae_proto::auth::{AuthStats, Authenticator, LinkIdentity, LinkKey};
use oae_proto::wire::MAX_FRAME;
use oae_proto::{
    Block, Event, LinkConfig, LinkId, LinkStats, Nanos, Node, Output, Permissions, PostedReceive,
    RegionRef, RegionSpec, Verb, VerbId,
};
use serde::Serialize;

pub mod link;
pub mod raw;
pub mod suite;
pub mod sweep;

// ----- counting allocator ---------------------------------------------------

/// A `#[global_allocator]` that forwards to [`System`] and counts every
/// allocation (`alloc`, `alloc_zeroed` and `realloc` each count as one, with
/// the requested size in bytes) and every free.
///
/// Declare it in the benchmark binary:
///
/// ```ignore
/// #[global_allocator]
/// static ALLOC: oae_perf::CountingAlloc = oae_perf::CountingAlloc::new();
/// ```
///
/// The counters are process-wide: read them around single-threaded regions.
#[derive(Debug)]
pub struct CountingAlloc {
    allocs: AtomicU64,
    bytes: AtomicU64,
    frees: AtomicU64,
}

/// A reading of a [`CountingAlloc`]'s counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AllocCount {
    pub allocs: u64,
    pub bytes: u64,
    pub frees: u64,
}

impl core::ops::Sub for AllocCount {
    type Output = AllocCount;

    fn sub(self, earlier: AllocCount) -> AllocCount {
        AllocCount {
            allocs: self.allocs - earlier.allocs,
            bytes: self.bytes - earlier.bytes,
            frees: self.frees - earlier.frees,
        }
    }
}

impl core::ops::AddAssign for AllocCount {
    fn add_assign(&mut self, other: AllocCount) {
        self.allocs += other.allocs;
        self.bytes += other.bytes;
        self.frees += other.frees;
    }
}

impl CountingAlloc {
    pub const fn new() -> CountingAlloc {
        CountingAlloc {
            allocs: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
            frees: AtomicU64::new(0),
        }
    }

    pub fn count(&self) -> AllocCount {
        AllocCount {
            allocs: self.allocs.load(Ordering::Relaxed),
            bytes: self.bytes.load(Ordering::Relaxed),
            frees: self.frees.load(Ordering::Relaxed),
        }
    }

    fn note_alloc(&self, size: usize) {
        self.allocs.fetch_add(1, Ordering::Relaxed);
        self.bytes.fetch_add(size as u64, Ordering::Relaxed);
    }
}

impl Default for CountingAlloc {
    fn default() -> CountingAlloc {
        CountingAlloc::new()
    }
}

// SAFETY: every method forwards to `System` with the caller's arguments
// unchanged, so `System`'s guarantees (valid, suitably aligned blocks; no
// unwinding) are this allocator's; the counting touches only atomics and
// never allocates.
#[allow(unsafe_code)]
unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        self.note_alloc(layout.size());
        // SAFETY: the caller upholds `GlobalAlloc::alloc`'s contract
        // (non-zero-sized `layout`), which is all `System.alloc` requires.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        self.note_alloc(layout.size());
        // SAFETY: as for `alloc`; the contract of `alloc_zeroed` is the same.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        self.frees.fetch_add(1, Ordering::Relaxed);
        // SAFETY: the caller guarantees `ptr` came from this allocator (hence
        // from `System`, to which every allocation is forwarded) with `layout`.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        self.note_alloc(new_size);
        // SAFETY: the caller guarantees `ptr` is a live block of this
        // allocator (so of `System`) with `layout`, and that `new_size` is
        // non-zero and does not overflow when rounded to `layout.align()`.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

// ----- the pair driver ------------------------------------------------------

/// The region both nodes register; CAS verbs target word [`WORD_OFFSET`].
pub const REGION: RegionRef = RegionRef { id: 1, key: 42 };
/// Byte offset of the word every CAS compares and swaps.
pub const WORD_OFFSET: u32 = 8;
/// Simulated time one frame takes from one core to the other.
pub const HOP: Nanos = 1_000;

const LINK: LinkId = 0;
/// Bytes of the WRITE and the SEND the message paths compare.
pub const MESSAGE_BYTES: usize = 64;
/// Where those WRITEs go and the SENDs' receives are, in the target's region.
const MESSAGE_AT: u32 = 128;

/// Two nodes joined by a perfect in-memory wire, the link brought up; node
/// `initiator` issues CAS verbs against node `target`'s memory.
///
/// Every step checks what the protocol promises (a frame is due, the echo
/// completes the verb just submitted, the CAS saw the value the previous one
/// wrote) and panics otherwise, so a benchmark cannot silently measure a
/// short-circuited path.
pub struct Pair {
    initiator: Node,
    target: Node,
    buf: [u8; MAX_FRAME],
    now: Nanos,
    next_id: u64,
    /// The value the target's word holds after the last completed CAS.
    value: u64,
    /// The WRITE and the SEND of [`MESSAGE_BYTES`] the message paths
    /// submit, built once (as the CAS path builds its few fields).
    write: Verb,
    send: Verb,
    /// Messages the target reported received.
    received: u64,
}

impl Default for Pair {
    fn default() -> Pair {
        Pair::new()
    }
}

impl Pair {
    /// Two nodes with the default [`LinkConfig`], one 256-byte region each,
    /// link up on both ends and the bring-up events drained.
    pub fn new() -> Pair {
        Pair::with_config(LinkConfig::default())
    }

    pub fn with_config(cfg: LinkConfig) -> Pair {
        Pair::build(cfg, false)
    }

    /// As [`Pair::new`], with the link authenticated (AES-GCM trailer,
    /// replay window) on both ends: every frame sealed and opened, as an
    /// authenticated link of `oaed` does.
    pub fn sealed() -> Pair {
        Pair::build(LinkConfig::default(), true)
    }

    fn build(cfg: LinkConfig, sealed: bool) -> Pair {
        let identity = LinkIdentity {
            local_mac: [2, 0, 0, 0, 0, 0xa],
            peer_mac: [2, 0, 0, 0, 0, 0xb],
            channel: 0,
        };
        let mut nodes = [Node::new(0xA, 1), Node::new(0xB, 1)];
        for (n, identity) in nodes.iter_mut().zip([identity, identity.reversed()]) {
            n.add_link(cfg).expect("valid link config");
            if sealed {
                let auth = Authenticator::new(identity, 0, &LinkKey([0x5e; 32]));
                n.authenticate_link(LINK, auth).expect("the link exists");
            }
            n.register(RegionSpec {
                id: REGION.id,
                key: REGION.key,
                len: 256,
                permissions: Permissions::ALL,
            })
            .expect("fresh node accepts the region");
        }
        let [initiator, target] = nodes;
        let mut pair = Pair {
            initiator,
            target,
            buf: [0; MAX_FRAME],
            now: 0,
            next_id: 0,
            value: 0,
            write: Verb::Write {
                target: REGION,
                offset: MESSAGE_AT,
                data: Block::new(&[0x6d; MESSAGE_BYTES]).expect("fits"),
            },
            send: Verb::Send {
                imm: Some(7),
                data: Block::new(&[0x6d; MESSAGE_BYTES]).expect("fits"),
            },
            received: 0,
        };
        pair.bring_up();
        pair
    }

    fn bring_up(&mut self) {
        for _ in 0..16 {
            let mut moved = false;
            while self.try_hop(true) {
                moved = true;
            }
            while self.try_hop(false) {
                moved = true;
            }
            if !moved {
                break;
            }
        }
        let up = |n: &Node| n.link_status(LINK).is_some_and(|s| s.up);
        assert!(
            up(&self.initiator) && up(&self.target),
            "link did not come up"
        );
        while let Some(e) = self.initiator.poll_event() {
            assert!(matches!(e, Event::Link { .. }), "unexpected {e:?}");
        }
        while let Some(e) = self.target.poll_event() {
            assert!(matches!(e, Event::Link { .. }), "unexpected {e:?}");
        }
    }

    /// Moves one frame from the initiator (`true`) or the target to the
    /// other end, if one is due.
    #[inline]
    fn try_hop(&mut self, from_initiator: bool) -> bool {
        let (from, to) = if from_initiator {
            (&mut self.initiator, &mut self.target)
        } else {
            (&mut self.target, &mut self.initiator)
        };
        match from.poll_transmit(LINK, self.now, &mut self.buf) {
            Some(len) => {
                self.now += HOP;
                to.handle_frame(LINK, &self.buf[..len], self.now);
                true
            }
            None => false,
        }
    }

    #[inline]
    fn hop(&mut self, from_initiator: bool, what: &str) {
        if !self.try_hop(from_initiator) {
            no_frame(what);
        }
    }

    #[inline]
    fn submit_cas(&mut self) -> VerbId {
        self.next_id += 1;
        let id = VerbId(self.next_id);
        let verb = Verb::CompareAndSwap {
            target: REGION,
            offset: WORD_OFFSET,
            expected: self.value,
            new: self.value.wrapping_add(1),
        };
        if let Err(e) = self.initiator.submit(LINK, id, &verb) {
            refused(e);
        }
        id
    }

    #[inline]
    fn expect_completion(&mut self, id: VerbId) {
        // Read where the node keeps it, as the pipeline does: an event has
        // room for a kilobyte.
        match self.initiator.peek_event() {
            Some(&Event::Completed {
                id: got,
                result: Ok(Output::CompareAndSwap { old, swapped: true }),
                ..
            }) if got == id && old == self.value => {
                self.initiator.pop_event();
                self.value = self.value.wrapping_add(1);
            }
            _ => unexpected(id, self.value, self.initiator.poll_event()),
        }
    }

    /// One CAS, steady state of a continuous stream: the REQUEST carries the
    /// commit of the slot's previous transfer, so no COMMIT frame is sent.
    /// submit → REQUEST → target applies, ECHO → initiator verifies,
    /// completion polled.
    #[inline]
    pub fn cas_piggybacked_commit(&mut self) {
        let id = self.submit_cas();
        self.hop(true, "REQUEST");
        self.hop(false, "ECHO");
        self.expect_completion(id);
    }

    /// One CAS followed by its explicit COMMIT / COMMIT_ACK exchange, leaving
    /// the slot idle: four frames per verb.
    #[inline]
    pub fn cas_explicit_commit(&mut self) {
        let id = self.submit_cas();
        self.hop(true, "REQUEST");
        self.hop(false, "ECHO");
        self.expect_completion(id);
        self.hop(true, "COMMIT");
        self.hop(false, "COMMIT_ACK");
    }

    /// One WRITE of [`MESSAGE_BYTES`], steady state (its commit rides on
    /// the next REQUEST): the baseline of [`Pair::send_piggybacked_commit`].
    #[inline]
    pub fn write_piggybacked_commit(&mut self) {
        self.next_id += 1;
        let id = VerbId(self.next_id);
        if let Err(e) = self.initiator.submit(LINK, id, &self.write) {
            refused(e);
        }
        self.hop(true, "REQUEST");
        self.hop(false, "ECHO");
        self.expect_output(id, Output::Write);
    }

    /// One SEND of [`MESSAGE_BYTES`] as an application runs it: the target
    /// posts a receive, the initiator sends into it, steady state (the
    /// commit rides on the next REQUEST, and the target reports the
    /// previous message then).
    #[inline]
    pub fn send_piggybacked_commit(&mut self) {
        self.next_id += 1;
        let id = VerbId(self.next_id);
        let receive = PostedReceive {
            id: self.next_id,
            region: REGION.id,
            offset: MESSAGE_AT,
            len: MESSAGE_BYTES as u16,
        };
        if let Err(e) = self.target.post_receive(LINK, receive) {
            panic!("receive not posted: {e}");
        }
        if let Err(e) = self.initiator.submit(LINK, id, &self.send) {
            refused(e);
        }
        self.hop(true, "REQUEST");
        self.hop(false, "ECHO");
        self.expect_output(id, Output::Send);
        while let Some(e) = self.target.peek_event() {
            match *e {
                Event::Received {
                    len: l,
                    imm: Some(7),
                    ..
                } if usize::from(l) == MESSAGE_BYTES => self.received += 1,
                other => panic!("expected a {MESSAGE_BYTES}-byte message, got {other:?}"),
            }
            self.target.pop_event();
        }
    }

    #[inline]
    fn expect_output(&mut self, id: VerbId, want: Output) {
        match self.initiator.peek_event() {
            Some(&Event::Completed {
                id: got,
                result: Ok(out),
                ..
            }) if got == id && out == want => self.initiator.pop_event(),
            other => panic!("expected {id:?} to complete with {want:?}, got {other:?}"),
        }
    }

    /// Messages the target reported received.
    pub fn received(&self) -> u64 {
        self.received
    }

    /// Completed CAS verbs so far (also the value the target's word holds).
    pub fn value(&self) -> u64 {
        self.value
    }

    /// The target's word, tentative changes included.
    pub fn target_word(&self) -> u64 {
        let bytes = self
            .target
            .memory()
            .bytes(REGION.id)
            .expect("region registered");
        let at = WORD_OFFSET as usize;
        u64::from_le_bytes(bytes[at..at + 8].try_into().expect("eight bytes"))
    }

    pub fn initiator_stats(&self) -> &LinkStats {
        self.initiator.link_stats(LINK).expect("link exists")
    }

    pub fn target_stats(&self) -> &LinkStats {
        self.target.link_stats(LINK).expect("link exists")
    }

    /// Both ends' authentication counters (initiator, target), if the
    /// link is authenticated.
    pub fn auth_stats(&self) -> Option<(&AuthStats, &AuthStats)> {
        let i = self.initiator.link_auth(LINK)?.stats();
        let t = self.target.link_auth(LINK)?.stats();
        Some((i, t))
    }

    /// Nothing left to send on either end (panics if something was).
    pub fn assert_idle_wire(&mut self) {
        assert!(!self.try_hop(true), "initiator had a frame due");
        assert!(!self.try_hop(false), "target had a frame due");
    }
}

#[cold]
#[inline(never)]
fn no_frame(what: &str) -> ! {
    panic!("expected a {what} frame, nothing was due")
}

#[cold]
#[inline(never)]
fn refused(e: oae_proto::SubmitError) -> ! {
    panic!("submit refused: {e}")
}

#[cold]
#[inline(never)]
fn unexpected(id: VerbId, value: u64, got: Option<Event>) -> ! {
    panic!("expected {id:?} to complete with a swap of {value}, got {got:?}")
}

// ----- statistics -----------------------------------------------------------

/// A set of per-repetition figures as perftest users read them: median,
/// minimum, maximum, mean, sample standard deviation and how many.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Summary {
    pub median: f64,
    pub min: f64,
    pub max: f64,
    pub mean: f64,
    /// Sample standard deviation (n - 1); 0 for one value.
    pub stddev: f64,
    pub count: usize,
}

impl Summary {
    /// `None` for no samples. An even count takes the mean of the middle two.
    pub fn of(samples: &[f64]) -> Option<Summary> {
        if samples.is_empty() {
            return None;
        }
        let mut s = samples.to_vec();
        s.sort_by(f64::total_cmp);
        let n = s.len();
        let median = if n % 2 == 1 {
            s[n / 2]
        } else {
            (s[n / 2 - 1] + s[n / 2]) / 2.0
        };
        let mean = s.iter().sum::<f64>() / n as f64;
        let stddev = if n > 1 {
            (s.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1) as f64).sqrt()
        } else {
            0.0
        };
        Some(Summary {
            median,
            min: s[0],
            max: s[n - 1],
            mean,
            stddev,
            count: n,
        })
    }

    /// The same figures to `decimals` places, for reports that should not
    /// claim more precision than the measurement has.
    pub fn rounded(self, decimals: i32) -> Summary {
        Summary {
            median: round_to(self.median, decimals),
            min: round_to(self.min, decimals),
            max: round_to(self.max, decimals),
            mean: round_to(self.mean, decimals),
            stddev: round_to(self.stddev, decimals),
            count: self.count,
        }
    }
}

/// `x` to `decimals` places. Reports round before serialising, so that a
/// JSON figure carries the digits the measurement supports and no more.
pub fn round_to(x: f64, decimals: i32) -> f64 {
    let scale = 10f64.powi(decimals);
    (x * scale).round() / scale
}

// ----- machine facts and pinning --------------------------------------------

/// What a reader needs to judge a figure from this machine.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct MachineFacts {
    /// CPUs this process may run on (what `nproc` prints), read before pinning.
    pub nproc: usize,
    pub cpu_model: String,
    pub kernel: String,
    /// `/proc/loadavg`'s first three fields: other work sharing the CPUs.
    pub loadavg: String,
}

/// Reads the facts; anything unreadable reads as `"unknown"`.
pub fn machine_facts() -> MachineFacts {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let cpu_model = ["model name", "Hardware", "cpu model", "Processor"]
        .iter()
        .find_map(|key| {
            cpuinfo.lines().find_map(|l| {
                let (k, v) = l.split_once(':')?;
                (k.trim() == *key).then(|| v.trim().to_string())
            })
        })
        .unwrap_or_else(|| "unknown".into());
    let read = |path: &str, fields: usize| {
        std::fs::read_to_string(path)
            .map(|s| {
                s.split_whitespace()
                    .take(fields)
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .ok()
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| "unknown".into())
    };
    MachineFacts {
        nproc: std::thread::available_parallelism().map_or(0, |n| n.get()),
        cpu_model,
        kernel: read("/proc/sys/kernel/osrelease", 1),
        loadavg: read("/proc/loadavg", 3),
    }
}

pub use oae_os::pin::pin_preferred;

/// The calling thread's allowed CPUs as the kernel reports them
/// (`Cpus_allowed_list`), to confirm a pin took effect.
pub fn allowed_cpus() -> Option<String> {
    let status = std::fs::read_to_string("/proc/thread-self/status").ok()?;
    status.lines().find_map(|l| {
        l.strip_prefix("Cpus_allowed_list:")
            .map(|v| v.trim().to_string())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn piggybacked_commits_ride_on_the_next_request() {
        let mut p = Pair::new();
        for _ in 0..100 {
            p.cas_piggybacked_commit();
        }
        assert_eq!(p.value(), 100);
        assert_eq!(p.target_word(), 100);
        let (i, t) = (p.initiator_stats().clone(), p.target_stats().clone());
        assert_eq!(i.commits_sent, 0, "no explicit COMMIT in steady state");
        assert_eq!(i.requests_sent, 100);
        assert_eq!(i.echoes_verified, 100);
        assert_eq!(t.transfers_applied, 100);
        assert_eq!(t.transfers_committed, 99, "the last one is still tentative");
        assert_eq!(i.retries + i.echo_mismatches + t.protocol_violations, 0);
    }

    #[test]
    fn explicit_commits_leave_the_wire_idle() {
        let mut p = Pair::new();
        for _ in 0..100 {
            p.cas_explicit_commit();
        }
        p.assert_idle_wire();
        assert_eq!(p.target_word(), 100);
        let (i, t) = (p.initiator_stats().clone(), p.target_stats().clone());
        assert_eq!(i.commits_sent, 100);
        assert_eq!(t.transfers_committed, 100);
        assert_eq!(i.tx_frames, t.rx_frames, "a perfect wire");
        assert_eq!(i.retries + i.echo_mismatches + t.protocol_violations, 0);
    }

    #[test]
    fn a_sealed_pair_seals_and_opens_every_frame() {
        let mut p = Pair::sealed();
        for _ in 0..100 {
            p.cas_piggybacked_commit();
        }
        assert_eq!(p.target_word(), 100);
        let (i, t) = p.auth_stats().expect("authenticated");
        assert_eq!(
            i.sealed, t.verified,
            "every frame the initiator sent opened"
        );
        assert_eq!(t.sealed, i.verified, "every frame the target sent opened");
        assert!(i.sealed >= 100 && t.sealed >= 100, "{i:?} {t:?}");
        assert_eq!(i.dropped.iter().chain(&t.dropped).sum::<u64>(), 0);
        assert!(Pair::new().auth_stats().is_none());
    }

    #[test]
    fn paths_mix() {
        let mut p = Pair::new();
        for k in 0..50 {
            if k % 3 == 0 {
                p.cas_explicit_commit();
            } else {
                p.cas_piggybacked_commit();
            }
        }
        assert_eq!(p.target_word(), 50);
    }

    #[test]
    fn summaries() {
        let s = Summary::of(&[3.0, 1.0, 2.0]).unwrap();
        assert_eq!((s.median, s.min, s.max), (2.0, 1.0, 3.0));
        assert_eq!(Summary::of(&[1.0, 4.0]).unwrap().median, 2.5);
        assert!(Summary::of(&[]).is_none());
        // Mean 5, sample standard deviation sqrt(32 / 7).
        let s = Summary::of(&[2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0]).unwrap();
        assert_eq!((s.mean, s.count), (5.0, 8));
        assert!((s.stddev - (32.0f64 / 7.0).sqrt()).abs() < 1e-12, "{s:?}");
        assert_eq!(Summary::of(&[3.0]).unwrap().stddev, 0.0);
        let r = Summary::of(&[1.23456, 2.0, 9.87654]).unwrap().rounded(3);
        assert_eq!((r.median, r.min, r.max), (2.0, 1.235, 9.877));
        assert_eq!(
            serde_json::to_string(&r).unwrap(),
            r#"{"median":2.0,"min":1.235,"max":9.877,"mean":4.37,"stddev":4.784,"count":3}"#
        );
    }

    #[test]
    fn machine_facts_serialise_by_field_name() {
        let m = MachineFacts {
            nproc: 2,
            cpu_model: r#"a "quoted" CPU"#.into(),
            kernel: "6.1.0".into(),
            loadavg: "0.10 0.20 0.30".into(),
        };
        assert_eq!(
            serde_json::to_string(&m).unwrap(),
            r#"{"nproc":2,"cpu_model":"a \"quoted\" CPU","kernel":"6.1.0","loadavg":"0.10 0.20 0.30"}"#
        );
    }
}

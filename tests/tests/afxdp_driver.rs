//! The AF_XDP driver end to end: a veth pair between two network
//! namespaces, the steering program attached on both ends, one AF_XDP
//! socket per end registered in its XSKMAP, one thread per namespace.
//! Side a sends OAE frames, side b echoes them with the MAC addresses
//! swapped, while ping (ARP included) crosses the same link. Needs root.

use std::collections::HashSet;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use oae_common::OAE_ETHERTYPE;
use oae_pmd::afxdp::{AfXdp, AfXdpConfig, AfXdpError, BindMode, BufferCounts, FrameDesc, Wakeups};
use oae_pmd::netns::{self, VethPair};
use oae_pmd::xdp::{Steering, XdpCounters, XdpMode};
use oae_pmd::{Burst, Driver, DriverStats, MAX_BURST};

/// Frames side a keeps unanswered at most: well under every ring, so no
/// frame can be dropped and the counts must match exactly.
const WINDOW: usize = 256;

/// Fewest frames exchanged; the exchange also lasts as long as the ping.
const MIN_FRAMES: u64 = 20_000;

const DEADLINE: Duration = Duration::from_secs(30);

/// A barrier that gives up: a side that failed to open must not leave the
/// others waiting forever.
struct Rendezvous {
    arrived: AtomicUsize,
    parties: usize,
}

impl Rendezvous {
    fn new(parties: usize) -> Rendezvous {
        Rendezvous {
            arrived: AtomicUsize::new(0),
            parties,
        }
    }

    fn wait(&self) {
        self.arrived.fetch_add(1, Ordering::AcqRel);
        let deadline = Instant::now() + Duration::from_secs(10);
        while self.arrived.load(Ordering::Acquire) < self.parties {
            assert!(Instant::now() < deadline, "another side never got ready");
            thread::sleep(Duration::from_millis(1));
        }
    }
}

/// Runs `f`, which must panic with a message containing `needle`.
fn assert_panics(what: &str, needle: &str, f: impl FnOnce()) {
    let payload = catch_unwind(AssertUnwindSafe(f))
        .err()
        .unwrap_or_else(|| panic!("{what} did not panic"));
    let msg = payload
        .downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| payload.downcast_ref::<&str>().copied())
        .unwrap_or_default();
    assert!(
        msg.contains(needle),
        "{what}: {msg:?} does not say {needle:?}"
    );
}

/// Creates a pair; creation is serialised because concurrent creations in
/// one process share the name of the temporary interface.
fn veth_pair(tag: &str) -> VethPair {
    static CREATE: Mutex<()> = Mutex::new(());
    let _one_at_a_time = CREATE.lock().unwrap_or_else(|e| e.into_inner());
    VethPair::create(tag).expect("create veth pair (needs root)")
}

/// Frame `seq`: lengths vary from 60 bytes to about 1.5 kB, and every
/// payload byte depends on the sequence number.
fn frame_len(seq: u64) -> usize {
    60 + (seq as usize * 37) % 1400
}

fn write_frame(frame: &mut [u8], dst: [u8; 6], src: [u8; 6], seq: u64) {
    frame[0..6].copy_from_slice(&dst);
    frame[6..12].copy_from_slice(&src);
    frame[12..14].copy_from_slice(&OAE_ETHERTYPE.to_be_bytes());
    frame[14..22].copy_from_slice(&seq.to_le_bytes());
    for (k, byte) in frame[22..].iter_mut().enumerate() {
        *byte = (seq as usize).wrapping_mul(31).wrapping_add(k) as u8;
    }
}

/// The sequence number of an echo of a frame sent from `a` to `b`,
/// checking every byte.
fn check_echo(frame: &[u8], a: [u8; 6], b: [u8; 6]) -> u64 {
    assert!(frame.len() >= 22, "echo of {} bytes", frame.len());
    let seq = u64::from_le_bytes(frame[14..22].try_into().unwrap());
    let mut expected = vec![0; frame_len(seq)];
    write_frame(&mut expected, a, b, seq);
    assert_eq!(frame, &expected[..], "echo of frame {seq} differs");
    seq
}

struct End {
    // Declared first so the socket closes before the program detaches.
    xsk: AfXdp,
    steering: Steering,
    initial: BufferCounts,
}

/// Enters namespace `i` of `pair` (for good: call from the thread that
/// serves this end) and opens its end: program, socket, registration.
fn open_end(pair: &VethPair, i: usize) -> End {
    netns::enter(&pair.ns[i]).expect("enter namespace");
    let iface = &pair.ifname[i];
    let steering = Steering::attach(iface, XdpMode::Auto).expect("attach steering program");
    let mut xsk = AfXdp::new(&AfXdpConfig::new(iface, 0)).expect("open AF_XDP socket");
    steering
        .register_socket(0, xsk.fd())
        .expect("register socket in XSKMAP");
    assert_eq!(xsk.mac(), pair.mac[i]);
    let initial = xsk.buffers();
    End {
        xsk,
        steering,
        initial,
    }
}

/// Waits (bounded) until every transmitted frame has completed, then
/// checks that the driver holds exactly what it held at the start.
fn assert_no_leak(end: &mut End) {
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut idle = Burst::new();
    loop {
        assert_eq!(
            end.xsk.rx_burst(&mut idle),
            0,
            "unexpected frame after the run"
        );
        let now = end.xsk.buffers();
        if now == end.initial {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "buffers never came back: {now:?}, started with {:?}",
            end.initial
        );
        thread::yield_now();
    }
    assert_eq!(end.xsk.free_buffers(), end.initial.free);
    assert_eq!(end.initial.caller, 0);
    assert_eq!(end.initial.driver_owned(), end.xsk.frame_count());
}

struct Report {
    frames: u64,
    wakeups: Wakeups,
    stats: DriverStats,
    counters: XdpCounters,
    bind_mode: BindMode,
}

/// Side b: echoes every OAE frame back with the addresses swapped, reusing
/// the received buffers, until told to stop and nothing is left to send.
fn echo(pair: &VethPair, ready: &Rendezvous, stop: &AtomicBool) -> Report {
    let mut end = open_end(pair, 1);
    let (a, b) = (pair.mac[0], pair.mac[1]);
    ready.wait();
    let deadline = Instant::now() + DEADLINE;
    let mut burst: Burst<FrameDesc> = Burst::new();
    let mut echoed = 0u64;
    while !(stop.load(Ordering::Acquire) && burst.is_empty()) {
        assert!(Instant::now() < deadline, "echo side timed out");
        let start = burst.len();
        let got = end.xsk.rx_burst(&mut burst);
        for buf in &mut burst[start..] {
            let len = end.xsk.frame(buf).len();
            let frame = end.xsk.frame_mut(buf, len);
            assert_eq!(&frame[0..6], &b, "frame not addressed to b");
            assert_eq!(&frame[6..12], &a, "frame not from a");
            assert_eq!(&frame[12..14], &OAE_ETHERTYPE.to_be_bytes());
            frame[0..6].copy_from_slice(&a);
            frame[6..12].copy_from_slice(&b);
        }
        let sent = end.xsk.tx_burst(&mut burst);
        echoed += sent as u64;
        if got == 0 && sent == 0 {
            thread::yield_now();
        }
    }
    assert_no_leak(&mut end);
    Report {
        frames: echoed,
        wakeups: end.xsk.wakeups(),
        stats: end.xsk.stats(),
        counters: end.steering.counters(),
        bind_mode: end.xsk.bind_mode(),
    }
}

/// Side a: sends numbered frames, at most [`WINDOW`] unanswered, until at
/// least [`MIN_FRAMES`] went and `ping_done` is set; checks every echo
/// arrives once and intact.
fn send(pair: &VethPair, ready: &Rendezvous, ping_done: &AtomicBool) -> Report {
    let mut end = open_end(pair, 0);
    let (a, b) = (pair.mac[0], pair.mac[1]);
    ready.wait();
    let deadline = Instant::now() + DEADLINE;
    let mut tx: Burst<FrameDesc> = Burst::new();
    let mut rx: Burst<FrameDesc> = Burst::new();
    let mut outstanding = HashSet::new();
    let (mut next, mut received) = (0u64, 0u64);
    loop {
        assert!(
            Instant::now() < deadline,
            "sender timed out: {next} sent, {received} echoed"
        );
        let sending = next < MIN_FRAMES || !ping_done.load(Ordering::Acquire);
        if !sending && outstanding.is_empty() && tx.is_empty() {
            break;
        }
        let room = WINDOW.saturating_sub(outstanding.len() + tx.len());
        if sending && room > 0 {
            let start = tx.len();
            let want = room.min(MAX_BURST - start);
            end.xsk.alloc(&mut tx, want);
            for buf in &mut tx[start..] {
                write_frame(end.xsk.frame_mut(buf, frame_len(next)), b, a, next);
                outstanding.insert(next);
                next += 1;
            }
        }
        end.xsk.tx_burst(&mut tx);
        let got = end.xsk.rx_burst(&mut rx);
        for buf in &rx {
            let seq = check_echo(end.xsk.frame(buf), a, b);
            assert!(outstanding.remove(&seq), "frame {seq} echoed twice");
            received += 1;
        }
        end.xsk.release(&mut rx);
        if got == 0 {
            thread::yield_now();
        }
    }
    assert_eq!(received, next);
    assert_no_leak(&mut end);
    Report {
        frames: received,
        wakeups: end.xsk.wakeups(),
        stats: end.xsk.stats(),
        counters: end.steering.counters(),
        bind_mode: end.xsk.bind_mode(),
    }
}

#[test]
fn frames_echo_intact_while_ip_traffic_flows() {
    if !oae_tests::require_root("frames_echo_intact_while_ip_traffic_flows") {
        return;
    }
    let pair = Arc::new(veth_pair("afx"));
    let ready = Arc::new(Rendezvous::new(3));
    let stop = Arc::new(AtomicBool::new(false));
    let ping_done = Arc::new(AtomicBool::new(false));

    let echo_side = {
        let (pair, ready, stop) = (pair.clone(), ready.clone(), stop.clone());
        thread::spawn(move || echo(&pair, &ready, &stop))
    };
    let send_side = {
        let (pair, ready, ping_done) = (pair.clone(), ready.clone(), ping_done.clone());
        thread::spawn(move || send(&pair, &ready, &ping_done))
    };
    ready.wait();
    // The namespaces are fresh, so this ping resolves b's address with ARP
    // first: both cross the steering program while OAE frames flow.
    let ping = oae_tests::run(pair.command(0, "ping").args([
        "-c",
        "5",
        "-i",
        "0.05",
        "-W",
        "2",
        &pair.ip[1].to_string(),
    ]));
    ping_done.store(true, Ordering::Release);
    let a = send_side.join();
    stop.store(true, Ordering::Release);
    let b = echo_side.join();
    let (a, b) = (a.expect("sender panicked"), b.expect("echo side panicked"));
    assert!(
        ping.success(),
        "ping failed while OAE frames flowed: {ping}"
    );

    let n = a.frames;
    println!(
        "{n} frames echoed; wakeups a {:?}, b {:?}",
        a.wakeups, b.wakeups
    );
    assert!(n >= MIN_FRAMES, "only {n} frames exchanged");
    assert_eq!(b.frames, n, "echo side sent back a different number");
    for (side, r) in [("a", &a), ("b", &b)] {
        assert_eq!(r.bind_mode, BindMode::Copy, "veth binds in copy mode");
        let s = r.stats;
        assert_eq!((s.rx_packets, s.tx_packets), (n, n), "side {side}: {s:?}");
        assert_eq!(
            s.kernel_rx_dropped + s.kernel_rx_ring_full + s.kernel_fill_ring_empty,
            0,
            "side {side} dropped frames: {s:?}"
        );
        assert_eq!(
            s.kernel_rx_invalid + s.kernel_tx_invalid,
            0,
            "side {side}: {s:?}"
        );
        let c = r.counters;
        assert_eq!(c.steered, n, "side {side}: {c}");
        assert_eq!(c.no_socket + c.dropped_by_fault, 0, "side {side}: {c}");
        assert!(c.passed >= 6, "side {side} passed no ARP/ICMP: {c}");
    }
}

/// Opens a socket on side a of a fresh pair from a thread in namespace a.
fn open_in(pair: &VethPair, config: AfXdpConfig) -> Result<AfXdp, AfXdpError> {
    let ns = pair.ns[0].clone();
    thread::scope(|s| {
        s.spawn(move || {
            netns::enter(&ns).expect("enter namespace");
            AfXdp::new(&config)
        })
        .join()
        .expect("opening thread panicked")
    })
}

#[test]
fn opening_errors_say_what_is_wrong() {
    if !oae_tests::require_root("opening_errors_say_what_is_wrong") {
        return;
    }
    let pair = veth_pair("afxerr");
    let iface = pair.ifname[0].clone();
    let config = |f: fn(&mut AfXdpConfig)| {
        let mut c = AfXdpConfig::new(iface.clone(), 0);
        f(&mut c);
        c
    };

    let missing = open_in(&pair, config(|c| c.iface = "nosuch0".into())).unwrap_err();
    assert!(
        matches!(&missing, AfXdpError::InterfaceMissing { iface } if iface == "nosuch0"),
        "{missing}"
    );

    let queue = open_in(&pair, config(|c| c.queue_id = 3)).unwrap_err();
    assert!(
        matches!(
            queue,
            AfXdpError::QueueOutOfRange {
                queue_id: 3,
                queues: Some(1),
                ..
            }
        ),
        "{queue}"
    );
    assert!(queue.to_string().contains("below 1"), "{queue}");

    let zc = open_in(&pair, config(|c| c.mode = BindMode::ZeroCopy)).unwrap_err();
    assert!(matches!(zc, AfXdpError::ZeroCopyUnsupported { .. }), "{zc}");
    assert!(zc.to_string().contains("BindMode::Copy"), "{zc}");

    let invalid = open_in(&pair, config(|c| c.frame_size = 1500)).unwrap_err();
    assert!(matches!(invalid, AfXdpError::Config(_)), "{invalid}");

    // A queue takes one socket at a time.
    let first = open_in(&pair, config(|_| {})).expect("first socket");
    assert_eq!(first.bind_mode(), BindMode::Copy);
    let busy = open_in(&pair, config(|_| {})).unwrap_err();
    assert!(matches!(busy, AfXdpError::QueueBusy { .. }), "{busy}");
    drop(first);
    open_in(&pair, config(|c| c.mode = BindMode::Copy)).expect("queue free again");
}

#[test]
fn the_pool_is_bounded_and_handles_are_checked() {
    if !oae_tests::require_root("the_pool_is_bounded_and_handles_are_checked") {
        return;
    }
    let pair = veth_pair("afxpool");
    let config = AfXdpConfig {
        frame_count: 256,
        fill_size: 128,
        ..AfXdpConfig::new(pair.ifname[0].clone(), 0)
    };
    let mut xsk = open_in(&pair, config.clone()).expect("open socket");
    // Another driver, with more frames than this one: its handles name
    // frames this one does not have.
    let pair2 = veth_pair("afxpool");
    let mut other =
        open_in(&pair2, AfXdpConfig::new(pair2.ifname[0].clone(), 0)).expect("open socket");

    // Frames of the fill ring are not for transmission.
    let spare = (config.frame_count - config.fill_size) as usize;
    assert_eq!(xsk.free_buffers(), spare);
    let mut held = Vec::new();
    loop {
        let mut burst = Burst::new();
        if xsk.alloc(&mut burst, MAX_BURST) == 0 {
            break;
        }
        held.push(burst);
    }
    assert_eq!(held.iter().map(|b| b.len()).sum::<usize>(), spare);
    assert_eq!(xsk.stats().alloc_failed, 1);
    assert_eq!(
        xsk.buffers(),
        BufferCounts {
            free: 0,
            fill: config.fill_size as usize,
            tx: 0,
            caller: spare,
        }
    );

    let capacity = xsk.frame_capacity();
    assert_eq!(capacity, 2048 - 256);
    let mut one = held.pop().unwrap();
    let frame = xsk.frame_mut(&mut one[0], capacity);
    assert_eq!(frame.len(), capacity);
    frame.fill(0xAB);
    assert_eq!(xsk.frame(&one[0]).len(), capacity);
    assert_panics(
        "writing past the frame",
        "exceeds this buffer's capacity",
        || {
            xsk.frame_mut(&mut one[0], capacity + 1);
        },
    );

    let copy = one.clone();
    xsk.release(&mut one);
    assert!(one.is_empty());
    assert_panics("releasing twice", "already released", || {
        xsk.release(&mut copy.clone())
    });
    assert_panics("transmitting a released buffer", "already released", || {
        xsk.tx_burst(&mut copy.clone());
    });
    assert_panics("reading a released buffer", "already released", || {
        xsk.frame(&copy[0]);
    });

    for mut burst in held {
        xsk.release(&mut burst);
    }
    assert_eq!(xsk.free_buffers(), spare);
    assert_eq!(xsk.buffers().caller, 0);

    // Handles of another driver are refused where they name a frame this
    // one has not handed out (here: beyond its UMEM).
    let mut foreign = Burst::new();
    assert_eq!(other.alloc(&mut foreign, 1), 1);
    assert_panics(
        "releasing another driver's buffer",
        "outside this driver's UMEM",
        || xsk.release(&mut foreign.clone()),
    );
    other.release(&mut foreign);
    assert_eq!(xsk.buffers().caller, 0);

    // A runt is refused and stays the caller's.
    let mut runt = Burst::new();
    assert_eq!(other.alloc(&mut runt, 1), 1);
    other.frame_mut(&mut runt[0], 10);
    assert_panics("transmitting a runt", "at least an Ethernet header", || {
        other.tx_burst(&mut runt);
    });
    other.release(&mut runt);

    // One handle twice in a burst is refused rather than queued twice.
    let mut doubled = Burst::new();
    assert_eq!(other.alloc(&mut doubled, 1), 1);
    other.frame_mut(&mut doubled[0], 64);
    doubled.push(doubled[0]);
    assert_panics(
        "one handle twice",
        "already queued for transmission",
        || {
            other.tx_burst(&mut doubled);
        },
    );
}

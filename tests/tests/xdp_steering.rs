//! The XDP program on a real interface: a veth pair between two network
//! namespaces, the program attached to side b, frames sent from side a.
//!
//! No AF_XDP socket is registered here, so every OAE frame that survives
//! the fault injector is counted as `no_socket`; the counters alone show
//! what the program decided. Frames are sent by a Python AF_PACKET socket
//! pinned to CPU 0, so the program runs on CPU 0 and its fault dice follow
//! `RngState::seeded(seed, 0)` exactly. The fault scope's test also sends
//! UDP datagrams that way and receives them with a UDP socket on side b.
//! Needs root.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Mutex, PoisonError};
use std::thread;
use std::time::{Duration, Instant};

use oae_common::{
    CORRUPT_RANDOM_OFFSET, ETH_HEADER_LEN, FaultConfig, FaultScope, IPV4_ETHERTYPE, OAE_ETHERTYPE,
    RngState,
};
use oae_pmd::netns::{self, VethPair};
use oae_pmd::xdp::{Steering, XdpCounters, XdpError, XdpMode};

/// Length of the OAE frames sent: the basic 64-byte frame.
const FRAME_LEN: usize = 64;

/// The CPU the sender is pinned to, hence the one the program runs on.
const CPU: u32 = 0;

/// Creates a veth pair. Serialised: pairs made at the same moment by one
/// process would pick the same temporary interface name.
fn veth_pair(tag: &str) -> VethPair {
    static CREATING: Mutex<()> = Mutex::new(());
    let _one_at_a_time = CREATING.lock().unwrap_or_else(PoisonError::into_inner);
    VethPair::create(tag).expect("create veth pair")
}

/// Attaches the program to side b of `pair` from a thread inside
/// namespace b, where the interface name means something.
fn attach(pair: &VethPair, mode: XdpMode) -> Result<Steering, XdpError> {
    Steering::attach_in_netns(&pair.ns[1], &pair.ifname[1], mode)
}

/// Sends `count` OAE frames from side a to side b, one system call each so
/// the receive path drains between frames and none is lost on the way.
fn send_oae(pair: &VethPair, count: usize) {
    send_frame(pair, &oae_frame(pair), count);
}

/// A 64-byte OAE frame from side a to side b; its payload counts up from 0.
fn oae_frame(pair: &VethPair) -> Vec<u8> {
    let mut frame = Vec::with_capacity(FRAME_LEN);
    frame.extend_from_slice(&pair.mac[1]);
    frame.extend_from_slice(&pair.mac[0]);
    frame.extend_from_slice(&OAE_ETHERTYPE.to_be_bytes());
    frame.extend(0..(FRAME_LEN - ETH_HEADER_LEN) as u8);
    frame
}

/// A 64-byte IPv4 UDP datagram from side a's address to side b's, from
/// port `source` to port `destination`: a correct IPv4 header checksum and
/// none for UDP (zero, which IPv4 allows), so side b's kernel takes it.
fn udp_frame(pair: &VethPair, source: u16, destination: u16) -> Vec<u8> {
    ip_frame(pair, IpShape::UDP, source, destination)
}

/// How an IPv4 frame of the scope tests is built: its protocol, 32-bit
/// words of IP options, and fragment offset (in 8-byte units).
#[derive(Clone, Copy)]
struct IpShape {
    protocol: u8,
    option_words: u8,
    fragment_offset: u16,
}

impl IpShape {
    const UDP: IpShape = IpShape {
        protocol: 17,
        option_words: 0,
        fragment_offset: 0,
    };
}

/// An IPv4 frame from a to b whose transport header starts with the two
/// ports given (for ICMP: the same four bytes where its type, code and
/// checksum sit), padded to `FRAME_LEN`. The IP header checksum is right;
/// the transport checksum is zero.
fn ip_frame(pair: &VethPair, shape: IpShape, source: u16, destination: u16) -> Vec<u8> {
    let header = 20 + 4 * usize::from(shape.option_words);
    let payload = FRAME_LEN - ETH_HEADER_LEN - header - 8;
    // A whole datagram says "don't fragment"; a later fragment is the last.
    let flags_offset = match shape.fragment_offset {
        0 => 0x4000,
        offset => offset,
    };
    let mut ip = vec![0x40 | (5 + shape.option_words), 0, 0, 0, 0, 0];
    ip.extend_from_slice(&flags_offset.to_be_bytes());
    ip.extend_from_slice(&[64, shape.protocol, 0, 0]);
    ip[2..4].copy_from_slice(&((header + 8 + payload) as u16).to_be_bytes());
    ip.extend_from_slice(&pair.ip[0].octets());
    ip.extend_from_slice(&pair.ip[1].octets());
    // No-operation options, whose bytes are no port.
    ip.resize(header, 1);
    let sum: u32 = ip
        .chunks(2)
        .map(|w| u32::from(u16::from_be_bytes([w[0], w[1]])))
        .sum();
    let folded = (sum & 0xffff) + (sum >> 16);
    let folded = (folded & 0xffff) + (folded >> 16);
    ip[10..12].copy_from_slice(&(!(folded as u16)).to_be_bytes());

    let mut frame = Vec::with_capacity(FRAME_LEN);
    frame.extend_from_slice(&pair.mac[1]);
    frame.extend_from_slice(&pair.mac[0]);
    frame.extend_from_slice(&IPV4_ETHERTYPE.to_be_bytes());
    frame.extend_from_slice(&ip);
    frame.extend_from_slice(&source.to_be_bytes());
    frame.extend_from_slice(&destination.to_be_bytes());
    frame.extend_from_slice(&((8 + payload) as u16).to_be_bytes());
    frame.extend_from_slice(&[0, 0]);
    frame.resize(FRAME_LEN, 0xab);
    assert_eq!(frame.len(), FRAME_LEN);
    frame
}

/// Sends `count` copies of `frame` from side a, one system call each.
fn send_frame(pair: &VethPair, frame: &[u8], count: usize) {
    let hex: String = frame.iter().map(|b| format!("{b:02x}")).collect();
    let script = format!(
        "import os, socket\n\
         os.sched_setaffinity(0, {{{CPU}}})\n\
         s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)\n\
         s.bind(('{iface}', 0))\n\
         frame = bytes.fromhex('{hex}')\n\
         for _ in range({count}):\n    s.send(frame)\n",
        iface = pair.ifname[0],
    );
    let out = oae_tests::run(pair.command(0, "python3").args(["-c", &script]));
    assert!(
        out.success(),
        "sending frames failed (python3 missing? apt-get install python3): {out}"
    );
}

/// OAE frames the program has decided about: each is steered, dropped by a
/// fault, or dropped for want of a socket.
fn oae_seen(c: &XdpCounters) -> u64 {
    c.steered + c.dropped_by_fault + c.no_socket
}

/// Sends `count` OAE frames and returns what the counters did meanwhile,
/// once the program has seen them all (bounded wait).
fn send_and_count(pair: &VethPair, steering: &Steering, count: usize) -> XdpCounters {
    let before = steering.try_counters().expect("read counters");
    send_oae(pair, count);
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let delta = steering
            .try_counters()
            .expect("read counters")
            .since(&before);
        if oae_seen(&delta) >= count as u64 || Instant::now() > deadline {
            return delta;
        }
        thread::sleep(Duration::from_millis(10));
    }
}

/// Sends `count` copies of `frame` and returns what the counters did
/// meanwhile, once the program has decided about at least `count` frames
/// and the counters have stopped moving (bounded wait). The kernel's own
/// frames (IPv6 neighbour discovery) may add to `passed`, never to the
/// fault counters.
fn send_and_settle(
    pair: &VethPair,
    steering: &Steering,
    frame: &[u8],
    count: usize,
) -> XdpCounters {
    let before = steering.try_counters().expect("read counters");
    send_frame(pair, frame, count);
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut last = None;
    loop {
        let delta = steering
            .try_counters()
            .expect("read counters")
            .since(&before);
        let decided = delta.passed + oae_seen(&delta);
        if (decided >= count as u64 && last == Some(delta)) || Instant::now() > deadline {
            return delta;
        }
        last = Some(delta);
        thread::sleep(Duration::from_millis(50));
    }
}

/// Runs `send` while a UDP socket on side b, bound to its address and
/// `port`, counts the datagrams it receives (until a second passes without
/// one); returns that count and what `send` returned.
fn received_udp<T>(pair: &VethPair, port: u16, send: impl FnOnce() -> T) -> (usize, T) {
    let script = format!(
        "import socket\n\
         s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n\
         s.bind(('{ip}', {port}))\n\
         print('ready', flush=True)\n\
         s.settimeout(1.0)\n\
         n = 0\n\
         try:\n    while True:\n        s.recv(2048)\n        n += 1\n\
         except socket.timeout:\n    pass\n\
         print(n, flush=True)\n",
        ip = pair.ip[1],
    );
    let mut receiver = pair
        .command(1, "python3")
        .args(["-c", &script])
        .stdout(Stdio::piped())
        // Piped, to be quoted if it fails; the script writes too little to
        // fill the pipe while nobody reads it.
        .stderr(Stdio::piped())
        .spawn()
        .expect("run ip netns exec python3 (apt-get install iproute2 python3)");
    let mut lines = BufReader::new(receiver.stdout.take().expect("receiver's stdout")).lines();
    let ready = lines.next().and_then(Result::ok);
    if ready.as_deref() != Some("ready") {
        let (status, stderr) = reap(receiver);
        panic!(
            "the UDP receiver did not start: it printed {ready:?} and exited with {status}\n\
             --- stderr:\n{stderr}"
        );
    }
    let sent = send();
    let said = lines.next().and_then(Result::ok);
    let (status, stderr) = reap(receiver);
    let count: Option<usize> = said.as_deref().and_then(|line| line.trim().parse().ok());
    match count {
        Some(count) if status.success() => (count, sent),
        _ => panic!(
            "the UDP receiver failed: it printed {said:?} for its count and exited with \
             {status}\n--- stderr:\n{stderr}"
        ),
    }
}

/// Waits for the UDP receiver to exit: its status and stderr.
fn reap(receiver: Child) -> (ExitStatus, String) {
    let out = receiver.wait_with_output().expect("reap the UDP receiver");
    (
        out.status,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Frames the program drops out of `count`, replaying its dice for `faults`
/// (drop only) on CPU 0.
fn predicted_drops(faults: &FaultConfig, count: usize) -> u64 {
    let mut dice = RngState::seeded(faults.seed, CPU);
    (0..count)
        .filter(|_| dice.chance_ppm(faults.drop_ppm))
        .count() as u64
}

/// Frames the program corrupts out of `count` with a random offset and no
/// drops: a roll for whether, then one for the byte and one for the bit.
fn predicted_corruptions(faults: &FaultConfig, count: usize) -> u64 {
    let mut dice = RngState::seeded(faults.seed, CPU);
    let payload = (FRAME_LEN - ETH_HEADER_LEN) as u32;
    (0..count)
        .filter(|_| {
            let hit = dice.chance_ppm(faults.corrupt_ppm);
            if hit {
                dice.below(payload);
                dice.below(8);
            }
            hit
        })
        .count() as u64
}

/// The XDP program `ip link` reports on side b, if any.
fn attached_program(pair: &VethPair) -> Option<String> {
    let out = oae_tests::run_ok(Command::new("ip").args([
        "-n",
        &pair.ns[1],
        "link",
        "show",
        "dev",
        &pair.ifname[1],
    ]));
    out.stdout
        .lines()
        .find(|line| line.trim_start().starts_with("prog/xdp"))
        .map(|line| line.trim().to_string())
}

#[test]
fn ip_traffic_still_flows_and_is_passed() {
    if !oae_tests::require_root("ip_traffic_still_flows_and_is_passed") {
        return;
    }
    let pair = veth_pair("xdpip");
    let steering = attach(&pair, XdpMode::Auto).expect("attach");
    assert_ne!(steering.mode(), XdpMode::Auto);
    let out = oae_tests::run(pair.command(0, "ping").args([
        "-c",
        "3",
        "-i",
        "0.2",
        "-W",
        "2",
        &pair.ip[1].to_string(),
    ]));
    assert!(out.success(), "ping through the XDP program failed: {out}");
    let c = steering.counters();
    assert!(c.passed >= 3, "{c}");
    assert_eq!(oae_seen(&c), 0, "{c}");
}

#[test]
fn oae_frames_without_a_socket_are_counted_and_dropped() {
    if !oae_tests::require_root("oae_frames_without_a_socket_are_counted_and_dropped") {
        return;
    }
    let pair = veth_pair("xdpnosock");
    let steering = attach(&pair, XdpMode::Auto).expect("attach");
    let d = send_and_count(&pair, &steering, 100);
    assert_eq!(d.no_socket, 100, "{d}");
    assert_eq!(
        d.steered + d.dropped_by_fault + d.corrupted_by_fault,
        0,
        "{d}"
    );
}

#[test]
fn link_down_drops_every_oae_frame_until_it_comes_back() {
    if !oae_tests::require_root("link_down_drops_every_oae_frame_until_it_comes_back") {
        return;
    }
    let pair = veth_pair("xdplink");
    let steering = attach(&pair, XdpMode::Auto).expect("attach");
    let down = FaultConfig {
        link_down: 1,
        ..FaultConfig::default()
    };
    steering.set_faults(&down).expect("set faults");
    assert_eq!(steering.faults(), down);
    let d = send_and_count(&pair, &steering, 50);
    assert_eq!((d.dropped_by_fault, d.no_socket), (50, 0), "{d}");

    steering
        .set_faults(&FaultConfig::default())
        .expect("clear faults");
    let d = send_and_count(&pair, &steering, 50);
    assert_eq!((d.dropped_by_fault, d.no_socket), (0, 50), "{d}");
}

#[test]
fn drops_follow_the_seed_exactly() {
    if !oae_tests::require_root("drops_follow_the_seed_exactly") {
        return;
    }
    const FRAMES: usize = 400;
    let faults = FaultConfig {
        drop_ppm: 500_000,
        seed: 0x00AE_5EED,
        ..FaultConfig::default()
    };
    let expected = predicted_drops(&faults, FRAMES);
    assert!((150..250).contains(&expected), "{expected}");

    let pair = veth_pair("xdpseed");
    let mut runs = Vec::new();
    for _ in 0..2 {
        // A fresh attach each time: new maps, dice seeded from scratch.
        let steering = attach(&pair, XdpMode::Auto).expect("attach");
        steering.set_faults(&faults).expect("set faults");
        let d = send_and_count(&pair, &steering, FRAMES);
        assert_eq!(d.dropped_by_fault + d.no_socket, FRAMES as u64, "{d}");
        runs.push(d.dropped_by_fault);

        // Setting the same configuration again restarts the dice.
        steering.set_faults(&faults).expect("set faults");
        let again = send_and_count(&pair, &steering, FRAMES);
        runs.push(again.dropped_by_fault);
    }
    assert_eq!(runs, [expected; 4]);
}

#[test]
fn corruption_is_counted_and_the_frame_still_steered() {
    if !oae_tests::require_root("corruption_is_counted_and_the_frame_still_steered") {
        return;
    }
    const FRAMES: usize = 200;
    let pair = veth_pair("xdpflip");
    let steering = attach(&pair, XdpMode::Auto).expect("attach");

    let always = FaultConfig {
        corrupt_ppm: 1_000_000,
        corrupt_offset: CORRUPT_RANDOM_OFFSET,
        ..FaultConfig::default()
    };
    steering.set_faults(&always).expect("set faults");
    let d = send_and_count(&pair, &steering, FRAMES);
    assert_eq!((d.corrupted_by_fault, d.no_socket), (200, 200), "{d}");

    let sometimes = FaultConfig {
        corrupt_ppm: 300_000,
        seed: 99,
        ..always
    };
    steering.set_faults(&sometimes).expect("set faults");
    let d = send_and_count(&pair, &steering, FRAMES);
    assert_eq!(
        d.corrupted_by_fault,
        predicted_corruptions(&sometimes, FRAMES),
        "{d}"
    );
    assert_eq!(d.no_socket, 200, "{d}");

    // A fixed offset past the end of the frame leaves it alone.
    let beyond = FaultConfig {
        corrupt_offset: 1000,
        ..always
    };
    steering.set_faults(&beyond).expect("set faults");
    let d = send_and_count(&pair, &steering, 50);
    assert_eq!((d.corrupted_by_fault, d.no_socket), (0, 50), "{d}");

    let inside = FaultConfig {
        corrupt_offset: 20,
        ..always
    };
    steering.set_faults(&inside).expect("set faults");
    let d = send_and_count(&pair, &steering, 50);
    assert_eq!(d.corrupted_by_fault, 50, "{d}");

    // An offset past the longest OAE frame could never flip a bit: refused
    // with the range, and the setting in force stays.
    let nowhere = FaultConfig {
        corrupt_offset: 5000,
        ..always
    };
    let err = steering
        .set_faults(&nowhere)
        .expect_err("an offset past every OAE frame")
        .to_string();
    assert!(err.contains("use 0 to 1061"), "{err}");
    assert_eq!(steering.faults(), inside);
}

#[test]
fn the_fault_scope_picks_the_frames_it_hurts() {
    if !oae_tests::require_root("the_fault_scope_picks_the_frames_it_hurts") {
        return;
    }
    const FRAMES: usize = 50;
    const PORT: u16 = 6379;
    const OTHER_PORT: u16 = 6380;
    const EPHEMERAL: u16 = 40_000;
    let pair = veth_pair("xdpscope");
    let steering = attach(&pair, XdpMode::Auto).expect("attach");
    let to_port = udp_frame(&pair, EPHEMERAL, PORT);
    let from_port = udp_frame(&pair, PORT, EPHEMERAL);
    let to_other = udp_frame(&pair, EPHEMERAL, OTHER_PORT);
    let every_frame_lost = FaultConfig {
        drop_ppm: 1_000_000,
        ..FaultConfig::default()
    };

    // The default scope is OAE frames: UDP to the port reaches its socket.
    steering.set_faults(&every_frame_lost).expect("set faults");
    assert_eq!(steering.faults().scope(), Some(FaultScope::Oae));
    let (got, d) = received_udp(&pair, PORT, || {
        send_and_settle(&pair, &steering, &to_port, FRAMES)
    });
    assert_eq!((got, d.dropped_by_fault), (FRAMES, 0), "{d}");
    assert!(d.passed >= FRAMES as u64, "{d}");
    let d = send_and_count(&pair, &steering, FRAMES);
    assert_eq!((d.dropped_by_fault, d.no_socket), (FRAMES as u64, 0), "{d}");

    // port:P drops every segment to or from P, and nothing else: UDP to
    // another port and OAE frames go on as without faults.
    let scoped = every_frame_lost.with_scope(FaultScope::Port(PORT));
    steering.set_faults(&scoped).expect("set faults");
    assert_eq!(steering.faults(), scoped);
    let (got, d) = received_udp(&pair, PORT, || {
        send_and_settle(&pair, &steering, &to_port, FRAMES)
    });
    assert_eq!((got, d.dropped_by_fault), (0, FRAMES as u64), "{d}");
    let d = send_and_settle(&pair, &steering, &from_port, FRAMES);
    assert_eq!(d.dropped_by_fault, FRAMES as u64, "{d}");
    let (got, d) = received_udp(&pair, OTHER_PORT, || {
        send_and_settle(&pair, &steering, &to_other, FRAMES)
    });
    assert_eq!((got, d.dropped_by_fault), (FRAMES, 0), "{d}");
    assert!(d.passed >= FRAMES as u64, "{d}");
    let d = send_and_count(&pair, &steering, FRAMES);
    assert_eq!((d.dropped_by_fault, d.no_socket), (0, FRAMES as u64), "{d}");

    // The port is read where the transport header really starts, only
    // from TCP and UDP, and only from a datagram's first fragment.
    let shaped = |protocol, option_words, fragment_offset| {
        let shape = IpShape {
            protocol,
            option_words,
            fragment_offset,
        };
        ip_frame(&pair, shape, EPHEMERAL, PORT)
    };
    for (what, frame, dropped) in [
        ("TCP to the port", shaped(6, 0, 0), FRAMES as u64),
        (
            "UDP to the port after IP options",
            shaped(17, 1, 0),
            FRAMES as u64,
        ),
        ("a later fragment of UDP to the port", shaped(17, 0, 100), 0),
        ("ICMP with the port's bytes", shaped(1, 0, 0), 0),
    ] {
        let d = send_and_settle(&pair, &steering, &frame, FRAMES);
        assert_eq!(d.dropped_by_fault, dropped, "{what}: {d}");
    }

    // ipv4 takes every IPv4 frame, whatever its port, and still no OAE one.
    steering
        .set_faults(&every_frame_lost.with_scope(FaultScope::Ipv4))
        .expect("set faults");
    let d = send_and_settle(&pair, &steering, &to_other, FRAMES);
    assert_eq!(d.dropped_by_fault, FRAMES as u64, "{d}");
    let d = send_and_count(&pair, &steering, FRAMES);
    assert_eq!((d.dropped_by_fault, d.no_socket), (0, FRAMES as u64), "{d}");

    // Corruption in scope is counted and the frame still passes.
    let flipped = FaultConfig {
        corrupt_ppm: 1_000_000,
        ..FaultConfig::default()
    }
    .with_scope(FaultScope::Port(PORT));
    steering.set_faults(&flipped).expect("set faults");
    let d = send_and_settle(&pair, &steering, &to_port, FRAMES);
    assert_eq!(
        (d.corrupted_by_fault, d.dropped_by_fault),
        (FRAMES as u64, 0),
        "{d}"
    );
    assert!(d.passed >= FRAMES as u64, "{d}");
}

#[test]
fn the_program_leaves_with_the_steering() {
    if !oae_tests::require_root("the_program_leaves_with_the_steering") {
        return;
    }
    let pair = veth_pair("xdpdrop");
    for mode in [XdpMode::Driver, XdpMode::Skb] {
        let steering = attach(&pair, mode).expect("attach");
        assert_eq!(steering.mode(), mode);
        let program = attached_program(&pair).expect("ip link shows the program");
        assert!(program.contains("oae_steer"), "{program}");
        drop(steering);
        assert_eq!(attached_program(&pair), None);
    }
}

#[test]
fn auto_mode_falls_back_to_skb_when_the_driver_refuses() {
    if !oae_tests::require_root("auto_mode_falls_back_to_skb_when_the_driver_refuses") {
        return;
    }
    let pair = veth_pair("xdpmtu");
    // Native XDP on veth refuses a peer MTU above what fits in one page.
    netns::ip_in(
        &pair.ns[0],
        &["link", "set", "dev", &pair.ifname[0], "mtu", "4000"],
    )
    .expect("raise the peer's MTU");
    let err = attach(&pair, XdpMode::Driver).expect_err("driver mode must be refused");
    assert!(
        matches!(
            err,
            XdpError::ModeUnsupported {
                mode: XdpMode::Driver,
                ..
            }
        ),
        "{err:?}"
    );
    assert!(err.to_string().contains("use skb mode"), "{err}");
    let steering = attach(&pair, XdpMode::Auto).expect("attach");
    assert_eq!(steering.mode(), XdpMode::Skb);
    let d = send_and_count(&pair, &steering, 20);
    assert_eq!(d.no_socket, 20, "{d}");
}

#[test]
fn a_second_program_is_refused_with_a_fix() {
    if !oae_tests::require_root("a_second_program_is_refused_with_a_fix") {
        return;
    }
    let pair = veth_pair("xdpbusy");
    let _first = attach(&pair, XdpMode::Auto).expect("attach");
    let err = attach(&pair, XdpMode::Auto).expect_err("second attach must fail");
    assert!(matches!(err, XdpError::AlreadyAttached { .. }), "{err:?}");
    assert!(
        err.to_string().contains("ip link set dev oae1 xdp off"),
        "{err}"
    );
}

#[test]
fn an_unknown_interface_is_named() {
    let err = Steering::attach("nosuch0", XdpMode::Auto).expect_err("no such interface");
    assert!(
        err.to_string().contains("'nosuch0' does not exist"),
        "{err}"
    );
}

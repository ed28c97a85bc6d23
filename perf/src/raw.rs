//! Raw references: what a [`Driver`] moves with no protocol on top. The
//! practical limit OAE over the same driver is compared against.
//!
//! * [`reflect`]: receives bursts and sends the same buffers back with the
//!   MAC addresses swapped (no copy);
//! * [`flood`]: keeps 64-byte numbered frames of the OAE EtherType going
//!   and counts the reflected ones (packets per second);
//! * [`ping_pong`]: one frame in flight, the round-trip time of each
//!   recorded in a histogram.
//!
//! [`run_on_veth`] runs all three on a fresh veth pair, one thread per
//! namespace, each pinned to its own core; [`run_afxdp`] does so with an
//! AF_XDP socket behind the oae steering program on each end.

use std::any::Any;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use oae_common::{ETH_HEADER_LEN, OAE_ETHERTYPE};
use oae_pmd::afxdp::{AfXdp, AfXdpConfig};
use oae_pmd::netns::{self, VethPair};
use oae_pmd::xdp::{Steering, XdpMode};
use oae_pmd::{Burst, Driver, DriverStats, MAX_BURST};
use serde::{Serialize, Serializer};

use crate::{MachineFacts, machine_facts, pin_preferred, round_to};

/// Length of the generated frames: the basic OAE frame.
pub const FRAME_LEN: usize = 64;

/// Where the sequence number sits: right after the Ethernet header.
const SEQ_AT: usize = ETH_HEADER_LEN;
/// Where the run tag sits, after the sequence number.
const RUN_AT: usize = SEQ_AT + 8;

/// A tag no earlier run of this process used: reflections still in flight
/// from an earlier run (a timed-out ping, the tail of a flood) carry
/// another and are not counted.
fn new_run_tag() -> u32 {
    static NEXT: AtomicU32 = AtomicU32::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// A raw frame from `src` to `dst` of run `run`, sequence number 0.
fn frame_template(dst: [u8; 6], src: [u8; 6], run: u32) -> [u8; FRAME_LEN] {
    let mut f = [0u8; FRAME_LEN];
    f[0..6].copy_from_slice(&dst);
    f[6..12].copy_from_slice(&src);
    f[12..14].copy_from_slice(&OAE_ETHERTYPE.to_be_bytes());
    f[RUN_AT..RUN_AT + 4].copy_from_slice(&run.to_le_bytes());
    f
}

/// The sequence number of a reflected frame of run `run`, if it is one.
fn reflected_seq(frame: &[u8], run: u32) -> Option<u64> {
    if frame.len() < RUN_AT + 4
        || frame[12..14] != OAE_ETHERTYPE.to_be_bytes()
        || frame[RUN_AT..RUN_AT + 4] != run.to_le_bytes()
    {
        return None;
    }
    Some(u64::from_le_bytes(
        frame[SEQ_AT..SEQ_AT + 8].try_into().expect("eight bytes"),
    ))
}

// ----- reflector --------------------------------------------------------------

/// What a reflector did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ReflectStats {
    /// Frames sent back.
    pub reflected: u64,
    /// Frames received but dropped because the transmit ring was full.
    pub dropped: u64,
}

/// Sends every received frame back where it came from, in the buffer it
/// arrived in, until `stop` is set. A frame the transmit ring has no room
/// for is dropped rather than held: holding would stall reception.
pub fn reflect<D: Driver>(driver: &mut D, stop: &AtomicBool) -> ReflectStats {
    let mut stats = ReflectStats::default();
    let mut burst: Burst<D::Buf> = Burst::new();
    while !stop.load(Ordering::Relaxed) {
        if driver.rx_burst(&mut burst) == 0 {
            continue;
        }
        for buf in &mut burst {
            // Any Ethernet frame holds both addresses.
            let len = driver.frame(buf).len();
            let (dst, src) = driver.frame_mut(buf, len)[..12].split_at_mut(6);
            dst.swap_with_slice(src);
        }
        stats.reflected += driver.tx_burst(&mut burst) as u64;
        stats.dropped += burst.len() as u64;
        driver.release(&mut burst);
    }
    stats
}

// ----- flood ------------------------------------------------------------------

/// How long and how hard to flood.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FloodConfig {
    /// Sent and counted, but not measured: lets rings, caches and
    /// frequencies settle.
    pub warmup: Duration,
    pub duration: Duration,
    /// Most frames sent and not yet reflected; 0 for no limit (open loop:
    /// whatever the reflector cannot take is lost).
    pub window: u64,
    /// After sending stops, how long to wait for the last reflections
    /// before counting the rest as lost.
    pub drain: Duration,
}

impl Default for FloodConfig {
    fn default() -> FloodConfig {
        FloodConfig {
            warmup: Duration::from_millis(200),
            duration: Duration::from_secs(2),
            window: 0,
            drain: Duration::from_millis(50),
        }
    }
}

/// What a flood measured. Counts cover the measured interval only.
///
/// The fields are in the order `oae-raw --json` has always printed them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct FloodResult {
    /// Reflected frames per second: the figure of merit.
    #[serde(serialize_with = "whole")]
    pub rx_pps: f64,
    #[serde(serialize_with = "whole")]
    pub tx_pps: f64,
    pub sent: u64,
    /// Reflected frames received during the interval.
    pub received: u64,
    #[serde(rename = "elapsed_s", serialize_with = "seconds")]
    pub elapsed: Duration,
    /// Frames sent over the whole run (warm-up included) never reflected.
    pub lost: u64,
    /// Reflections that arrived after a later frame's.
    pub reordered: u64,
}

/// Sends 64-byte numbered frames to `peer` as fast as the driver takes
/// them (within `cfg.window`), counting the reflections.
pub fn flood<D: Driver>(driver: &mut D, peer: [u8; 6], cfg: &FloodConfig) -> FloodResult {
    let run = new_run_tag();
    let template = frame_template(peer, driver.mac(), run);
    let mut tx: Burst<D::Buf> = Burst::new();
    let mut rx: Burst<D::Buf> = Burst::new();
    let (mut next_seq, mut sent, mut received, mut reordered) = (0u64, 0u64, 0u64, 0u64);
    let mut highest: Option<u64> = None;

    let start = Instant::now();
    let measure_from = start + cfg.warmup;
    let end = measure_from + cfg.duration;
    let mut at_measure_start: Option<(u64, u64, Instant)> = None;
    let mut at_end = None;
    let drain_until = end + cfg.drain;

    loop {
        let now = Instant::now();
        if at_measure_start.is_none() && now >= measure_from {
            at_measure_start = Some((sent, received, now));
        }
        let sending = now < end;
        if !sending && at_end.is_none() {
            at_end = Some((sent, received, now));
        }
        if !sending && (received == sent || now >= drain_until) {
            break;
        }

        if sending {
            let room = if cfg.window == 0 {
                MAX_BURST
            } else {
                cfg.window
                    .saturating_sub(sent - received)
                    .min(MAX_BURST as u64) as usize
            };
            let unsent = tx.len();
            if room > unsent {
                driver.alloc(&mut tx, room - unsent);
                for buf in &mut tx[unsent..] {
                    let frame = driver.frame_mut(buf, FRAME_LEN);
                    frame.copy_from_slice(&template);
                    frame[SEQ_AT..SEQ_AT + 8].copy_from_slice(&next_seq.to_le_bytes());
                    next_seq += 1;
                }
            }
            // Frames the ring refused stay at the front of `tx` and go
            // first next time, so sequence numbers leave in order.
            sent += driver.tx_burst(&mut tx) as u64;
        }

        driver.rx_burst(&mut rx);
        for buf in &rx {
            if let Some(seq) = reflected_seq(driver.frame(buf), run) {
                received += 1;
                match highest {
                    Some(h) if seq < h => reordered += 1,
                    _ => highest = Some(seq),
                }
            }
        }
        driver.release(&mut rx);
    }
    driver.release(&mut tx);

    let (sent0, received0, t0) = at_measure_start.unwrap_or((0, 0, start));
    let (sent1, received1, t1) = at_end.unwrap_or((sent, received, Instant::now()));
    let elapsed = t1.saturating_duration_since(t0);
    let secs = elapsed.as_secs_f64().max(f64::MIN_POSITIVE);
    FloodResult {
        sent: sent1 - sent0,
        received: received1 - received0,
        elapsed,
        tx_pps: (sent1 - sent0) as f64 / secs,
        rx_pps: (received1 - received0) as f64 / secs,
        lost: sent - received,
        reordered,
    }
}

// ----- ping-pong --------------------------------------------------------------

/// How many round trips to time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PingPongConfig {
    /// Round trips made first and not recorded.
    pub warmup_rounds: u64,
    /// Recording stops after this many round trips ...
    pub rounds: u64,
    /// ... or this long, whichever comes first.
    pub max_duration: Duration,
    /// A frame not back after this long is counted lost.
    pub timeout: Duration,
}

impl Default for PingPongConfig {
    fn default() -> PingPongConfig {
        PingPongConfig {
            warmup_rounds: 1_000,
            rounds: 100_000,
            max_duration: Duration::from_secs(5),
            timeout: Duration::from_millis(100),
        }
    }
}

/// Round-trip times, in nanoseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct PingPongResult {
    pub rounds: u64,
    pub lost: u64,
    pub min_ns: u64,
    #[serde(serialize_with = "tenths")]
    pub mean_ns: f64,
    pub p50_ns: u64,
    pub p90_ns: u64,
    pub p99_ns: u64,
    pub p999_ns: u64,
    pub max_ns: u64,
}

impl PingPongResult {
    fn from_histogram(h: &Histogram<u64>, lost: u64) -> PingPongResult {
        if h.is_empty() {
            return PingPongResult {
                lost,
                ..PingPongResult::default()
            };
        }
        PingPongResult {
            rounds: h.len(),
            lost,
            min_ns: h.min(),
            mean_ns: h.mean(),
            p50_ns: h.value_at_quantile(0.5),
            p90_ns: h.value_at_quantile(0.9),
            p99_ns: h.value_at_quantile(0.99),
            p999_ns: h.value_at_quantile(0.999),
            max_ns: h.max(),
        }
    }
}

/// Sends one 64-byte frame to `peer`, waits for its reflection, and again:
/// one frame in flight, each round trip timed from just before the
/// transmit call to the receive call that returned the frame.
pub fn ping_pong<D: Driver>(driver: &mut D, peer: [u8; 6], cfg: &PingPongConfig) -> PingPongResult {
    let run = new_run_tag();
    let template = frame_template(peer, driver.mac(), run);
    // Three significant figures from 1 ns to 100 s: 0.1 % resolution.
    let mut histogram =
        Histogram::<u64>::new_with_bounds(1, 100_000_000_000, 3).expect("valid bounds");
    let mut tx: Burst<D::Buf> = Burst::new();
    let mut rx: Burst<D::Buf> = Burst::new();
    let mut lost = 0u64;
    let started = Instant::now();

    for seq in 0..cfg.warmup_rounds + cfg.rounds {
        if seq >= cfg.warmup_rounds && started.elapsed() >= cfg.max_duration {
            break;
        }
        let give_up = Instant::now() + cfg.timeout;
        while driver.alloc(&mut tx, 1) == 0 {
            if Instant::now() >= give_up {
                return PingPongResult::from_histogram(&histogram, lost);
            }
            driver.rx_burst(&mut rx);
            driver.release(&mut rx);
        }
        let frame = driver.frame_mut(&mut tx[0], FRAME_LEN);
        frame.copy_from_slice(&template);
        frame[SEQ_AT..SEQ_AT + 8].copy_from_slice(&seq.to_le_bytes());

        let sent_at = Instant::now();
        while driver.tx_burst(&mut tx) == 0 {
            if Instant::now() >= give_up {
                break;
            }
        }
        driver.release(&mut tx);

        let mut back = None;
        while back.is_none() {
            if driver.rx_burst(&mut rx) > 0 {
                let now = Instant::now();
                // Late reflections of rounds given up on are skipped.
                if rx
                    .iter()
                    .any(|buf| reflected_seq(driver.frame(buf), run) == Some(seq))
                {
                    back = Some(now - sent_at);
                }
                driver.release(&mut rx);
            } else if sent_at.elapsed() >= cfg.timeout {
                break;
            }
        }
        match back {
            Some(rtt) if seq >= cfg.warmup_rounds => {
                histogram.saturating_record(rtt.as_nanos().try_into().unwrap_or(u64::MAX));
            }
            Some(_) => {}
            None => lost += 1,
        }
    }
    PingPongResult::from_histogram(&histogram, lost)
}

// ----- the experiment -----------------------------------------------------------

/// One end of the experiment, opened by the thread that serves it, inside
/// its namespace.
pub struct Endpoint<D> {
    pub driver: D,
    /// What the driver obtained, for the report (e.g. the bind mode).
    pub description: String,
    /// Whatever must outlive the driver, such as the steering program.
    pub keep_alive: Box<dyn Any>,
}

/// What to run, and where.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RawConfig {
    pub flood: FloodConfig,
    /// A second flood with this window, after the open-loop one; 0 for none.
    pub windowed_flood: u64,
    pub ping_pong: PingPongConfig,
    /// Core of the generator (flood and ping-pong), in namespace a.
    pub generator_core: usize,
    /// Core of the reflector, in namespace b.
    pub reflector_core: usize,
}

impl Default for RawConfig {
    fn default() -> RawConfig {
        RawConfig {
            flood: FloodConfig::default(),
            windowed_flood: 256,
            ping_pong: PingPongConfig::default(),
            generator_core: 0,
            reflector_core: 1,
        }
    }
}

impl RawConfig {
    /// Short runs, to check that everything works; the figures mean little.
    pub fn quick() -> RawConfig {
        RawConfig {
            flood: FloodConfig {
                warmup: Duration::from_millis(20),
                duration: Duration::from_millis(200),
                ..FloodConfig::default()
            },
            ping_pong: PingPongConfig {
                warmup_rounds: 100,
                rounds: 2_000,
                max_duration: Duration::from_secs(1),
                ..PingPongConfig::default()
            },
            ..RawConfig::default()
        }
    }
}

/// Everything one run measured; serialised, the line `oae-raw --json`
/// prints.
#[derive(Clone, Debug, Serialize)]
pub struct RawReport {
    pub generator: String,
    pub reflector: String,
    /// Cores actually pinned to (`None`: pinning failed).
    pub generator_core: Option<usize>,
    pub reflector_core: Option<usize>,
    pub ping_pong: PingPongResult,
    pub flood: FloodResult,
    #[serde(serialize_with = "windowed")]
    pub windowed_flood: Option<(u64, FloodResult)>,
    pub reflect: ReflectStats,
    #[serde(serialize_with = "driver_counters")]
    pub generator_stats: DriverStats,
    #[serde(serialize_with = "driver_counters")]
    pub reflector_stats: DriverStats,
    pub machine: MachineFacts,
    /// CPU time over wall time of the generator's and the reflector's
    /// threads, from socket open to exit (not in the JSON line).
    #[serde(skip)]
    pub cpu_cores: [f64; 2],
}

/// CPU time the calling thread used since `since`, over the wall time.
fn cores_used(since: &(oae_os::cpu::CpuTime, Instant)) -> f64 {
    let cpu = oae_os::cpu::this_thread().since(&since.0).total_s();
    cpu / since.1.elapsed().as_secs_f64().max(1e-9)
}

fn thread_clock() -> (oae_os::cpu::CpuTime, Instant) {
    (oae_os::cpu::this_thread(), Instant::now())
}

/// Sets the flag when dropped, so a failing or panicking thread still
/// stops the other one.
struct SetOnDrop<'a>(&'a AtomicBool);

impl Drop for SetOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Release);
    }
}

/// Runs ping-pong, then the flood(s), on a fresh veth pair: the reflector
/// in namespace b pinned to `cfg.reflector_core`, the generator in
/// namespace a pinned to `cfg.generator_core`. `open(pair, side)` opens
/// side `side`'s driver from the thread that will use it, already inside
/// that side's namespace.
pub fn run_on_veth<D, F>(cfg: &RawConfig, open: F) -> Result<RawReport, String>
where
    D: Driver,
    F: Fn(&VethPair, usize) -> Result<Endpoint<D>, String> + Sync,
{
    let machine = machine_facts();
    let pair = VethPair::create("raw").map_err(|e| format!("creating the veth pair: {e}"))?;
    let stop = AtomicBool::new(false);
    let (ready_tx, ready_rx) = mpsc::channel::<Result<String, String>>();

    let (pair, stop, open) = (&pair, &stop, &open);
    thread::scope(|s| {
        let reflector = s.spawn(move || {
            let _stop_on_exit = SetOnDrop(stop);
            let setup = netns::enter(&pair.ns[1])
                .map_err(|e| e.to_string())
                .and_then(|()| {
                    let core = pin_preferred(Some(cfg.reflector_core));
                    open(pair, 1).map(|end| (end, core))
                });
            let (mut end, core) = match setup {
                Ok(ok) => ok,
                Err(e) => {
                    let _ = ready_tx.send(Err(format!("reflector: {e}")));
                    return None;
                }
            };
            let clock = thread_clock();
            let _ = ready_tx.send(Ok(end.description.clone()));
            let stats = reflect(&mut end.driver, stop);
            let cores = cores_used(&clock);
            Some((
                end.description.clone(),
                core,
                stats,
                end.driver.stats(),
                cores,
            ))
        });

        let generator = s.spawn(move || {
            let _stop_on_exit = SetOnDrop(stop);
            netns::enter(&pair.ns[0]).map_err(|e| e.to_string())?;
            let core = pin_preferred(Some(cfg.generator_core));
            let mut end = open(pair, 0).map_err(|e| format!("generator: {e}"))?;
            let clock = thread_clock();
            ready_rx
                .recv()
                .map_err(|_| "the reflector exited before it was ready".to_string())??;
            let peer = pair.mac[1];
            let ping_pong = ping_pong(&mut end.driver, peer, &cfg.ping_pong);
            let flood_result = flood(&mut end.driver, peer, &cfg.flood);
            let windowed = (cfg.windowed_flood > 0).then(|| {
                let windowed_cfg = FloodConfig {
                    window: cfg.windowed_flood,
                    ..cfg.flood
                };
                (
                    cfg.windowed_flood,
                    flood(&mut end.driver, peer, &windowed_cfg),
                )
            });
            Ok::<_, String>((
                end.description.clone(),
                core,
                ping_pong,
                flood_result,
                windowed,
                end.driver.stats(),
                cores_used(&clock),
            ))
        });

        let generated = generator
            .join()
            .map_err(|_| "the generator panicked".to_string());
        stop.store(true, Ordering::Release);
        let reflected = reflector
            .join()
            .map_err(|_| "the reflector panicked".to_string())?;
        let (
            generator,
            generator_core,
            ping_pong,
            flood,
            windowed_flood,
            generator_stats,
            generator_cores,
        ) = generated??;
        let (reflector, reflector_core, reflect, reflector_stats, reflector_cores) =
            reflected.ok_or("the reflector failed to start")?;
        Ok(RawReport {
            generator,
            reflector,
            generator_core,
            reflector_core,
            ping_pong,
            flood,
            windowed_flood,
            reflect,
            generator_stats,
            reflector_stats,
            machine,
            cpu_cores: [generator_cores, reflector_cores],
        })
    })
}

/// Opens an AF_XDP socket on side `side` of `pair` behind the steering
/// program (attached in `xdp_mode`), with `config`'s rings and frames.
pub fn open_afxdp(
    pair: &VethPair,
    side: usize,
    xdp_mode: XdpMode,
    config: &AfXdpConfig,
) -> Result<Endpoint<AfXdp>, String> {
    let iface = &pair.ifname[side];
    let steering = Steering::attach(iface, xdp_mode).map_err(|e| e.to_string())?;
    let driver = AfXdp::new(&AfXdpConfig {
        iface: iface.clone(),
        ..config.clone()
    })
    .map_err(|e| e.to_string())?;
    steering
        .register_socket(config.queue_id, driver.fd())
        .map_err(|e| e.to_string())?;
    let description = format!(
        "af_xdp {} (xdp {}, tx budget {})",
        driver.bind_mode(),
        steering.mode(),
        driver
            .tx_budget()
            .map_or_else(|| "default".to_string(), |b| b.to_string())
    );
    Ok(Endpoint {
        driver,
        description,
        keep_alive: Box::new(steering),
    })
}

/// Floods whatever reflects frames on side b of `pair` (an external
/// reflector such as `dpdk-testpmd`) from an AF_XDP socket on side a,
/// pinned to `core`. Returns the flood's figures and the cores the
/// generator used meanwhile (CPU time over wall time).
pub fn flood_from_a(
    pair: &VethPair,
    core: usize,
    cfg: &FloodConfig,
) -> Result<(FloodResult, f64), String> {
    thread::scope(|s| {
        s.spawn(|| {
            netns::enter(&pair.ns[0]).map_err(|e| e.to_string())?;
            pin_preferred(Some(core));
            let mut end = open_afxdp(pair, 0, XdpMode::Auto, &AfXdpConfig::default())?;
            let clock = thread_clock();
            let result = flood(&mut end.driver, pair.mac[1], cfg);
            Ok((result, cores_used(&clock)))
        })
        .join()
        .map_err(|_| "the generator panicked".to_string())?
    })
}

/// [`run_on_veth`] with AF_XDP sockets on both ends.
pub fn run_afxdp(
    cfg: &RawConfig,
    xdp_mode: XdpMode,
    config: &AfXdpConfig,
) -> Result<RawReport, String> {
    run_on_veth(cfg, |pair, side| open_afxdp(pair, side, xdp_mode, config))
}

// ----- reporting ----------------------------------------------------------------

fn us(ns: u64) -> f64 {
    ns as f64 / 1e3
}

impl RawReport {
    /// A table for people.
    pub fn to_text(&self) -> String {
        let core = |c: Option<usize>| c.map_or_else(|| "unpinned".into(), |c| format!("core {c}"));
        let mut out = String::new();
        let _ = writeln!(
            out,
            "generator: {} on {}\nreflector: {} on {}",
            self.generator,
            core(self.generator_core),
            self.reflector,
            core(self.reflector_core)
        );
        let p = &self.ping_pong;
        let _ = writeln!(
            out,
            "ping-pong ({} round trips, {} lost), RTT us: min {:.2}  p50 {:.2}  p90 {:.2}  \
             p99 {:.2}  p99.9 {:.2}  max {:.2}  mean {:.2}",
            p.rounds,
            p.lost,
            us(p.min_ns),
            us(p.p50_ns),
            us(p.p90_ns),
            us(p.p99_ns),
            us(p.p999_ns),
            us(p.max_ns),
            p.mean_ns / 1e3
        );
        let mut flood_line = |name: &str, f: &FloodResult| {
            let _ = writeln!(
                out,
                "{name}: {:.3} Mpps reflected ({:.3} Mpps sent) over {:.2} s; {} lost, {} reordered",
                f.rx_pps / 1e6,
                f.tx_pps / 1e6,
                f.elapsed.as_secs_f64(),
                f.lost,
                f.reordered
            );
        };
        flood_line("flood, open loop", &self.flood);
        if let Some((window, f)) = &self.windowed_flood {
            flood_line(&format!("flood, window {window}"), f);
        }
        let _ = writeln!(
            out,
            "reflector: {} reflected, {} dropped (tx ring full)",
            self.reflect.reflected, self.reflect.dropped
        );
        for (name, s) in [
            ("generator", &self.generator_stats),
            ("reflector", &self.reflector_stats),
        ] {
            let _ = writeln!(
                out,
                "{name} kernel: rx_dropped {} rx_ring_full {} fill_ring_empty {} \
                 tx_ring_empty {}",
                s.kernel_rx_dropped,
                s.kernel_rx_ring_full,
                s.kernel_fill_ring_empty,
                s.kernel_tx_ring_empty
            );
        }
        let _ = write!(
            out,
            "machine: {} CPUs, {}, kernel {}, load {}",
            self.machine.nproc, self.machine.cpu_model, self.machine.kernel, self.machine.loadavg
        );
        out
    }

    /// One line of JSON.
    pub fn to_json(&self) -> String {
        // Plain structs of numbers and strings: serialising cannot fail.
        serde_json::to_string(self).expect("a raw report serialises")
    }
}

// ----- JSON ------------------------------------------------------------------

// Rates, times and means are rounded to the digits they carry: a rate
// of frames per second to whole frames, an interval to the microsecond,
// a mean of nanoseconds to a tenth.

fn whole<S: Serializer>(x: &f64, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(round_to(*x, 0))
}

fn tenths<S: Serializer>(x: &f64, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(round_to(*x, 1))
}

fn seconds<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(round_to(d.as_secs_f64(), 6))
}

/// The windowed flood as `{"window": W, "result": {..}}`, or `null`.
#[derive(Serialize)]
struct WindowedFlood<'a> {
    window: u64,
    result: &'a FloodResult,
}

fn windowed<S: Serializer>(w: &Option<(u64, FloodResult)>, s: S) -> Result<S::Ok, S::Error> {
    w.as_ref()
        .map(|(window, result)| WindowedFlood {
            window: *window,
            result,
        })
        .serialize(s)
}

/// The driver counters the report has always carried. `DriverStats` lives
/// in oae-pmd, which has no serde; the counters this report never had
/// (unsupported frames, invalid descriptors) stay out so that its shape
/// does not change.
#[derive(Serialize)]
struct DriverCounters {
    rx_packets: u64,
    tx_packets: u64,
    tx_ring_full: u64,
    alloc_failed: u64,
    kernel_rx_dropped: u64,
    kernel_rx_ring_full: u64,
    kernel_fill_ring_empty: u64,
    kernel_tx_ring_empty: u64,
}

fn driver_counters<S: Serializer>(d: &DriverStats, s: S) -> Result<S::Ok, S::Error> {
    DriverCounters {
        rx_packets: d.rx_packets,
        tx_packets: d.tx_packets,
        tx_ring_full: d.tx_ring_full,
        alloc_failed: d.alloc_failed,
        kernel_rx_dropped: d.kernel_rx_dropped,
        kernel_rx_ring_full: d.kernel_rx_ring_full,
        kernel_fill_ring_empty: d.kernel_fill_ring_empty,
        kernel_tx_ring_empty: d.kernel_tx_ring_empty,
    }
    .serialize(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_carry_their_run_and_sequence_number() {
        let run = new_run_tag();
        assert_ne!(new_run_tag(), run);
        let mut f = frame_template([2; 6], [4; 6], run);
        f[SEQ_AT..SEQ_AT + 8].copy_from_slice(&77u64.to_le_bytes());
        assert_eq!(reflected_seq(&f, run), Some(77));
        assert_eq!(reflected_seq(&f, run + 1), None, "another run's frame");
        assert_eq!(&f[12..14], &[0x88, 0xB5]);
        assert_eq!(reflected_seq(&f[..20], run), None);
        f[12] = 0x08;
        assert_eq!(
            reflected_seq(&f, run),
            None,
            "other EtherTypes are not ours"
        );
    }

    #[test]
    fn a_quick_run_on_veth_measures_every_part() {
        let report = run_afxdp(&RawConfig::quick(), XdpMode::Auto, &AfXdpConfig::default())
            .expect("run on a veth pair (needs root)");
        let p = report.ping_pong;
        assert!(p.rounds > 0 && p.lost == 0, "{p:?}");
        assert!(p.min_ns <= p.p50_ns && p.p50_ns <= p.p99_ns && p.p99_ns <= p.max_ns);
        assert!(report.flood.rx_pps > 0.0, "{:?}", report.flood);
        let (window, windowed) = report.windowed_flood.expect("a windowed flood by default");
        assert_eq!(window, 256);
        assert_eq!(
            windowed.lost, 0,
            "a window far below the rings loses nothing"
        );
        assert!(report.reflect.reflected >= windowed.received);
        assert!(report.to_json().starts_with("{\"generator\":"));
        assert!(report.to_text().contains("ping-pong"));
    }

    /// The line has the keys, nesting and order it had when it was
    /// written by hand; figures are rounded as they were printed.
    #[test]
    fn the_json_line_keeps_its_shape() {
        let flood = |rx_pps, tx_pps, sent, received, elapsed, lost| FloodResult {
            rx_pps,
            tx_pps,
            sent,
            received,
            elapsed,
            lost,
            reordered: 0,
        };
        let mut r = RawReport {
            generator: r#"af_xdp "copy""#.into(),
            reflector: "af_xdp zero-copy".into(),
            generator_core: Some(0),
            reflector_core: None,
            ping_pong: PingPongResult {
                rounds: 10,
                lost: 1,
                min_ns: 900,
                mean_ns: 1234.56,
                p50_ns: 1000,
                p90_ns: 1100,
                p99_ns: 1200,
                p999_ns: 1300,
                max_ns: 1400,
            },
            flood: flood(
                1_500_000.4,
                1_600_000.6,
                3_200_001,
                3_000_000,
                Duration::from_nanos(2_000_001_400),
                1,
            ),
            windowed_flood: Some((256, flood(2.0, 2.0, 4, 4, Duration::from_secs(2), 0))),
            reflect: ReflectStats {
                reflected: 5,
                dropped: 6,
            },
            generator_stats: DriverStats {
                rx_packets: 1,
                tx_packets: 2,
                tx_ring_full: 3,
                alloc_failed: 4,
                rx_unsupported: 99,
                kernel_rx_dropped: 5,
                kernel_rx_ring_full: 6,
                kernel_fill_ring_empty: 7,
                kernel_rx_invalid: 99,
                kernel_tx_ring_empty: 8,
                ..DriverStats::default()
            },
            reflector_stats: DriverStats::default(),
            machine: MachineFacts {
                nproc: 2,
                cpu_model: "Test CPU".into(),
                kernel: "6.1.0".into(),
                loadavg: "0.10 0.20 0.30".into(),
            },
            cpu_cores: [1.0, 0.5],
        };
        assert_eq!(
            r.to_json(),
            concat!(
                r#"{"generator":"af_xdp \"copy\"","reflector":"af_xdp zero-copy","#,
                r#""generator_core":0,"reflector_core":null,"#,
                r#""ping_pong":{"rounds":10,"lost":1,"min_ns":900,"mean_ns":1234.6,"#,
                r#""p50_ns":1000,"p90_ns":1100,"p99_ns":1200,"p999_ns":1300,"max_ns":1400},"#,
                r#""flood":{"rx_pps":1500000.0,"tx_pps":1600001.0,"sent":3200001,"#,
                r#""received":3000000,"elapsed_s":2.000001,"lost":1,"reordered":0},"#,
                r#""windowed_flood":{"window":256,"result":{"rx_pps":2.0,"tx_pps":2.0,"#,
                r#""sent":4,"received":4,"elapsed_s":2.0,"lost":0,"reordered":0}},"#,
                r#""reflect":{"reflected":5,"dropped":6},"#,
                r#""generator_stats":{"rx_packets":1,"tx_packets":2,"tx_ring_full":3,"#,
                r#""alloc_failed":4,"kernel_rx_dropped":5,"kernel_rx_ring_full":6,"#,
                r#""kernel_fill_ring_empty":7,"kernel_tx_ring_empty":8},"#,
                r#""reflector_stats":{"rx_packets":0,"tx_packets":0,"tx_ring_full":0,"#,
                r#""alloc_failed":0,"kernel_rx_dropped":0,"kernel_rx_ring_full":0,"#,
                r#""kernel_fill_ring_empty":0,"kernel_tx_ring_empty":0},"#,
                r#""machine":{"nproc":2,"cpu_model":"Test CPU","kernel":"6.1.0","#,
                r#""loadavg":"0.10 0.20 0.30"}}"#,
            )
        );
        r.windowed_flood = None;
        assert!(r.to_json().contains(r#""windowed_flood":null,"reflect":"#));
    }

    #[test]
    fn percentiles_come_from_the_histogram() {
        let mut h = Histogram::<u64>::new_with_bounds(1, 100_000_000_000, 3).unwrap();
        for ns in 1..=1000 {
            h.record(ns * 1000).unwrap();
        }
        let r = PingPongResult::from_histogram(&h, 2);
        assert_eq!((r.rounds, r.lost), (1000, 2));
        assert_eq!(r.min_ns, 1000);
        assert!((499_000..=501_000).contains(&r.p50_ns), "{r:?}");
        assert!((989_000..=991_000).contains(&r.p99_ns), "{r:?}");
        assert!(r.max_ns >= 999_000);
        assert_eq!(
            PingPongResult::from_histogram(&Histogram::new(3).unwrap(), 5).lost,
            5
        );
    }
}

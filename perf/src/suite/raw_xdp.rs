//! The raw AF_XDP reflector: the best flood rate and ping-pong of the
//! sockets alone, with no OAE in between.

use std::time::Duration;

use oae_pmd::afxdp::AfXdpConfig;
use oae_pmd::xdp::XdpMode;

use super::Options;
use super::choice::*;
use super::outcome::Outcome;
use crate::raw::{self, FloodConfig, PingPongConfig, RawConfig};

pub(super) fn raw_flood(opts: &Options) -> Result<Outcome, String> {
    let cfg = RawConfig {
        flood: flood_config(opts),
        windowed_flood: 256,
        ping_pong: PingPongConfig {
            warmup_rounds: 10,
            rounds: 100,
            max_duration: Duration::from_millis(100),
            ..PingPongConfig::default()
        },
        generator_core: opts.cores[0],
        reflector_core: opts.cores[1],
    };
    let r = raw::run_afxdp(&cfg, XdpMode::Auto, &AfXdpConfig::default())?;
    let best = r
        .windowed_flood
        .map_or(r.flood.rx_pps, |(_, w)| w.rx_pps.max(r.flood.rx_pps));
    let mut o = Outcome::default();
    o.set("frames_per_s", best);
    o.set("open_loop_frames_per_s", r.flood.rx_pps);
    // Both threads busy-poll from start to end: their whole life's share.
    o.set_cpu(r.cpu_cores, Some(best));
    o.headline = format!("{best:.0} frames/s reflected");
    Ok(o)
}

pub(super) fn flood_config(opts: &Options) -> FloodConfig {
    FloodConfig {
        warmup: Duration::from_millis(if opts.quick { 50 } else { 200 }),
        duration: Duration::from_secs_f64(opts.secs / 2.0),
        ..FloodConfig::default()
    }
}

pub(super) fn raw_ping_pong(opts: &Options, placement: Placement) -> Result<Outcome, String> {
    let cores = placement.cores(opts.cores);
    let cfg = RawConfig {
        flood: FloodConfig {
            warmup: Duration::ZERO,
            duration: Duration::from_millis(10),
            ..FloodConfig::default()
        },
        windowed_flood: 0,
        ping_pong: PingPongConfig {
            warmup_rounds: if opts.quick { 20 } else { 200 },
            rounds: 1_000_000,
            max_duration: Duration::from_secs_f64(opts.secs),
            ..PingPongConfig::default()
        },
        generator_core: cores[0],
        reflector_core: cores[1],
    };
    let r = raw::run_afxdp(&cfg, XdpMode::Auto, &AfXdpConfig::default())?;
    let p = &r.ping_pong;
    if p.rounds == 0 {
        return Err(format!("no round trip completed ({} lost)", p.lost));
    }
    let mut o = Outcome::default();
    for (name, ns) in [
        ("p50_us", p.p50_ns),
        ("p90_us", p.p90_ns),
        ("p99_us", p.p99_ns),
        ("p999_us", p.p999_ns),
        ("max_us", p.max_ns),
    ] {
        o.set(name, ns as f64 / 1e3);
    }
    o.set("lost", p.lost as f64);
    o.set_cpu(r.cpu_cores, None);
    o.headline = format!(
        "RTT p50 {:.1} us, p99.9 {:.1} us ({} rounds)",
        p.p50_ns as f64 / 1e3,
        p.p999_ns as f64 / 1e3,
        p.rounds
    );
    Ok(o)
}

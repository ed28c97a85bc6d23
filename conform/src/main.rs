//! oae-conform: an OAE peer written from docs/PROTOCOL.md alone, which
//! checks an implementation under test (IUT) clause by clause over a
//! real link. It runs on an interface whose other end reaches the IUT,
//! with the MAC the IUT takes for its peer; it prints a PASS/FAIL line per
//! clause and a summary, and exits 1 if any clause failed.

mod announce;
mod auth;
mod clauses;
mod ctx;
mod fabric;
mod frame;
mod handshake;
mod initiator;
mod peer;
mod probes;
mod target;
mod verbs;
mod wire;
mod wrap;

use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;

use crate::ctx::{Ctx, Target};
use crate::peer::{ANSWER, Peer};

#[derive(Parser)]
#[command(name = "oae-conform", version = oae_version::VERSION, about)]
struct Args {
    /// The interface the tester sends and receives on.
    #[arg(long)]
    iface: String,
    /// The IUT's MAC address.
    #[arg(long, value_parser = parse_mac)]
    iut_mac: [u8; 6],
    /// The IUT's region the tester may use, its key and length in bytes.
    #[arg(long, value_parser = number::<u16>)]
    region: u16,
    #[arg(long, value_parser = number::<u32>)]
    key: u32,
    #[arg(long, value_parser = number::<u32>)]
    region_len: u32,
    /// Where in the region the tester's 512 bytes start (they are
    /// overwritten).
    #[arg(long, default_value = "0", value_parser = number::<u32>)]
    base: u32,
    /// A region without the atomic permission, REGION:KEY, to check the
    /// `forbidden` refusal.
    #[arg(long, value_parser = parse_region)]
    no_atomics: Option<(u16, u32)>,
    /// Where a READ the IUT is asked to make lands in the IUT's own
    /// memory, REGION:OFFSET (20 bytes are written there).
    #[arg(long, default_value = "1:0", value_parser = parse_block)]
    iut_read_lands_in: (u16, u32),
    /// The round length the tester advertises and ticks at as Alice, ms.
    #[arg(long, default_value = "100")]
    round_ms: u64,
    /// A command that makes the IUT run a verb towards the tester and
    /// exits 0 when the verb succeeds: it is given `oaectl verb`'s
    /// arguments (e.g. `cas --region 1 --key 0xc0f --offset 24 --expected 0
    /// --new 5`). Without it the IUT's initiator side is not checked.
    #[arg(long)]
    submit: Option<String>,
    /// The link key (64 hex digits) of an authenticated link: every frame
    /// is sealed and checked, and the authentication clauses run instead
    /// of the link's.
    #[arg(long, value_parser = parse_key)]
    auth_key: Option<[u8; 32]>,
    /// A file holding the tester's identity secret (64 hex digits, as
    /// `oaed` keeps one): the link's key is agreed with the IUT by a
    /// handshake (PROTOCOL.md, "Key agreement"), the IUT trusting this
    /// identity; then the authentication clauses run under that key.
    #[arg(long, conflicts_with = "auth_key")]
    identity_file: Option<std::path::PathBuf>,
    /// The link's channel for the key derivation: the queue number where
    /// queues steer links, else 0.
    #[arg(long, default_value = "0", value_parser = number::<u32>)]
    auth_channel: u32,
    /// The IUT's link has `ordered = false`: losses are found by patience
    /// (I3); the clauses for such a link run instead of the link's.
    #[arg(long)]
    unordered: bool,
    /// The IUT runs the fabric on this link: check the fabric's frames
    /// (ADVERT, FORWARD) instead of the link's clauses.
    #[arg(long)]
    fabric: bool,
    /// How long to wait for the IUT's first HELLO, seconds.
    #[arg(long, default_value = "30")]
    wait_secs: u64,
}

/// Slots the clauses need the IUT to offer (they use fixed slot numbers,
/// up to 20, so that no two clauses' transfers meet).
const MIN_SLOTS: u16 = 24;

fn number<T: TryFrom<u64>>(s: &str) -> Result<T, String> {
    let v = match s.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => s.parse(),
    }
    .map_err(|_| format!("'{s}' is not a number (decimal, or hexadecimal after 0x)"))?;
    T::try_from(v).map_err(|_| format!("{s} is too large"))
}

fn parse_mac(s: &str) -> Result<[u8; 6], String> {
    wire::parse_mac(s).ok_or_else(|| format!("'{s}' is not a MAC address like 02:00:00:00:00:01"))
}

fn parse_key(s: &str) -> Result<[u8; 32], String> {
    let bad = || format!("'{s}' is not a key: give 64 hexadecimal digits");
    if s.len() != 64 || !s.is_ascii() {
        return Err(bad());
    }
    let mut key = [0u8; 32];
    for (i, byte) in key.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).map_err(|_| bad())?;
    }
    Ok(key)
}

fn parse_region(s: &str) -> Result<(u16, u32), String> {
    let (r, k) = s.split_once(':').ok_or("give REGION:KEY")?;
    Ok((number(r)?, number(k)?))
}

fn parse_block(s: &str) -> Result<(u16, u32), String> {
    let (r, o) = s.split_once(':').ok_or("give REGION:OFFSET")?;
    Ok((number(r)?, number(o)?))
}

fn main() -> ExitCode {
    let args = Args::parse();
    let socket = match wire::RawSocket::open(&args.iface) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("oae-conform: {}: {e} (it needs root)", args.iface);
            return ExitCode::from(2);
        }
    };
    let mut peer = Peer::new(socket, args.iut_mac, Duration::from_millis(args.round_ms));
    if let Some(key) = args.auth_key {
        peer.auth = Some(auth::Sealer::new(
            key,
            peer.mac(),
            args.iut_mac,
            args.auth_channel,
        ));
    }
    if let Some(path) = &args.identity_file {
        let secret = match std::fs::read_to_string(path)
            .map_err(|e| e.to_string())
            .and_then(|t| parse_key(t.trim()))
        {
            Ok(s) => s,
            Err(e) => {
                eprintln!("oae-conform: identity file {}: {e}", path.display());
                return ExitCode::from(2);
            }
        };
        let limit = Duration::from_secs(args.wait_secs);
        match handshake::agree(&mut peer, &secret, args.auth_channel, limit) {
            Ok(agreed) => {
                println!(
                    "oae-conform: link keyed by a handshake with the IUT's identity {}",
                    frame::hex(&agreed.iut_identity)
                );
                peer.auth = Some(auth::Sealer::new(
                    agreed.key,
                    peer.mac(),
                    args.iut_mac,
                    args.auth_channel,
                ));
            }
            Err(e) => {
                println!("FAIL  K1-K7            key agreement with the IUT: {e}");
                return ExitCode::FAILURE;
            }
        }
    }
    let Some(hello) = peer.learn(Duration::from_secs(args.wait_secs)) else {
        eprintln!(
            "oae-conform: no HELLO from {} on {} in {} s",
            frame::hex(&args.iut_mac),
            args.iface,
            args.wait_secs
        );
        return ExitCode::from(2);
    };
    if peer.iut.slots < MIN_SLOTS {
        eprintln!(
            "oae-conform: the IUT offers {} slots; the clauses use slots 0 to {}: configure at \
             least {MIN_SLOTS}",
            peer.iut.slots,
            MIN_SLOTS - 1
        );
        return ExitCode::from(2);
    }
    let backoff = hello_backoff(&mut peer);
    let iut = peer.iut;
    println!(
        "oae-conform: IUT node {} epoch {}, {} slots, {} credits, max class {} (its HELLO: level {})",
        iut.node_id, iut.epoch, iut.slots, iut.credits, iut.max_class, hello.header.level
    );
    let mut ctx = Ctx::new(
        peer,
        Target {
            region: args.region,
            key: args.key,
            len: args.region_len,
            base: args.base,
            no_atomics: args.no_atomics,
            read_lands_in: args.iut_read_lands_in,
        },
        args.submit,
    );
    let mut results = vec![
        (
            "B3",
            "while nobody answers, HELLOs back off, at most 1 s apart",
            backoff,
        ),
        (
            "B1 B2",
            "bring-up with the tester as Alice",
            as_alice(&mut ctx),
        ),
    ];
    let clauses = if args.fabric {
        clauses::fabric()
    } else if args.auth_key.is_some() || args.identity_file.is_some() {
        clauses::authenticated()
    } else if args.unordered {
        clauses::unordered()
    } else {
        clauses::all()
    };
    for clause in clauses {
        let up = results
            .iter()
            .all(|(id, _, r)| !id.starts_with("B1 B2 R7") || r.is_ok());
        let r = if up {
            (clause.check)(&mut ctx)
        } else {
            Err("not run: bring-up failed".into())
        };
        results.push((clause.id, clause.says, r));
    }
    let (mut passed, mut failed, mut partial) = (0, 0, 0);
    for (id, says, r) in &results {
        match r {
            Ok(None) => {
                passed += 1;
                println!("PASS  {id:<16} {says}");
            }
            Ok(Some(note)) => {
                partial += 1;
                println!("PASS  {id:<16} {says} ({note})");
            }
            Err(e) => {
                failed += 1;
                println!("FAIL  {id:<16} {says}: {e}");
            }
        }
    }
    println!(
        "oae-conform: {} clauses passed ({partial} in part), {failed} failed",
        passed + partial
    );
    if failed > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

/// B3: the IUT's HELLOs while the tester says nothing, for a few seconds:
/// far fewer than one per `hello_interval`, never more than a second (and
/// scheduling) apart.
fn hello_backoff(peer: &mut Peer) -> Result<Option<String>, String> {
    const LISTEN: Duration = Duration::from_millis(3500);
    let start = std::time::Instant::now();
    let mut at = vec![start];
    while let Some(f) = peer.next(LISTEN.saturating_sub(start.elapsed())) {
        if f.transition() == frame::HELLO {
            at.push(std::time::Instant::now());
        }
    }
    let gaps: Vec<Duration> = at.windows(2).map(|w| w[1] - w[0]).collect();
    let (Some(&first), Some(&last)) = (gaps.first(), gaps.last()) else {
        return Err(format!("{} HELLOs in {LISTEN:?}: they stopped", gaps.len()));
    };
    let shortest = gaps.iter().min().copied().unwrap_or(first);
    // At most 1 s apart, or `hello_interval` (about the shortest gap) if
    // that is longer; a little more for scheduling.
    let limit = Duration::from_millis(1500).max(shortest * 3 / 2);
    if let Some(g) = gaps.iter().find(|&&g| g > limit) {
        return Err(format!(
            "HELLOs {g:?} apart (at most 1 s, or hello_interval)"
        ));
    }
    // Backing off: the gaps grow, unless they are long already.
    if last < first * 4 && first < Duration::from_millis(500) {
        return Err(format!(
            "{} HELLOs, {first:?} then still {last:?} apart: no back-off",
            gaps.len()
        ));
    }
    Ok(None)
}

/// Bring-up with the tester as Alice: the IUT's own epoch and a smaller
/// node id, which is possible only while the IUT knows no peer epoch as
/// large as its own.
fn as_alice(c: &mut Ctx) -> Result<Option<String>, String> {
    let iut = c.peer.iut;
    if iut.knows_epoch >= iut.epoch || iut.node_id == 0 {
        return Ok(Some(format!(
            "not checked: the IUT knows peer epoch {} (its own is {}); restart it fresh",
            iut.knows_epoch, iut.epoch
        )));
    }
    c.peer.restart(iut.epoch, iut.node_id - 1);
    if c.peer.bob {
        return Err("the tester could not take Alice's role".into());
    }
    c.peer.hello(1, true);
    let answer = loop {
        let Some(f) = c.peer.next(ANSWER) else {
            return Err("no HELLO answered the tester's HELLO level 1".into());
        };
        if f.transition() == frame::HELLO && f.header.receiver_epoch == c.peer.epoch {
            break f;
        }
    };
    if answer.header.level != 2 || !answer.header.bob {
        return Err(format!(
            "B1/B2: the IUT answered level {} with bob={} (want level 2, Bob)",
            answer.header.level, answer.header.bob
        ));
    }
    let tocks = c.peer.tocks;
    c.peer.quiet(ANSWER);
    if c.peer.tocks == tocks {
        return Err("L1: the tester, Alice, ticked and the IUT never answered".into());
    }
    Ok(None)
}

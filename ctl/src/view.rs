//! What oaectl shows people: status, members, counters and histograms as
//! tables, memory as a hex dump. Programs read `--json` instead; nothing
//! here is a contract.

use std::collections::BTreeMap;

use comfy_table::{CellAlignment, Table, presets};
use oae_client::control::RegionDump;
use oae_client::stats::{
    DRIVER_COUNTED_BY_THE_QUEUE, DataplaneStats, LatencyBuckets, QueueStats, counters_of,
};
use oae_client::status::{DataplaneStatus, LinkStatus, ProtocolStatus, QueueStatus};

/// A table with a header line and right-aligned numbers from column
/// `numbers_from` on.
fn table(header: &[&str], numbers_from: usize) -> Table {
    let mut t = Table::new();
    t.load_style(presets::NOTHING);
    t.set_header(header.iter().map(|h| h.to_string()));
    for (i, column) in t.column_iter_mut().enumerate() {
        if i >= numbers_from {
            column.set_cell_alignment(CellAlignment::Right);
        }
    }
    t
}

/// `t` indented under a heading.
fn print_table(heading: &str, t: &Table) {
    if !heading.is_empty() {
        outln!("{heading}");
    }
    for line in t.lines() {
        outln!("  {}", line.trim_end());
    }
}

pub fn print_status(status: &DataplaneStatus) {
    outln!(
        "dataplane {} (pid {}, epoch {})",
        status.name,
        status.pid,
        status.epoch
    );
    let mut t = table(
        &[
            "q",
            "link",
            "iface",
            "peer",
            "node",
            "state",
            "role",
            "peer epoch",
            "slots",
            "credit",
            "rtt us",
            "in flight",
        ],
        7,
    );
    let mut notes = Vec::new();
    for (q, l) in status.links() {
        let (row, note) = link_row(q, l);
        t.add_row(row);
        notes.extend(note.map(|n| format!("queue {} link {}: {n}", q.queue.index, l.link)));
    }
    print_table("", &t);
    for n in notes {
        outln!("  {n}");
    }
}

/// One row of `oaectl status`, and what it cannot fit (a peer's identity,
/// why it is down).
fn link_row(q: &QueueStatus, l: &LinkStatus) -> (Vec<String>, Option<String>) {
    let mut row = vec![
        q.queue.index.to_string(),
        l.link.to_string(),
        q.queue.iface.clone(),
        l.peer_mac.clone(),
        l.peer_node
            .map_or_else(|| "?".into(), |n| format!("{n:#x}")),
    ];
    match &l.state.protocol {
        // A queue pair has no roles, epochs or slots to show.
        ProtocolStatus::RcModel(rc) => {
            row.push(match &rc.qp_failure {
                Some(why) => format!("QP failed: {why}"),
                None => "up".into(),
            });
            row.push("RC model".into());
            row.extend(["", "", "", ""].map(String::from));
            row.push(rc.in_flight.to_string());
            // Says what it is, lest its figures be taken for RoCE's.
            (row, Some("the RC transport model (not RoCE)".into()))
        }
        ProtocolStatus::Oae(o) => {
            let state = match (l.state.up, o.unreachable) {
                (true, _) => "up",
                (false, true) => "unreachable",
                (false, false) => "down",
            };
            row.extend([
                state.to_string(),
                o.role.to_lowercase(),
                o.peer_epoch.to_string(),
                format!("{}/{}", o.credits_in_use, o.active_slots),
                o.peer_credits.to_string(),
                format!("{:.1}", o.srtt_ns as f64 / 1e3),
                q.in_flight.to_string(),
            ]);
            let note = [
                o.peer_identity
                    .as_ref()
                    .map(|p| format!("peer identity {p}")),
                o.down_line(),
            ]
            .into_iter()
            .flatten()
            .collect::<Vec<_>>();
            (row, (!note.is_empty()).then(|| note.join("; ")))
        }
    }
}

/// `oaectl members`: each queue's view, routes and paths.
pub fn print_members(status: &DataplaneStatus) {
    for q in &status.queues {
        let Some(f) = &q.fabric else {
            outln!(
                "queue {}: no fabric (fabric = true in its [[queue]])",
                q.queue.index
            );
            continue;
        };
        let mut t = table(&["node", "epoch", "reached", "path"], 1);
        for &(node, epoch) in &f.members {
            let how = match f.routes.iter().find(|r| r.node == node) {
                Some(r) => format!("{} hop(s) via link {}", r.hops, r.via),
                None => "this node".into(),
            };
            let path = match f.paths.iter().find(|p| p.node == node) {
                Some(p) if p.up => format!("up, rtt {:.1} us", p.srtt_ns as f64 / 1e3),
                Some(_) => "down".into(),
                None => String::new(),
            };
            t.add_row(vec![format!("{node:#x}"), epoch.to_string(), how, path]);
        }
        print_table(
            &format!(
                "queue {}: view {} ({}), {} members, {} transfers in doubt",
                q.queue.index,
                f.view,
                if f.agreed {
                    "agreed with every neighbour"
                } else {
                    "not yet agreed"
                },
                f.members.len(),
                f.in_doubt
            ),
            &t,
        );
    }
}

/// Two samples of the counters `seconds` apart, for rates.
pub struct Rates<'a> {
    pub before: &'a DataplaneStats,
    pub seconds: f64,
}

/// `oaectl stats` and `watch`: per queue its loop, driver, links and
/// verbs, then each XDP program; counters at zero left out. With `rates`,
/// each counter's change per second beside its total.
pub fn print_stats(stats: &DataplaneStats, rates: Option<&Rates<'_>>) {
    outln!(
        "dataplane {}{}",
        stats.name,
        rates.map_or_else(
            || " (totals; --interval for rates)".to_string(),
            |r| format!(" (rates over {:.2} s)", r.seconds)
        )
    );
    for (i, q) in stats.queues.iter().enumerate() {
        let before = rates.and_then(|r| r.before.queues.get(i).map(|b| (b, r.seconds)));
        print_queue(q, before);
    }
    for x in &stats.xdp {
        let before = rates.and_then(|r| {
            let b = r.before.xdp.iter().find(|b| b.iface == x.iface)?;
            Some((b.counters.clone(), r.seconds))
        });
        let t = counter_table(&x.counters, before.as_ref());
        let f = &x.faults;
        print_table(
            &format!(
                "xdp {} ({} mode): faults drop {} ppm, corrupt {} ppm{}",
                x.iface,
                x.mode,
                f.drop_ppm,
                f.corrupt_ppm,
                if f.link_down { ", link held down" } else { "" }
            ),
            &t,
        );
    }
}

fn print_queue(q: &QueueStats, before: Option<(&QueueStats, f64)>) {
    let info = &q.queue;
    outln!(
        "\nqueue {}: {} queue {}, {} driver, {} transport{}; cpu {:.2} s user, {:.2} s system",
        info.index,
        info.iface,
        info.queue_id,
        info.driver,
        q.transport,
        info.core
            .map_or_else(String::new, |c| format!(", core {c}")),
        q.cpu.user_s,
        q.cpu.system_s,
    );
    let pair = |now: &dyn Fn(&QueueStats) -> BTreeMap<String, u64>| {
        (now(q), before.map(|(b, s)| (now(b), s)))
    };
    for (heading, (now, then)) in [
        ("loop", pair(&|q| counters_of(&q.pipeline))),
        ("idle", pair(&|q| counters_of(&q.idle))),
        (
            "driver",
            pair(&|q| {
                let mut own = q.driver.clone();
                own.retain(|name, _| !DRIVER_COUNTED_BY_THE_QUEUE.contains(&name.as_str()));
                own
            }),
        ),
        (
            "host ring",
            pair(&|q| {
                q.host
                    .as_ref()
                    .map(|h| counters_of(&h.counters))
                    .unwrap_or_default()
            }),
        ),
    ] {
        if now.values().any(|&v| v > 0) {
            print_table(heading, &counter_table(&now, then.as_ref()));
        }
    }
    print_links(q, before);
    print_verbs(q, before);
    let l = &q.latency;
    if l.count > 0 {
        outln!(
            "latency: {} verbs, mean {:.1} us (`oaectl hist` for its percentiles)",
            l.count,
            l.sum_ns as f64 / l.count as f64 / 1e3
        );
    }
}

/// A link's heading, counters now and, for rates, before.
type LinkColumn = (String, Counts, Option<Counts>);
type Counts = BTreeMap<String, u64>;

/// Links as columns, their counters as rows: the names are long and the
/// links few.
fn print_links(q: &QueueStats, before: Option<(&QueueStats, f64)>) {
    let columns: Vec<LinkColumn> = q
        .links
        .iter()
        .filter(|l| l.counters.values().any(|&v| v > 0))
        .map(|l| {
            let mut now = l.counters.clone();
            now.extend(prefixed("malformed", &l.malformed));
            now.extend(prefixed("auth_dropped", &l.auth_dropped));
            let then = before
                .and_then(|(b, _)| b.links.iter().find(|x| x.link == l.link))
                .map(|b| {
                    let mut then = b.counters.clone();
                    then.extend(prefixed("malformed", &b.malformed));
                    then.extend(prefixed("auth_dropped", &b.auth_dropped));
                    then
                });
            let peer = if l.peer_mac.is_empty() {
                String::new()
            } else {
                format!(" {}", l.peer_mac)
            };
            (format!("link {}{peer}", l.link), now, then)
        })
        .collect();
    if columns.is_empty() {
        return;
    }
    let seconds = before.map(|(_, s)| s);
    let mut header = vec!["counter".to_string()];
    for (name, _, _) in &columns {
        header.push(name.clone());
        if seconds.is_some() {
            header.push("/s".into());
        }
    }
    let header: Vec<&str> = header.iter().map(String::as_str).collect();
    let mut t = table(&header, 1);
    let names: std::collections::BTreeSet<&String> = columns
        .iter()
        .flat_map(|(_, now, _)| now.iter().filter(|(_, v)| **v > 0).map(|(k, _)| k))
        .collect();
    for name in names {
        let mut row = vec![name.clone()];
        for (_, now, then) in &columns {
            let v = now.get(name).copied().unwrap_or(0);
            row.push(v.to_string());
            if let Some(s) = seconds {
                let was = then
                    .as_ref()
                    .and_then(|t| t.get(name))
                    .copied()
                    .unwrap_or(0);
                row.push(rate(v, was, s));
            }
        }
        t.add_row(row);
    }
    print_table("links", &t);
}

fn print_verbs(q: &QueueStats, before: Option<(&QueueStats, f64)>) {
    if q.verbs.is_empty() {
        return;
    }
    let seconds = before.map(|(_, s)| s);
    let mut header = vec!["verb", "outcome", "count"];
    if seconds.is_some() {
        header.push("/s");
    }
    let mut t = table(&header, 2);
    for v in &q.verbs {
        let mut row = vec![v.verb.clone(), v.outcome.clone(), v.count.to_string()];
        if let Some((b, s)) = before {
            let was = b
                .verbs
                .iter()
                .find(|x| x.verb == v.verb && x.outcome == v.outcome)
                .map_or(0, |x| x.count);
            row.push(rate(v.count, was, s));
        }
        t.add_row(row);
    }
    print_table("verbs ended", &t);
}

/// A table of the counters that are not zero, with their rates if there
/// is an earlier sample.
fn counter_table(
    now: &BTreeMap<String, u64>,
    before: Option<&(BTreeMap<String, u64>, f64)>,
) -> Table {
    let mut header = vec!["counter", "total"];
    if before.is_some() {
        header.push("/s");
    }
    let mut t = table(&header, 1);
    for (name, &v) in now.iter().filter(|(_, v)| **v > 0) {
        let mut row = vec![name.clone(), v.to_string()];
        if let Some((then, s)) = before {
            row.push(rate(v, then.get(name).copied().unwrap_or(0), *s));
        }
        t.add_row(row);
    }
    t
}

fn rate(now: u64, before: u64, seconds: f64) -> String {
    let per_s = now.saturating_sub(before) as f64 / seconds;
    if per_s >= 100.0 || per_s == 0.0 {
        format!("{per_s:.0}")
    } else {
        format!("{per_s:.1}")
    }
}

fn prefixed<'a>(
    prefix: &'a str,
    counters: &'a BTreeMap<String, u64>,
) -> impl Iterator<Item = (String, u64)> + 'a {
    counters
        .iter()
        .map(move |(k, v)| (format!("{prefix}.{k}"), *v))
}

/// `oaectl hist`: the percentiles, then the buckets that hold verbs.
pub fn print_hist(queue: u16, p: &oae_client::control::Percentiles, b: Option<&LatencyBuckets>) {
    outln!("verbs completed on queue {queue}: {}", p.count);
    let mut t = table(&["", "us"], 1);
    for (name, ns) in [
        ("min", p.min),
        ("p50", p.p50),
        ("p90", p.p90),
        ("p99", p.p99),
        ("p99.9", p.p999),
        ("max", p.max),
    ] {
        t.add_row(vec![name.to_string(), format!("{:.3}", ns as f64 / 1e3)]);
    }
    print_table("percentiles", &t);
    let Some(b) = b.filter(|b| b.count > 0) else {
        return;
    };
    let mut t = table(&["up to", "verbs", "cumulative"], 1);
    let mut below = 0;
    for &(bound, cumulative) in &b.buckets {
        let here = cumulative - below;
        below = cumulative;
        if here == 0 {
            continue;
        }
        t.add_row(vec![
            latency_bound(bound),
            here.to_string(),
            format!("{:.2}%", 100.0 * cumulative as f64 / b.count as f64),
        ]);
    }
    if b.count > below {
        t.add_row(vec![
            "more".to_string(),
            (b.count - below).to_string(),
            "100.00%".into(),
        ]);
    }
    print_table("buckets", &t);
}

fn latency_bound(ns: u64) -> String {
    match ns {
        n if n >= 1_000_000_000 => format!("{} s", n as f64 / 1e9),
        n if n >= 1_000_000 => format!("{} ms", n as f64 / 1e6),
        n => format!("{} us", n as f64 / 1e3),
    }
}

/// Bytes as `hexdump -C` shows them: offset, 16 bytes in hex, as text.
pub fn print_dump(dump: &RegionDump, bytes: &[u8]) {
    for (i, line) in bytes.chunks(16).enumerate() {
        let at = u64::from(dump.offset) + 16 * i as u64;
        let mut hex = String::with_capacity(49);
        for (j, b) in line.iter().enumerate() {
            if j == 8 {
                hex.push(' ');
            }
            hex.push_str(&format!("{b:02x} "));
        }
        let text: String = line
            .iter()
            .map(|&b| {
                if b.is_ascii_graphic() || b == b' ' {
                    b as char
                } else {
                    '.'
                }
            })
            .collect();
        outln!("{at:08x}  {hex:<49} |{text}|");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_are_the_change_per_second_and_never_negative() {
        assert_eq!(rate(300, 100, 2.0), "100");
        assert_eq!(rate(10, 5, 2.0), "2.5");
        // A counter that went back (the dataplane restarted) has no rate.
        assert_eq!(rate(5, 10, 1.0), "0");
    }
}

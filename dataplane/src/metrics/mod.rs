//! `oaed`'s metrics endpoint: every counter of [`DataplaneStats`], each
//! link's state from [`DataplaneStatus`] and each queue's latency
//! histogram, as Prometheus text (0.0.4) or OpenMetrics 1.0 text, whichever
//! the scraper asks for. Served on its own thread (`[metrics] listen`); a
//! scrape asks the polling cores between bursts, as `oaectl stats` does.

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use oae_client::stats::{
    Counters, DRIVER_COUNTED_BY_THE_QUEUE, DataplaneStats, LatencyBuckets, counters_of,
};
use oae_client::status::{DataplaneStatus, ProtocolStatus};
use oae_os::process::ProcessStats;

mod help;

/// The two text formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Prometheus,
    OpenMetrics,
}

impl Format {
    /// OpenMetrics if the `Accept` header names it, as Prometheus does.
    pub fn negotiate(accept: Option<&str>) -> Format {
        match accept {
            Some(a) if a.contains("application/openmetrics-text") => Format::OpenMetrics,
            _ => Format::Prometheus,
        }
    }

    pub fn content_type(self) -> &'static str {
        match self {
            Format::Prometheus => "text/plain; version=0.0.4; charset=utf-8",
            Format::OpenMetrics => "application/openmetrics-text; version=1.0.0; charset=utf-8",
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Counter,
    Gauge,
    Histogram,
}

struct Family {
    /// Without the `_total` of a counter's samples.
    name: String,
    kind: Kind,
    help: String,
    /// Label text (`a="x",b="y"`), the sample's name suffix, its value.
    samples: Vec<(String, &'static str, f64)>,
}

/// Families in the order first met; samples of one family stay together.
#[derive(Default)]
struct Exposition {
    families: Vec<Family>,
}

impl Exposition {
    fn family(&mut self, name: &str, kind: Kind, help: &str) -> &mut Family {
        let at = match self.families.iter().position(|f| f.name == name) {
            Some(at) => at,
            None => {
                self.families.push(Family {
                    name: name.to_string(),
                    kind,
                    help: help.to_string(),
                    samples: Vec::new(),
                });
                self.families.len() - 1
            }
        };
        &mut self.families[at]
    }

    fn sample(&mut self, name: &str, kind: Kind, help: &str, labels: &Labels, value: f64) {
        let suffix = if kind == Kind::Counter { "_total" } else { "" };
        let text = labels.text();
        self.family(name, kind, help)
            .samples
            .push((text, suffix, value));
    }

    /// Every counter of `group`, as `oae_{group}_{name}_total` (the
    /// group said once: `idle_iterations` of `idle` is
    /// `oae_idle_iterations_total`), with its HELP text. Counters kept in
    /// nanoseconds or seconds (`_ns`, `_s`) are given in seconds.
    fn counters(&mut self, group: &str, counters: &Counters, labels: &Labels) {
        for (name, &n) in counters {
            let (name, value) = in_base_units(name, n as f64);
            let help = help::help(group, &name)
                .map_or_else(|| format!("{group} counter {name}"), str::to_string);
            let short = name
                .strip_prefix(group)
                .and_then(|n| n.strip_prefix('_'))
                .unwrap_or(&name);
            self.sample(
                &format!("oae_{group}_{short}"),
                Kind::Counter,
                &help,
                labels,
                value,
            );
        }
    }

    fn histogram(&mut self, name: &str, help: &str, labels: &Labels, h: &LatencyBuckets) {
        let family = self.family(name, Kind::Histogram, help);
        for &(bound_ns, count) in &h.buckets {
            let le = labels.with("le", &format!("{}", bound_ns as f64 / 1e9));
            family.samples.push((le.text(), "_bucket", count as f64));
        }
        let inf = labels.with("le", "+Inf");
        family.samples.push((inf.text(), "_bucket", h.count as f64));
        family
            .samples
            .push((labels.text(), "_count", h.count as f64));
        family
            .samples
            .push((labels.text(), "_sum", h.sum_ns as f64 / 1e9));
    }

    fn render(&self, format: Format) -> String {
        let mut out = String::new();
        for f in &self.families {
            // Prometheus text names a counter's family by its samples' name.
            let family = match (format, f.kind) {
                (Format::Prometheus, Kind::Counter) => format!("{}_total", f.name),
                _ => f.name.clone(),
            };
            let kind = match f.kind {
                Kind::Counter => "counter",
                Kind::Gauge => "gauge",
                Kind::Histogram => "histogram",
            };
            let _ = writeln!(out, "# HELP {family} {}", escape_help(&f.help));
            let _ = writeln!(out, "# TYPE {family} {kind}");
            for (labels, suffix, value) in &f.samples {
                let braces = if labels.is_empty() {
                    String::new()
                } else {
                    format!("{{{labels}}}")
                };
                let _ = writeln!(out, "{}{suffix}{braces} {}", f.name, number(*value));
            }
        }
        if format == Format::OpenMetrics {
            out.push_str("# EOF\n");
        }
        out
    }
}

/// A sample's labels, in order.
#[derive(Clone, Default)]
struct Labels(Vec<(&'static str, String)>);

impl Labels {
    fn with(&self, name: &'static str, value: &str) -> Labels {
        let mut l = self.clone();
        l.0.push((name, value.to_string()));
        l
    }

    fn text(&self) -> String {
        self.0
            .iter()
            .map(|(k, v)| format!("{k}=\"{}\"", escape_label(v)))
            .collect::<Vec<_>>()
            .join(",")
    }
}

fn escape_label(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

fn escape_help(v: &str) -> String {
    v.replace('\\', "\\\\").replace('\n', "\\n")
}

/// Integers without a fraction; others as Rust prints them (both formats
/// read either).
fn number(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else {
        format!("{v}")
    }
}

fn in_base_units(name: &str, value: f64) -> (String, f64) {
    if let Some(base) = name.strip_suffix("_ns") {
        (format!("{base}_seconds"), value / 1e9)
    } else if let Some(base) = name.strip_suffix("_s") {
        (format!("{base}_seconds"), value)
    } else {
        (name.to_string(), value)
    }
}

/// The exposition of a dataplane's counters and status.
pub fn render(stats: &DataplaneStats, status: &DataplaneStatus, format: Format) -> String {
    let mut e = Exposition::default();
    let dataplane = Labels::default().with("dataplane", &stats.name);
    e.sample(
        "oae_build_info",
        Kind::Gauge,
        "1, labelled with the release and the git commit oaed was built from",
        &dataplane
            .with("version", env!("CARGO_PKG_VERSION"))
            .with("commit", oae_version::COMMIT),
        1.0,
    );
    if let Some(p) = ProcessStats::read() {
        process(&mut e, &p);
    }
    e.sample(
        "oae_dataplane_epoch",
        Kind::Gauge,
        "this incarnation's epoch (grows at every start)",
        &dataplane,
        f64::from(status.epoch),
    );
    for q in &stats.queues {
        let queue = dataplane.with("queue", &q.queue.index.to_string());
        e.counters("queue", &counters_of(&q.pipeline), &queue);
        e.counters("idle", &counters_of(&q.idle), &queue);
        let mut driver = q.driver.clone();
        driver.retain(|name, _| !DRIVER_COUNTED_BY_THE_QUEUE.contains(&name.as_str()));
        e.counters("driver", &driver, &queue);
        e.sample(
            "oae_cpu_seconds",
            Kind::Counter,
            "CPU time of the polling thread",
            &queue.with("mode", "user"),
            q.cpu.user_s,
        );
        e.sample(
            "oae_cpu_seconds",
            Kind::Counter,
            "CPU time of the polling thread",
            &queue.with("mode", "system"),
            q.cpu.system_s,
        );
        for v in &q.verbs {
            let labels = queue.with("verb", &v.verb).with("outcome", &v.outcome);
            e.sample(
                "oae_verbs",
                Kind::Counter,
                "verbs ended, by verb and outcome",
                &labels,
                v.count as f64,
            );
        }
        if let Some(h) = &q.host {
            let mut host = counters_of(&h.counters);
            let waiting = host.remove("completions_waiting").unwrap_or(0);
            let ring = queue.with("ring", &h.ring);
            e.counters("host", &host, &ring);
            e.sample(
                "oae_host_completions_waiting",
                Kind::Gauge,
                "completions waiting for room on the host ring",
                &ring,
                waiting as f64,
            );
        }
        for l in &q.links {
            let link = queue
                .with("link", &l.link.to_string())
                .with("peer", &l.peer_mac);
            let mut counters = l.counters.clone();
            // Its reasons follow as one family.
            counters.remove("malformed_total");
            counters.remove("auth_dropped_total");
            e.counters("link", &counters, &link);
            for (reason, &n) in &l.auth_dropped {
                e.sample(
                    "oae_link_auth_dropped_frames",
                    Kind::Counter,
                    "frames an authenticated link dropped before reading them, by reason",
                    &link.with("reason", reason),
                    n as f64,
                );
            }
            for (reason, &n) in &l.malformed {
                e.sample(
                    "oae_link_malformed_frames",
                    Kind::Counter,
                    "malformed frames dropped, by reason",
                    &link.with("reason", reason),
                    n as f64,
                );
            }
        }
        e.histogram(
            "oae_verb_latency_seconds",
            "latency of completed verbs, from the burst that submitted them to the burst that completed them",
            &queue,
            &q.latency,
        );
    }
    link_state(&mut e, status, &dataplane);
    for x in &stats.xdp {
        let iface = dataplane.with("iface", &x.iface);
        e.counters("xdp", &x.counters, &iface);
        e.sample(
            "oae_xdp_fault_link_down",
            Kind::Gauge,
            "1 while the fault injector holds the link down",
            &iface,
            f64::from(u8::from(x.faults.link_down)),
        );
    }
    e.render(format)
}

/// The process, under the names Prometheus' own process collectors use.
fn process(e: &mut Exposition, p: &ProcessStats) {
    let none = Labels::default();
    e.sample(
        "process_cpu_seconds",
        Kind::Counter,
        "user and system CPU time of every thread of oaed",
        &none,
        p.cpu_seconds,
    );
    for (name, help, value) in [
        (
            "process_resident_memory_bytes",
            "resident memory of oaed",
            p.resident_bytes as f64,
        ),
        (
            "process_virtual_memory_bytes",
            "virtual memory of oaed",
            p.virtual_bytes as f64,
        ),
        (
            "process_open_fds",
            "file descriptors oaed holds open",
            p.open_fds as f64,
        ),
        (
            "process_max_fds",
            "the most file descriptors oaed may open",
            p.max_fds as f64,
        ),
        (
            "process_start_time_seconds",
            "when oaed started, seconds since the Unix epoch",
            p.start_time_seconds,
        ),
    ] {
        e.sample(name, Kind::Gauge, help, &none, value);
    }
}

/// Gauges of each link's state, and each fabric's counters.
fn link_state(e: &mut Exposition, status: &DataplaneStatus, dataplane: &Labels) {
    for (q, l) in status.links() {
        let link = dataplane
            .with("queue", &q.queue.index.to_string())
            .with("link", &l.link.to_string())
            .with("peer", &l.peer_mac);
        let state = &l.state;
        let mut gauges = vec![(
            "oae_link_up",
            "1 while the link is up",
            f64::from(u8::from(state.up)),
        )];
        if let ProtocolStatus::Oae(o) = &state.protocol {
            gauges.extend([
                (
                    "oae_link_epoch",
                    "this end's epoch on the link",
                    f64::from(o.epoch),
                ),
                (
                    "oae_link_peer_epoch",
                    "the peer's epoch",
                    f64::from(o.peer_epoch),
                ),
                (
                    "oae_link_srtt_seconds",
                    "smoothed round trip",
                    o.srtt_ns as f64 / 1e9,
                ),
                (
                    "oae_link_active_slots",
                    "slots in use",
                    f64::from(o.active_slots),
                ),
                (
                    "oae_link_peer_credits",
                    "credits the peer advertised",
                    f64::from(o.peer_credits),
                ),
                (
                    "oae_link_credits_in_use",
                    "credits held",
                    f64::from(o.credits_in_use),
                ),
                (
                    "oae_link_tentative",
                    "tentative transfers held for the peer",
                    f64::from(o.tentative),
                ),
                (
                    "oae_link_queued_verbs",
                    "verbs waiting for a slot",
                    o.queued_verbs as f64,
                ),
                (
                    "oae_link_unreachable",
                    "1 once the peer was declared unreachable",
                    f64::from(u8::from(o.unreachable)),
                ),
                (
                    "oae_link_down_reason",
                    "while the link is not up, the code of why not, when the frames it dropped tell (down_reason in oaectl --json status); 0 otherwise",
                    f64::from(o.down_reason.as_ref().map_or(0, |d| d.code)),
                ),
            ]);
        }
        for (name, help, value) in gauges {
            e.sample(name, Kind::Gauge, help, &link, value);
        }
    }
    for q in &status.queues {
        let Some(f) = &q.fabric else { continue };
        let queue = dataplane.with("queue", &q.queue.index.to_string());
        for (name, help, value) in [
            ("oae_fabric_view", "the fabric's view number", f.view as f64),
            (
                "oae_fabric_members",
                "live members in the view",
                f.members.len() as f64,
            ),
            (
                "oae_fabric_in_doubt",
                "transfers still in doubt",
                f.in_doubt as f64,
            ),
        ] {
            e.sample(name, Kind::Gauge, help, &queue, value);
        }
        e.counters("fabric", &f.counters, &queue);
    }
}

/// What the metrics thread reads at each scrape.
pub type Source = dyn Fn() -> Result<(DataplaneStats, DataplaneStatus), String> + Send + Sync;

/// The endpoint's thread; stops when the flag it was given is set.
pub struct MetricsServer {
    thread: Option<JoinHandle<()>>,
    pub addr: SocketAddr,
}

impl MetricsServer {
    /// Listens on `addr` (port 0 picks one: see [`MetricsServer::addr`]).
    pub fn start(
        addr: SocketAddr,
        source: Arc<Source>,
        stop: Arc<AtomicBool>,
    ) -> Result<MetricsServer, String> {
        let server = tiny_http::Server::http(addr)
            .map_err(|e| format!("[metrics] listen = \"{addr}\": cannot listen there: {e}"))?;
        let addr = server
            .server_addr()
            .to_ip()
            .ok_or_else(|| format!("[metrics] listen = \"{addr}\": not an IP address"))?;
        let thread = std::thread::Builder::new()
            .name("oae-metrics".into())
            .spawn(move || serve(&server, &*source, &stop))
            .map_err(|e| format!("cannot start the metrics thread: {e}"))?;
        Ok(MetricsServer {
            thread: Some(thread),
            addr,
        })
    }

    pub fn join(mut self) {
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn serve(server: &tiny_http::Server, source: &Source, stop: &AtomicBool) {
    while !stop.load(Ordering::Relaxed) {
        let request = match server.recv_timeout(Duration::from_millis(100)) {
            Ok(Some(r)) => r,
            Ok(None) => continue,
            Err(_) => return,
        };
        let accept = request
            .headers()
            .iter()
            .find(|h| h.field.equiv("Accept"))
            .map(|h| h.value.as_str().to_string());
        let format = Format::negotiate(accept.as_deref());
        let path = request.url().split('?').next().unwrap_or("");
        let (code, content_type, body) = if *request.method() != tiny_http::Method::Get {
            (405, "text/plain", "only GET is served\n".to_string())
        } else if path != "/metrics" {
            (404, "text/plain", "metrics are at /metrics\n".to_string())
        } else {
            match source() {
                Ok((stats, status)) => {
                    (200, format.content_type(), render(&stats, &status, format))
                }
                Err(e) => (
                    503,
                    "text/plain",
                    format!("the dataplane did not answer: {e}\n"),
                ),
            }
        };
        let header =
            tiny_http::Header::from_bytes("Content-Type", content_type).expect("a valid header");
        let response = tiny_http::Response::from_string(body)
            .with_status_code(code)
            .with_header(header);
        let _ = request.respond(response);
    }
}

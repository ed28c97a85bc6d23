//! `oaed`'s metrics endpoint on a live pair: the Prometheus text passes
//! `promtool check metrics`, the OpenMetrics text parses with the Python
//! reference client's strict parser, Prometheus itself scrapes it and
//! evaluates the alert rules and the dashboard's queries, and the figures
//! are the verbs the test ran. The alert rules pass `promtool check rules`
//! and their unit tests.

use std::collections::HashMap;
use std::io::Write as _;
use std::process::{Command, Stdio};
use std::time::Duration;

use oae_client::control::{ControlError, VerbAnswer, VerbSpec};
use oae_client::outcome::Outcome;
use oae_os::child::Supervised;
use oae_tests::dataplanes::{Dataplanes, Options, TARGET_KEY, TARGET_REGION};
use oae_tests::{CommandOutput, SCAPY_PYTHON, poll_until, run};

const CAS_VERBS: u64 = 20;

const DEPLOY: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../deploy");

/// Families only some dataplanes have: a fabric's, an authenticated
/// link's.
const CONDITIONAL: [&str; 2] = ["oae_fabric_", "oae_link_auth_"];

/// Every metric family the alert rules and the dashboard name.
fn families_used() -> Vec<String> {
    let rules = std::fs::read_to_string(format!("{DEPLOY}/prometheus/oae-alerts.yml"))
        .expect("the alert rules");
    let mut used: Vec<String> = queries()
        .iter()
        .map(String::as_str)
        .chain([rules.as_str()])
        .flat_map(|text| {
            text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .filter(|w| w.starts_with("oae_") || w.starts_with("process_"))
                .map(|w| w.strip_suffix("_bucket").unwrap_or(w).to_string())
                .collect::<Vec<_>>()
        })
        .collect();
    used.sort();
    used.dedup();
    used
}

/// The dashboard's queries, its `$dataplane` variable meaning every one.
fn queries() -> Vec<String> {
    let text = std::fs::read_to_string(format!("{DEPLOY}/grafana/oae-dashboard.json"))
        .expect("the dashboard");
    let dashboard: serde_json::Value = serde_json::from_str(&text).expect("the dashboard's JSON");
    let panels = dashboard["panels"].as_array().expect("panels");
    assert!(panels.len() >= 10, "{} panels", panels.len());
    panels
        .iter()
        .flat_map(|p| p["targets"].as_array().cloned().unwrap_or_default())
        .map(|t| {
            t["expr"]
                .as_str()
                .expect("a query")
                .replace("$dataplane", ".*")
        })
        .collect()
}

#[test]
fn the_alert_rules_pass_promtool_and_their_unit_tests() {
    let check = run(Command::new("promtool")
        .args(["check", "rules"])
        .arg(format!("{DEPLOY}/prometheus/oae-alerts.yml")));
    assert!(
        check.success() && check.stdout.contains("SUCCESS"),
        "{check}"
    );
    let test = run(Command::new("promtool")
        .args(["test", "rules", "oae-alerts.test.yml"])
        .current_dir(format!("{DEPLOY}/prometheus")));
    assert!(test.success() && test.stdout.contains("SUCCESS"), "{test}");
}

/// Python's `prometheus_client` OpenMetrics parser (Debian's
/// python3-prometheus-client): reads stdin, prints every sample as JSON
/// `[name, labels, value]`; a text that is not OpenMetrics raises.
const OPENMETRICS_PARSE: &str = r#"
import json, sys
from prometheus_client.openmetrics.parser import text_string_to_metric_families
out = []
for family in text_string_to_metric_families(sys.stdin.read()):
    for s in family.samples:
        out.append([s.name, s.labels, s.value])
print(json.dumps(out))
"#;

fn scrape(d: &Dataplanes, accept: Option<&str>, path: &str) -> CommandOutput {
    let url = format!("http://{}{path}", d.metrics_addr(0));
    let mut curl = d.pair.command(0, "curl");
    curl.args(["-sS", "-i", "--max-time", "20"]);
    if let Some(a) = accept {
        curl.args(["-H", &format!("Accept: {a}")]);
    }
    run(curl.arg(url))
}

/// Headers and body of a `curl -i` answer.
fn split(out: &CommandOutput) -> (String, String) {
    assert!(out.success(), "{out}");
    let (head, body) = out
        .stdout
        .split_once("\r\n\r\n")
        .unwrap_or_else(|| panic!("no HTTP answer: {out}"));
    (head.to_ascii_lowercase(), body.to_string())
}

fn with_stdin(cmd: &mut Command, input: &str) -> CommandOutput {
    let command = format!("{cmd:?}");
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {command}: {e}"));
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(input.as_bytes())
        .expect("write stdin");
    let out = child.wait_with_output().expect("wait");
    CommandOutput {
        command,
        status: out.status,
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Samples of the Prometheus text, by name and label text.
fn samples(text: &str) -> HashMap<String, f64> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .filter_map(|l| {
            let (key, value) = l.rsplit_once(' ')?;
            Some((key.to_string(), value.parse().ok()?))
        })
        .collect()
}

fn cas(d: &Dataplanes, key: u32, offset: u32) -> Result<VerbAnswer, ControlError> {
    d.verb(
        0,
        VerbSpec::Cas {
            region: TARGET_REGION,
            key,
            offset,
            expected: 0,
            new: 1,
        },
    )
}

#[test]
fn a_live_dataplane_serves_metrics_prometheus_and_promtool_accept() {
    if !oae_tests::require_root("a_live_dataplane_serves_metrics_prometheus_and_promtool_accept") {
        return;
    }
    let d = Dataplanes::start(
        "metrics",
        &Options {
            metrics: true,
            ..Options::default()
        },
    );
    // The log says where the endpoint listens, and that it is inside the
    // dataplane's namespace, at INFO with a time.
    let log = d.log(0);
    let line = log
        .lines()
        .find(|l| l.contains("metrics at http://"))
        .unwrap_or_else(|| panic!("no metrics line:\n{log}"));
    assert!(
        line.contains(" INFO ")
            && line.starts_with("20")
            && line.contains(&format!("inside network namespace {}", d.pair.ns[0])),
        "{line}"
    );
    for i in 0..CAS_VERBS {
        cas(&d, TARGET_KEY, 8 * i as u32).unwrap_or_else(|e| panic!("cas {i}: {e:?}"));
    }
    let refused = cas(&d, TARGET_KEY ^ 1, 0);
    assert!(
        matches!(&refused, Err(e) if e.outcome == Some(Outcome::RefusedBadKey)),
        "a wrong key is refused: {refused:?}"
    );

    // Prometheus text (no Accept header), checked by promtool's linter.
    let (head, text) = split(&scrape(&d, None, "/metrics"));
    assert!(
        head.contains("content-type: text/plain; version=0.0.4"),
        "{head}"
    );
    let check = with_stdin(Command::new("promtool").args(["check", "metrics"]), &text);
    assert!(
        check.success(),
        "promtool rejects the exposition: {check}\n{text}"
    );
    let s = samples(&text);
    let get = |key: &str| {
        *s.get(key)
            .unwrap_or_else(|| panic!("no sample {key} in:\n{text}"))
    };
    let q = r#"dataplane="a",queue="0""#;
    let link = format!(r#"{q},link="0",peer="02:0a:e0:00:00:02""#);
    assert_eq!(
        get(&format!(
            r#"oae_verbs_total{{{q},verb="cas",outcome="ok"}}"#
        )),
        CAS_VERBS as f64
    );
    assert_eq!(
        get(&format!(
            r#"oae_verbs_total{{{q},verb="cas",outcome="refused_bad_key"}}"#
        )),
        1.0
    );
    assert_eq!(get(&format!("oae_link_up{{{link}}}")), 1.0);
    assert!(get(&format!("oae_link_requests_sent_total{{{link}}}")) >= CAS_VERBS as f64);
    assert_eq!(
        get(&format!("oae_verb_latency_seconds_count{{{q}}}")),
        (CAS_VERBS + 1) as f64
    );
    assert_eq!(
        get(&format!(
            r#"oae_verb_latency_seconds_bucket{{{q},le="+Inf"}}"#
        )),
        (CAS_VERBS + 1) as f64
    );
    assert!(
        get(&format!(
            r#"oae_link_malformed_frames_total{{{link},reason="bad_crc"}}"#
        )) == 0.0
    );
    assert!(text.contains("oae_xdp_"), "XDP counters: {text}");
    // Bytes as well as frames, each counted once; the build and the
    // process; every counter with a HELP of its own.
    assert!(
        get(&format!("oae_queue_rx_bytes_total{{{q}}}"))
            >= 64.0 * get(&format!("oae_queue_rx_frames_total{{{q}}}")).min(1.0)
    );
    assert!(
        get(&format!("oae_queue_tx_bytes_total{{{q}}}"))
            > get(&format!("oae_queue_tx_frames_total{{{q}}}"))
    );
    for twice in [
        "oae_driver_rx_packets",
        "oae_driver_tx_packets",
        "oae_idle_idle_",
    ] {
        assert!(!text.contains(twice), "{twice}: {text}");
    }
    let build = format!(
        r#"oae_build_info{{dataplane="a",version="{}",commit="#,
        env!("CARGO_PKG_VERSION")
    );
    assert!(text.contains(&build), "{build}: {text}");
    for process in [
        "process_cpu_seconds_total",
        "process_resident_memory_bytes",
        "process_open_fds",
        "process_start_time_seconds",
    ] {
        assert!(get(process) > 0.0, "{process}");
    }
    let generic: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("# HELP"))
        .filter(|l| {
            ["queue", "idle", "driver", "host", "link", "xdp", "fabric"]
                .iter()
                .any(|g| l.contains(&format!(" {g} counter ")))
        })
        .collect();
    assert!(
        generic.is_empty(),
        "HELP texts that only repeat the name: {generic:?}"
    );
    // What the dashboard and the alerts read is there.
    for family in families_used() {
        if CONDITIONAL.iter().any(|c| family.starts_with(c)) {
            continue;
        }
        assert!(
            text.contains(&format!("# TYPE {family} ")),
            "the dashboard or an alert reads {family}, which is not exported:\n{text}"
        );
    }

    // OpenMetrics, as Prometheus asks for it, through the strict parser.
    let (head, om) = split(&scrape(
        &d,
        Some("application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5"),
        "/metrics",
    ));
    assert!(
        head.contains("content-type: application/openmetrics-text; version=1.0.0"),
        "{head}"
    );
    assert!(om.ends_with("# EOF\n"), "{om}");
    let parsed = with_stdin(
        Command::new(SCAPY_PYTHON).args(["-c", OPENMETRICS_PARSE]),
        &om,
    );
    assert!(parsed.success(), "not OpenMetrics: {parsed}\n{om}");
    let parsed: Vec<(String, HashMap<String, String>, f64)> =
        serde_json::from_str(&parsed.stdout).expect("the parser's JSON");
    let cas_ok = parsed.iter().find(|(name, labels, _)| {
        name == "oae_verbs_total"
            && labels.get("verb").map(String::as_str) == Some("cas")
            && labels.get("outcome").map(String::as_str) == Some("ok")
    });
    assert_eq!(cas_ok.map(|s| s.2), Some(CAS_VERBS as f64), "{om}");

    let (head, _) = split(&scrape(&d, None, "/other"));
    assert!(head.starts_with("http/1.1 404"), "{head}");

    prometheus_scrapes(&d);
}

/// Prometheus, in the dataplane's namespace, scrapes it every second; its
/// query API then answers with the verbs the test ran.
fn prometheus_scrapes(d: &Dataplanes) {
    let dir = d.dir.join("prometheus");
    std::fs::create_dir_all(&dir).expect("prometheus directory");
    let config = dir.join("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n\
             rule_files: [\"{DEPLOY}/prometheus/oae-alerts.yml\"]\n\
             scrape_configs:\n  - job_name: oaed\n    \
             static_configs:\n      - targets: [\"{}\"]\n",
            d.metrics_addr(0)
        ),
    )
    .expect("prometheus.yml");
    // The namespace's own loopback: nothing else listens there.
    let web = "127.0.0.1:9090";
    let log = std::fs::File::create(dir.join("log")).expect("log");
    let mut cmd = d.pair.command(0, "prometheus");
    cmd.arg(format!("--config.file={}", config.display()))
        .arg(format!(
            "--storage.tsdb.path={}",
            dir.join("data").display()
        ))
        .arg(format!("--web.listen-address={web}"))
        .stdout(log.try_clone().expect("log"))
        .stderr(log);
    let _prometheus = Supervised::spawn(&mut cmd, "prometheus", Duration::from_secs(5))
        .expect("start prometheus");
    let query = || {
        run(d.pair.command(0, "curl").args([
            "-sS",
            "--max-time",
            "5",
            &format!("http://{web}/api/v1/query?query=oae_verbs_total%7Bverb%3D%22cas%22%2Coutcome%3D%22ok%22%7D"),
        ]))
    };
    let log_text = || std::fs::read_to_string(dir.join("log")).unwrap_or_default();
    poll_until(
        Duration::from_secs(60),
        "Prometheus to have scraped the CAS count",
        || {
            let out = query();
            let v: serde_json::Value = serde_json::from_str(&out.stdout).unwrap_or_default();
            v["data"]["result"][0]["value"][1].as_str() == Some(&CAS_VERBS.to_string())
        },
        || format!("last answer: {}\nprometheus log:\n{}", query(), log_text()),
    );
    // Every alert rule evaluated against the live dataplane, without error.
    let api = |path: &str, args: &[&str]| {
        let mut curl = d.pair.command(0, "curl");
        curl.args(["-sS", "--max-time", "5", "-G"]);
        for a in args {
            curl.args(["--data-urlencode", a]);
        }
        let out = run(curl.arg(format!("http://{web}{path}")));
        serde_json::from_str::<serde_json::Value>(&out.stdout).unwrap_or_default()
    };
    poll_until(
        Duration::from_secs(60),
        "Prometheus to have evaluated every alert rule",
        || {
            let rules = api("/api/v1/rules", &[]);
            let rules: Vec<&serde_json::Value> = rules["data"]["groups"]
                .as_array()
                .into_iter()
                .flatten()
                .flat_map(|g| g["rules"].as_array().into_iter().flatten())
                .collect();
            rules.len() == 11
                && rules
                    .iter()
                    .all(|r| r["health"] == "ok" && r["lastEvaluation"] != "0001-01-01T00:00:00Z")
        },
        || {
            format!(
                "{}\nprometheus log:\n{}",
                api("/api/v1/rules", &[]),
                log_text()
            )
        },
    );
    // And every query of the dashboard.
    for q in queries() {
        let answer = api("/api/v1/query", &[&format!("query={q}")]);
        assert_eq!(answer["status"], "success", "{q}: {answer}");
    }
}

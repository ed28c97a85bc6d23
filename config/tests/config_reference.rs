//! docs/CONFIG.md against the code: every table's keys are exactly the ones
//! the configuration types accept (asked of the types themselves, through
//! the error an unknown key gets), and `[queue.link]`'s defaults are the
//! core's.

use std::collections::BTreeSet;

use oae_config::deployment::Deployment;
use oae_config::{Config, LinkSettings};

const PROBE: &str = "zz_not_a_key";

/// The keys serde says `document` (which puts the probe key in one
/// table) could have used instead of the probe.
fn keys_accepted<T: serde::de::DeserializeOwned + std::fmt::Debug>(
    document: &str,
) -> BTreeSet<String> {
    let err = match toml::from_str::<T>(document) {
        Ok(v) => panic!("the probe was accepted in\n{document}\n{v:?}"),
        Err(e) => e.message().to_string(),
    };
    let expected = err
        .split_once(&format!("unknown field `{PROBE}`, expected "))
        .unwrap_or_else(|| panic!("not an unknown-field error for\n{document}\n{err}"))
        .1;
    expected
        .split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect()
}

/// The keys docs/CONFIG.md lists under the heading that starts with
/// `heading`: the first column of its table.
fn keys_documented(heading: &str) -> BTreeSet<String> {
    let doc = include_str!("../../docs/CONFIG.md");
    let section = doc
        .split("\n## ")
        .find(|s| s.starts_with(heading))
        .unwrap_or_else(|| panic!("docs/CONFIG.md has no section '## {heading}'"));
    section
        .lines()
        .filter_map(|l| l.strip_prefix("| `"))
        .map(|l| l.split('`').next().unwrap().to_string())
        .collect()
}

fn rows(heading: &str) -> Vec<Vec<String>> {
    let doc = include_str!("../../docs/CONFIG.md");
    let section = doc.split("\n## ").find(|s| s.starts_with(heading)).unwrap();
    section
        .lines()
        .filter(|l| l.starts_with("| `"))
        .map(|l| l.split('|').map(|c| c.trim().to_string()).collect())
        .collect()
}

#[test]
fn every_table_documents_exactly_the_keys_of_the_code() {
    let with = |table: &str| format!("{table}\n{PROBE} = 1\n");
    let cases: [(&str, BTreeSet<String>); 16] = [
        ("The dataplane", keys_accepted::<Config>(&with(""))),
        ("`[[queue]]`", keys_accepted::<Config>(&with("[[queue]]"))),
        (
            "`[[queue.peer]]`",
            keys_accepted::<Config>(&with("[[queue]]\n[[queue.peer]]")),
        ),
        (
            "`[queue.link]`",
            keys_accepted::<Config>(&with("[[queue]]\n[queue.link]")),
        ),
        (
            "`[queue.discovery]`",
            keys_accepted::<Config>(&with("[[queue]]\n[queue.discovery]")),
        ),
        (
            "`[queue.poll]`",
            keys_accepted::<Config>(&with("[[queue]]\n[queue.poll]")),
        ),
        (
            "`[queue.auth]`",
            keys_accepted::<Config>(&with("[[queue]]\n[queue.auth]")),
        ),
        (
            "`[queue.rc]`",
            keys_accepted::<Config>(&with("[[queue]]\n[queue.rc]")),
        ),
        ("`[[region]]`", keys_accepted::<Config>(&with("[[region]]"))),
        ("`[dpdk]`", keys_accepted::<Config>(&with("[dpdk]"))),
        ("`[host]`", keys_accepted::<Config>(&with("[host]"))),
        ("`[metrics]`", keys_accepted::<Config>(&with("[metrics]"))),
        (
            "`[topology]`",
            keys_accepted::<Deployment>(&with("[topology]")),
        ),
        ("`[demo]`", keys_accepted::<Deployment>(&with("[demo]"))),
        (
            "The dataplane",
            keys_accepted::<Deployment>(&with("[dataplane.a]")),
        ),
        (
            "`[queue.link]`",
            keys_accepted::<Deployment>(&with("[[dataplane.a.queue]]\n[dataplane.a.queue.link]")),
        ),
    ];
    for (heading, code) in cases {
        let documented = keys_documented(heading);
        let missing: Vec<_> = code.difference(&documented).collect();
        let stale: Vec<_> = documented.difference(&code).collect();
        assert!(
            missing.is_empty() && stale.is_empty(),
            "docs/CONFIG.md, '{heading}': keys of the code not documented {missing:?}, \
             documented keys the code lacks {stale:?}"
        );
    }
    // A deployment's own top level: its three tables, named in prose.
    let top = keys_accepted::<Deployment>(&with(""));
    let doc = include_str!("../../docs/CONFIG.md");
    for key in &top {
        assert!(
            doc.contains(&format!("`{key}`")),
            "deployment key {key} undocumented"
        );
    }
}

#[test]
fn link_defaults_are_the_cores() {
    let d = LinkSettings::default().to_link_config();
    let want = [
        ("slots", d.slots.to_string()),
        ("credits", d.receive_credits.to_string()),
        ("max_class", d.max_class.to_string()),
        (
            "unreachable_after_rounds",
            d.unreachable_after_rounds.to_string(),
        ),
        ("ordered", d.ordered.to_string()),
        ("echo_patience_rounds", d.echo_patience_rounds.to_string()),
        ("rtt_multiplier", d.rtt_multiplier.to_string()),
        ("min_round_ns", d.min_round.to_string()),
        ("initial_rtt_ns", d.initial_rtt.to_string()),
        ("hello_interval_ns", d.hello_interval.to_string()),
        ("max_attempts", d.max_attempts.to_string()),
        ("submit_queue", d.submit_queue.to_string()),
    ];
    let rows = rows("`[queue.link]`");
    assert_eq!(rows.len(), want.len());
    for (key, default) in want {
        let row = rows
            .iter()
            .find(|r| r[1] == format!("`{key}`"))
            .unwrap_or_else(|| panic!("{key} not in [queue.link]"));
        assert_eq!(row[3], default, "docs/CONFIG.md: default of link.{key}");
    }
}

#[test]
fn an_out_of_range_link_setting_is_refused_under_its_file_key() {
    let text = "name = \"x\"\nnode_id = 1\n[[queue]]\niface = \"lo\"\npeer_mac = \
                \"02:00:00:00:00:01\"\n[queue.link]\nslots = 4\ncredits = 5\n";
    let err = Config::from_toml(text).unwrap_err().to_string();
    assert!(err.contains("link.credits"), "{err}");
    let text = text.replace("slots = 4\ncredits = 5", "hello_interval_ns = 0");
    let err = Config::from_toml(&text).unwrap_err().to_string();
    assert!(err.contains("link.hello_interval_ns"), "{err}");
}

//! Test vectors: frame exchanges with one implementation under test, in the
//! plain format `vectors/README.md` documents, generated from this core.
//!
//! - `vectors_on_disk_are_the_cores`: the files under `vectors/` are what
//!   the generator writes today (`OAE_WRITE_VECTORS=1` rewrites them:
//!   `cargo xtask vectors`).
//! - `every_vector_replays`: each file, read as another implementation
//!   would read it, replays against a fresh node.

mod iut;
mod replay;
mod scenarios;
mod script;
mod text;

use std::path::PathBuf;

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../vectors")
}

fn on_disk() -> Vec<(String, String)> {
    let mut files: Vec<(String, String)> = std::fs::read_dir(dir())
        .expect("vectors/")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "vec"))
        .map(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read_to_string(&p).unwrap())
        })
        .collect();
    files.sort();
    files
}

#[test]
fn vectors_on_disk_are_the_cores() {
    let mut generated = scenarios::all();
    generated.sort();
    if std::env::var_os("OAE_WRITE_VECTORS").is_some() {
        for (name, _) in on_disk() {
            std::fs::remove_file(dir().join(name)).unwrap();
        }
        for (name, text) in &generated {
            std::fs::write(dir().join(name), text).unwrap();
        }
    }
    let disk = on_disk();
    let names = |v: &[(String, String)]| v.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>();
    assert_eq!(
        names(&disk),
        names(&generated),
        "vectors/ differs from the generator: run `cargo xtask vectors`"
    );
    for ((name, have), (_, want)) in disk.iter().zip(&generated) {
        assert!(
            have == want,
            "vectors/{name} is not what the core does now: run `cargo xtask vectors` and \
             review the difference"
        );
    }
}

#[test]
fn every_vector_replays() {
    let files = on_disk();
    assert!(files.len() >= 20, "{} vectors", files.len());
    for (name, text) in files {
        let steps = replay::replay(&name, &text);
        assert!(steps > 3, "{name}: {steps} steps");
    }
}

/// Every row of the receiver table in docs/PROTOCOL.md is exercised by
/// at least one vector (named on its `clause` line).
#[test]
fn every_row_of_the_receiver_table_has_a_vector() {
    let spec = include_str!("../../../docs/PROTOCOL.md");
    let rows: Vec<&str> = spec
        .lines()
        .filter_map(|l| l.strip_prefix("| R"))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|n| n.chars().all(|c| c.is_ascii_digit()))
        .collect();
    assert!(rows.len() >= 40, "{} rows in the table", rows.len());
    let clauses: Vec<String> = on_disk()
        .iter()
        .flat_map(|(_, text)| {
            text.lines()
                .find_map(|l| l.strip_prefix("clause "))
                .map(str::to_string)
        })
        .collect();
    for n in rows {
        let row = format!("R{n}");
        assert!(
            clauses
                .iter()
                .any(|c| c.split_whitespace().any(|w| w == row)),
            "no vector exercises {row} of the receiver table"
        );
    }
}

/// PROTOCOL.md's table of counters names every counter a link keeps, and
/// nothing else.
#[test]
fn the_counters_table_is_the_links_counters() {
    let spec = include_str!("../../../docs/PROTOCOL.md");
    let section = spec
        .split("## Counters\n")
        .nth(1)
        .and_then(|rest| rest.split("\n## ").next())
        .expect("a Counters section");
    let mut documented: Vec<&str> = section
        .lines()
        .filter_map(|l| l.strip_prefix("| `"))
        .flat_map(|l| l.split(" |").next())
        .flat_map(|names| names.split(", "))
        .map(|n| n.trim_matches('`'))
        .collect();
    documented.sort_unstable();
    let mut named: Vec<&str> = oae_proto::LinkStats::default()
        .named()
        .iter()
        .map(|(n, _)| *n)
        .collect();
    named.sort_unstable();
    assert_eq!(documented, named, "docs/PROTOCOL.md, Counters");
}

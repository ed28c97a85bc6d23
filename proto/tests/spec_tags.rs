//! Every row of docs/PROTOCOL.md's receiver table names the code that
//! implements it: a comment `// R17: …` (or `// R23, R24, R25: …`) just
//! above it in `proto/src`. A row without a tag, or a tag naming no row,
//! fails here, so the table and the code are read side by side.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The rows of the receiver table, as numbers.
fn rows() -> BTreeSet<u32> {
    let spec = include_str!("../../docs/PROTOCOL.md");
    let rows: BTreeSet<u32> = spec
        .lines()
        .filter_map(|l| l.strip_prefix("| R"))
        .filter_map(|l| l.split_whitespace().next()?.parse().ok())
        .collect();
    assert!(rows.len() >= 40, "{} rows in the table", rows.len());
    rows
}

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("proto/src is readable") {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Every tag in `proto/src`: (file:line, row).
fn tags() -> Vec<(String, u32)> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&src, &mut files);
    let mut tags = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).expect("a source file");
        for (i, line) in text.lines().enumerate() {
            let Some((names, _)) = line
                .trim_start()
                .strip_prefix("// R")
                .filter(|rest| rest.starts_with(|c: char| c.is_ascii_digit()))
                .and_then(|rest| rest.split_once(':'))
            else {
                continue;
            };
            let at = format!("{}:{}", file.display(), i + 1);
            for name in format!("R{names}").split(", ") {
                let row = name
                    .strip_prefix('R')
                    .and_then(|n| n.parse().ok())
                    .unwrap_or_else(|| panic!("{at}: '{name}' is not a row like R17"));
                tags.push((at.clone(), row));
            }
        }
    }
    tags
}

#[test]
fn every_row_of_the_receiver_table_is_tagged_in_the_code() {
    let tagged: BTreeSet<u32> = tags().into_iter().map(|(_, row)| row).collect();
    let untagged: Vec<String> = rows()
        .difference(&tagged)
        .map(|r| format!("R{r}"))
        .collect();
    assert!(
        untagged.is_empty(),
        "rows of PROTOCOL.md's receiver table with no `// R<n>: ...` tag in proto/src: {untagged:?}"
    );
}

#[test]
fn every_tag_names_a_row() {
    let rows = rows();
    let stray: Vec<String> = tags()
        .into_iter()
        .filter(|(_, row)| !rows.contains(row))
        .map(|(at, row)| format!("{at}: R{row}"))
        .collect();
    assert!(
        stray.is_empty(),
        "tags naming no row of the table: {stray:?}"
    );
}

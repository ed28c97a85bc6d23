//! docs/ARCHITECTURE.md's crate map names every crate of the repository:
//! a crate added without a line there fails here, so the map a newcomer
//! reads first stays whole.

use std::path::Path;

const ARCHITECTURE: &str = include_str!("../../docs/ARCHITECTURE.md");
const WORKSPACE: &str = include_str!("../../Cargo.toml");

/// The workspace's member and excluded directories, as its manifest lists
/// them.
fn crate_dirs() -> Vec<String> {
    let manifest: toml::Table = WORKSPACE
        .parse()
        .expect("the workspace's Cargo.toml parses");
    let workspace = manifest["workspace"].as_table().expect("[workspace]");
    ["members", "exclude"]
        .iter()
        .flat_map(|key| workspace[*key].as_array().expect("a list of directories"))
        .map(|dir| dir.as_str().expect("a directory").to_string())
        .collect()
}

/// A crate's package name, from its own manifest.
fn package_name(dir: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(dir)
        .join("Cargo.toml");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    let manifest: toml::Table = text.parse().expect("a crate's Cargo.toml parses");
    manifest["package"]["name"]
        .as_str()
        .expect("a package name")
        .to_string()
}

/// The crate map's entry for `dir`: from the line that starts with `dir/`
/// to the next line that starts another top-level entry.
fn entry(dir: &str) -> Option<String> {
    let map = ARCHITECTURE
        .split("```")
        .nth(1)
        .expect("ARCHITECTURE.md opens with the crate map in a code block");
    let mut lines = map
        .lines()
        .skip_while(|l| !l.starts_with(&format!("{dir}/")));
    let first = lines.next()?;
    let rest = lines.take_while(|l| l.starts_with(' '));
    Some(
        std::iter::once(first)
            .chain(rest)
            .collect::<Vec<_>>()
            .join("\n"),
    )
}

#[test]
fn the_crate_map_names_every_crate_of_the_repository() {
    let dirs = crate_dirs();
    assert!(dirs.len() >= 17, "the workspace lists {dirs:?}");
    let mut missing = Vec::new();
    for dir in &dirs {
        let name = package_name(dir);
        match entry(dir) {
            Some(text) if text.contains(&name) => {}
            Some(_) => missing.push(format!("{dir}/ does not name its package {name}")),
            None => missing.push(format!("{dir}/ ({name}) has no entry")),
        }
    }
    assert!(
        missing.is_empty(),
        "docs/ARCHITECTURE.md's crate map is missing crates; add a line for each:\n{}",
        missing.join("\n")
    );
}

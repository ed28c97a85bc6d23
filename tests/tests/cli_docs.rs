//! Shell completions and manual pages come from the binaries' own clap
//! definitions: bash completes oaectl's commands with the script oaectl
//! prints, and `man` renders the pages both binaries write.

use std::path::{Path, PathBuf};
use std::process::Command;

use oae_tests::dataplanes::binary;

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("oae-cli-docs-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// What bash's completion function offers after `words`, the last of which
/// is being completed.
fn bash_completes(script: &Path, function: &str, words: &str) -> String {
    let line = format!(
        "source {script}; COMP_WORDS=({words}); COMP_CWORD=$(( ${{#COMP_WORDS[@]}} - 1 )); \
         COMP_LINE=\"{words}\"; COMP_POINT=${{#COMP_LINE}}; {function} {first} \
         \"${{COMP_WORDS[COMP_CWORD]}}\" \"${{COMP_WORDS[COMP_CWORD-1]}}\"; \
         printf '%s\\n' \"${{COMPREPLY[@]}}\"",
        script = script.display(),
        first = words.split_whitespace().next().unwrap(),
    );
    let out = oae_tests::run(Command::new("bash").arg("-c").arg(line));
    assert!(out.success(), "{out}");
    out.stdout
}

#[test]
fn bash_completes_oaectl_commands_and_options_from_its_own_script() {
    let dir = scratch("bash");
    let out = oae_tests::run(Command::new(binary("oaectl")).args(["completions", "bash"]));
    assert!(out.success(), "{out}");
    let script = dir.join("oaectl.bash");
    std::fs::write(&script, &out.stdout).unwrap();
    let syntax = oae_tests::run(Command::new("bash").arg("-n").arg(&script));
    assert!(syntax.success(), "{syntax}");

    let commands = bash_completes(&script, "_oaectl", "oaectl host");
    assert!(
        commands.lines().any(|l| l == "host-verbs"),
        "`oaectl host<TAB>` offers: {commands:?}"
    );
    let options = bash_completes(&script, "_oaectl", "oaectl host-verbs --win");
    assert!(
        options.lines().any(|l| l == "--window"),
        "`oaectl host-verbs --win<TAB>` offers: {options:?}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn oaed_prints_completions_for_every_shell_and_still_wants_a_config() {
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let out = oae_tests::run(Command::new(binary("oaed")).args(["--completions", shell]));
        assert!(out.success(), "{out}");
        // Every shell's script names the binary and its --config option.
        assert!(out.stdout.contains("oaed"), "{shell}: {out}");
        assert!(out.stdout.contains("config"), "{shell}: {out}");
        assert!(!out.stdout.contains("oae-dataplane"), "{shell}: {out}");
    }
    let bad = oae_tests::run(Command::new(binary("oaed")).args(["--completions", "tcsh"]));
    assert!(!bad.success(), "{bad}");
    assert!(bad.stderr.contains("possible values"), "{bad}");
    let bare = oae_tests::run(&mut Command::new(binary("oaed")));
    assert!(!bare.success(), "{bare}");
    assert!(
        bare.stderr.contains("--config"),
        "names what is missing: {bare}"
    );
}

#[test]
fn man_renders_the_pages_oaectl_and_oaed_write() {
    let dir = scratch("man");
    let out = oae_tests::run(Command::new(binary("oaectl")).arg("man").arg(&dir));
    assert!(out.success(), "{out}");
    let listed: Vec<&str> = out.stdout.lines().collect();
    for page in [
        "oaectl.1",
        "oaectl-host-verbs.1",
        "oaectl-swap-ring.1",
        "oaectl-demo.1",
    ] {
        let path = dir.join(page);
        assert!(
            listed.contains(&path.to_str().unwrap()),
            "{page} not listed: {out}"
        );
    }
    assert!(
        !listed.iter().any(|p| p.contains("-help")),
        "no pages for the help pseudo-command: {out}"
    );
    let out = oae_tests::run(Command::new(binary("oaed")).arg("--man").arg(&dir));
    assert!(out.success(), "{out}");
    assert!(dir.join("oaed.1").exists(), "{out}");

    for (page, wanted) in [
        ("oaectl.1", "host-verbs"),
        ("oaectl-host-verbs.1", "--window"),
        ("oaed.1", "--config"),
    ] {
        let shown = oae_tests::run(
            Command::new("man")
                .args(["-P", "cat", "-l"])
                .arg(dir.join(page))
                .env("MANWIDTH", "100"),
        );
        assert!(shown.success(), "{shown}");
        // man renders hyphens as U+2010 on some locales; compare plain text.
        let text = shown.stdout.replace(['\u{2010}', '\u{2212}'], "-");
        assert!(text.contains(wanted), "{page} lacks {wanted}: {shown}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Every binary a user runs answers `--version` with the release and the
/// commit it was built from: one commit for all, this checkout's.
#[test]
fn every_binary_names_the_commit_it_was_built_from() {
    let head = oae_tests::run(
        Command::new("git")
            .args(["rev-parse", "--short=12", "HEAD"])
            .current_dir(env!("CARGO_MANIFEST_DIR")),
    );
    let mut commits = Vec::new();
    for name in [
        "oaed",
        "oaectl",
        "oae-conform",
        "oae-perf",
        "oae-linkbench",
        "oae-raw",
        "oae-sim",
    ] {
        let out = oae_tests::run(Command::new(binary(name)).arg("--version"));
        assert!(out.success(), "{out}");
        let commit = out
            .stdout
            .trim()
            .strip_prefix(&format!("{name} {} (commit ", env!("CARGO_PKG_VERSION")))
            .and_then(|rest| rest.strip_suffix(')'))
            .unwrap_or_else(|| panic!("not `{name} VERSION (commit C)`: {out}"))
            .to_string();
        if head.success() {
            assert_eq!(
                commit,
                head.stdout.trim(),
                "{name} is of another commit: {out}"
            );
        }
        commits.push(commit);
    }
    commits.dedup();
    assert_eq!(
        commits.len(),
        1,
        "binaries of different commits: {commits:?}"
    );
}

//! liboae from C: examples/c/verbs.c, built with the system C compiler
//! against the installed library through pkg-config (shared and static),
//! runs its verbs through a live dataplane's host ring to its peer.

use std::path::{Path, PathBuf};
use std::process::Command;

use oae_tests::dataplanes::{
    Dataplanes, LOCAL_REGION, Options, TARGET_KEY, TARGET_REGION, host_ring_path,
};
use oae_tests::{CommandOutput, run};

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Where `cargo xtask test` installs liboae before the tests run.
fn prefix() -> PathBuf {
    let prefix = workspace().join("target/oae-c");
    assert!(
        prefix.join("lib/pkgconfig/oae.pc").exists(),
        "liboae is not installed under {}: run `cargo xtask install-c --prefix target/oae-c \
         --debug` first (`cargo xtask test` does)",
        prefix.display()
    );
    prefix
}

fn pkg_config(package: &str, args: &[&str]) -> Vec<String> {
    let out = run(Command::new("pkg-config")
        .args(args)
        .arg(package)
        .env("PKG_CONFIG_PATH", prefix().join("lib/pkgconfig")));
    assert!(out.success(), "{out}");
    out.stdout.split_whitespace().map(String::from).collect()
}

fn compile(output: &Path, flags: &[String]) -> CommandOutput {
    let out = run(Command::new("cc")
        .args(["-std=c11", "-Wall", "-Wextra", "-Werror"])
        .arg(workspace().join("examples/c/verbs.c"))
        .args(flags)
        .arg("-o")
        .arg(output));
    assert!(out.success(), "the C example does not build: {out}");
    out
}

fn word(d: &Dataplanes, offset: usize) -> u64 {
    let m = d.region(1, TARGET_REGION);
    u64::from_le_bytes(m[offset..offset + 8].try_into().unwrap())
}

#[test]
fn the_c_example_links_with_pkg_config_and_runs_its_verbs_on_a_live_pair() {
    if !oae_tests::require_root(
        "the_c_example_links_with_pkg_config_and_runs_its_verbs_on_a_live_pair",
    ) {
        return;
    }
    let d = Dataplanes::start(
        "clib",
        &Options {
            host_ring_cost: Some("zero"),
            ..Options::default()
        },
    );
    let shared = d.dir.join("verbs-shared");
    compile(&shared, &pkg_config("oae", &["--cflags", "--libs"]));
    let statically = d.dir.join("verbs-static");
    compile(
        &statically,
        &pkg_config("oae-static", &["--cflags", "--libs"]),
    );
    // The shared one loads liboae by its SONAME, found through the run
    // path pkg-config gave; the static one needs no liboae at all.
    let needed = |program: &Path| run(Command::new("readelf").arg("-d").arg(program)).stdout;
    assert!(
        needed(&shared).contains("Shared library: [liboae.so.0]"),
        "{}",
        needed(&shared)
    );
    assert!(
        !needed(&statically).contains("liboae"),
        "{}",
        needed(&statically)
    );
    let library = needed(&prefix().join("lib/liboae.so"));
    assert!(
        library.contains("Library soname: [liboae.so.0]") && !library.contains("libelf"),
        "{library}"
    );

    let ring = host_ring_path(&d.pair);
    for (program, base) in [(&shared, 4096u32), (&statically, 8192)] {
        let out = run(Command::new("timeout")
            .arg("60")
            .arg(program)
            .arg(&ring)
            .arg(&d.sockets[0])
            .arg(TARGET_REGION.to_string())
            .arg(format!("{TARGET_KEY:#x}"))
            .arg(base.to_string())
            .arg(LOCAL_REGION.to_string())
            .env_remove("LD_LIBRARY_PATH"));
        assert!(out.success() && out.stdout.contains("PASSED"), "{out}");
        assert!(
            out.stdout
                .contains("refused by the target: wrong region key"),
            "{out}"
        );
        // The peer's memory holds what the C program did, exactly once.
        let base = base as usize;
        assert_eq!(word(&d, base), 7, "{out}");
        for w in 0..8 {
            assert_eq!(word(&d, base + 64 + 8 * w), 8, "word {w}: {out}");
        }
        let bytes = d.region(1, TARGET_REGION)[base + 32..base + 64].to_vec();
        assert_eq!(bytes, (0..32).map(|i| 0xa0 + i).collect::<Vec<u8>>());
        // And this side's memory holds what its READs landed.
        let local = d.region(0, LOCAL_REGION);
        assert_eq!(&local[base + 32..base + 64], &bytes[..], "{out}");
        assert_eq!(local[base..base + 8], 7u64.to_le_bytes(), "{out}");
    }
}

//! Build orchestration for oae. Two commands from a fresh machine:
//!
//! * `cargo xtask run`  — the main job: two network namespaces joined by a
//!   veth pair, a dataplane in each, a mixed verb workload with loss
//!   injected, and an exactly-once check (`oaectl demo`);
//! * `cargo xtask test` — every check: formatting, lints, unit, property,
//!   simulator-campaign, model-checking and real-link tests, the
//!   benchmarks in quick mode, and the aarch64 build (`cargo xtask cross`).
//!
//! Each first installs what it needs, idempotently.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::Instant;

mod install_c;

const USAGE: &str = "\
usage: cargo xtask <command>

  run     run the main job: OAE between two namespaces over AF_XDP, with loss
          injected and an exactly-once check (needs root); arguments go
          to `oaectl demo`, e.g. cargo xtask run --seconds 20 --loss-ppm 50000
  sim     the simulator campaign over every fault class
  test    run every test (what CI runs)
  soak    a long simulator campaign: cargo xtask soak [--seeds N] [--verbs N]
  bench   the benchmarks at full length: the core micro-benchmark, then the
          suite (line rate, latency, failure injection against raw AF_XDP,
          dpdk-testpmd, sockperf, the RC model and Redis over kernel TCP)
          into results/<time>/;
          arguments go to `oae-perf suite`, e.g. --reps 9 --secs 5
  fuzz    run the fuzz targets frame, auth, handshake, node, config, host_ring and control
          (installs cargo-fuzz), 10^7 executions each by default:
          cargo xtask fuzz [--runs N] [TARGET...]
  cross   build the dataplane for the IPU's ARM cores (aarch64), run the core's
          unit tests and the binaries under qemu-user-static (installs the
          cross toolchain, qemu and the arm64 libraries; test runs it too)
  setup   install what the project needs (done by the commands above): Debian
          packages, rustfmt, clippy, nightly's rust-src, bpf-linker
  install-cli-docs [--prefix DIR]
          install oaectl's and oaed's shell completions (bash, zsh, fish) and
          manual pages under DIR (default /usr/local)
  install-c [--prefix DIR] [--debug]
          build liboae and install liboae.so, liboae.a, oae.h and oae.pc
          (pkg-config) under DIR (default /usr/local)
  c-header [--check]
          regenerate liboae/include/oae.h from liboae's source (cbindgen);
          --check fails if the committed header differs (test runs it)
  vectors rewrite the test vectors under vectors/ from the core (review the
          difference before committing; test checks they are current)";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("run") => setup().and_then(|()| run_main_job(&args[1..])),
        Some("sim") => setup().and_then(|()| sim_table(&args[1..])),
        Some("test") => setup().and_then(|()| test()),
        Some("cross") => setup().and_then(|()| cross()),
        Some("soak") => setup().and_then(|()| soak(&args[1..])),
        Some("bench") => setup().and_then(|()| bench(&args[1..])),
        Some("fuzz") => setup().and_then(|()| fuzz(&args[1..])),
        Some("setup") => setup(),
        Some("install-cli-docs") => setup().and_then(|()| install_cli_docs(&args[1..])),
        // Only cargo and a C compiler: no toolchain setup.
        Some("install-c") => install_c::install_c(&args[1..]),
        Some("c-header") => setup().and_then(|()| c_header(&args[1..])),
        Some("vectors") => cargo(
            &[
                "test",
                "-p",
                "oae-proto",
                "--test",
                "vectors",
                "--test",
                "handshake_kat",
            ],
            &[("OAE_WRITE_VECTORS", "1")],
        ),
        Some("-h" | "--help") | None => {
            eprintln!("{USAGE}");
            return if args.is_empty() {
                ExitCode::from(2)
            } else {
                ExitCode::SUCCESS
            };
        }
        Some(other) => Err(format!("unknown command '{other}'\n{USAGE}")),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("xtask: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Debian packages the build and the tests need: the C toolchain and
/// libraries xsk-rs builds its vendored libxdp/libbpf with (its configure
/// step insists on libpcap's headers), iproute2 and
/// ping for the namespace tests, scapy and tshark as independent peers (and
/// scapy's python3 sends the raw frames of the XDP tests).
const APT_PACKAGES: &[&str] = &[
    "m4",
    "clang",
    "libclang-dev",
    "libelf-dev",
    "libpcap-dev",
    "zlib1g-dev",
    "make",
    "pkg-config",
    "iproute2",
    "iputils-ping",
    "python3-scapy",
    "tshark",
    // The benchmark suite's UDP reference.
    "sockperf",
    // The suite's TCP baseline: an atomic counter (INCR) in redis-server,
    // driven by redis-benchmark (redis-tools); ethtool turns veth's
    // transmit checksum offload off so corrupted segments fail the check.
    "redis-server",
    "redis-tools",
    "ethtool",
    // `man -l` renders the generated manual pages in the tests.
    "man-db",
    // oaed without root: setcap and getpcaps give and read its file
    // capabilities, systemd-analyze checks deploy/oaed@.service.
    "libcap2-bin",
    "systemd",
    // The metrics endpoint's tests: promtool's linter, the Python
    // reference client's OpenMetrics parser, Prometheus scraping, curl.
    "prometheus",
    "python3-prometheus-client",
    "curl",
    // DPDK 22.11: the EAL, its PMDs (net_memif, net_af_xdp, net_ring) and
    // the headers and pkg-config file dpdk-sys binds.
    "dpdk",
    "dpdk-dev",
    "libdpdk-dev",
    // libfabric 1.17: the headers the oae provider builds against, the
    // library that loads it, fi_info and fi_pingpong to check it.
    "libfabric-dev",
    "libfabric-bin",
];

/// Installs what every command needs, on a fresh Debian machine as root.
/// Idempotent and quick when everything is there: each step checks before
/// it installs, and prints one line.
fn setup() -> Result<(), String> {
    setup_apt_packages()?;
    run(
        "rustup",
        &["component", "add", "rustfmt", "clippy"],
        &[],
        "install the rustfmt and clippy components",
    )?;
    println!("setup: rustfmt and clippy: ok");
    setup_nightly()?;
    setup_bpf_linker()?;
    setup_cbindgen()
}

/// cbindgen writes liboae's header; Debian's is too old for edition 2024.
fn setup_cbindgen() -> Result<(), String> {
    if succeeds("cbindgen", &["--version"]) {
        println!("setup: cbindgen: ok");
        return Ok(());
    }
    cargo(
        &["install", "--locked", "--version", "^0.29", "cbindgen"],
        &[],
    )?;
    println!("setup: cbindgen: installed");
    Ok(())
}

/// The committed header, and how cbindgen makes it.
pub(crate) const C_HEADER: &str = "liboae/include/oae.h";

fn generated_header() -> Result<Vec<u8>, String> {
    let out = Command::new("cbindgen")
        .args([
            "--config",
            "liboae/cbindgen.toml",
            "--crate",
            "liboae",
            "liboae",
        ])
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| format!("cannot start cbindgen: {e}"))?;
    if !out.status.success() {
        return Err(format!("cbindgen failed ({})", out.status));
    }
    Ok(out.stdout)
}

fn c_header(extra: &[String]) -> Result<(), String> {
    let header = generated_header()?;
    match extra {
        [] => {
            std::fs::write(C_HEADER, &header).map_err(|e| format!("{C_HEADER}: {e}"))?;
            eprintln!("xtask: wrote {C_HEADER}");
            Ok(())
        }
        [check] if check == "--check" => {
            let committed = std::fs::read(C_HEADER).unwrap_or_default();
            if committed == header {
                eprintln!("xtask: {C_HEADER} is up to date");
                Ok(())
            } else {
                Err(format!(
                    "{C_HEADER} is not what liboae's source declares: run `cargo xtask c-header` \
                     and commit the result"
                ))
            }
        }
        _ => Err("usage: cargo xtask c-header [--check]".into()),
    }
}

fn setup_apt_packages() -> Result<(), String> {
    install_apt_packages("apt packages", APT_PACKAGES)
}

/// Installs those of `packages` that are missing. `name:arch` names
/// another architecture's package (Debian multiarch); dpkg is first told
/// to accept that architecture.
fn install_apt_packages(what: &str, packages: &[&str]) -> Result<(), String> {
    if !succeeds("dpkg-query", &["--version"]) {
        println!(
            "setup: {what}: not a Debian system; make sure these are installed: {}",
            packages.join(" ")
        );
        return Ok(());
    }
    // A name without `:arch` is the machine's own architecture's package
    // (or an architecture-independent one), even where dpkg also has
    // another architecture's package of that name.
    let native = output("dpkg", &["--print-architecture"]).unwrap_or_default();
    let installed = |pkg: &str| {
        let archs = match pkg.split_once(':') {
            Some((_, arch)) => vec![arch],
            None => vec![native.as_str(), "all"],
        };
        output("dpkg-query", &["-W", "-f=${Architecture} ${Status}\n", pkg]).is_some_and(|out| {
            out.lines().any(|line| {
                line.split_once(' ').is_some_and(|(arch, status)| {
                    archs.contains(&arch) && status == "install ok installed"
                })
            })
        })
    };
    let missing: Vec<&str> = packages
        .iter()
        .copied()
        .filter(|pkg| !installed(pkg))
        .collect();
    if missing.is_empty() {
        println!("setup: {what}: all installed");
        return Ok(());
    }
    let root = output("id", &["-u"]).as_deref() == Some("0");
    let mut foreign: Vec<&str> = missing
        .iter()
        .filter_map(|pkg| Some(pkg.split_once(':')?.1))
        .filter(|arch| {
            output("dpkg", &["--print-foreign-architectures"])
                .is_none_or(|known| !known.lines().any(|known| known == *arch))
        })
        .collect();
    foreign.sort_unstable();
    foreign.dedup();
    if !root {
        let add_arch: String = foreign
            .iter()
            .map(|arch| format!("sudo dpkg --add-architecture {arch} && "))
            .collect();
        return Err(format!(
            "missing packages: run `{add_arch}sudo apt-get update && sudo apt-get install {}` \
             (or run this as root)",
            missing.join(" ")
        ));
    }
    for arch in foreign {
        run(
            "dpkg",
            &["--add-architecture", arch],
            &[],
            &format!("let dpkg install {arch} packages"),
        )?;
    }
    // tshark asks whether non-root users may capture unless told not to.
    let quiet = [("DEBIAN_FRONTEND", "noninteractive")];
    run("apt-get", &["update"], &quiet, "apt-get update")?;
    let mut args = vec!["install", "-y", "--no-install-recommends"];
    args.extend(&missing);
    run("apt-get", &args, &quiet, "install the missing packages")?;
    println!("setup: {what}: installed {}", missing.join(" "));
    Ok(())
}

/// The XDP program is built with nightly (`-Z build-std=core` needs its
/// rust-src component).
fn setup_nightly() -> Result<(), String> {
    if !succeeds("rustup", &["run", "nightly", "rustc", "-vV"]) {
        return Err(
            "the nightly toolchain is missing (the XDP program needs it): run \
             `rustup toolchain install nightly --profile minimal`, then `cargo xtask setup` again"
                .into(),
        );
    }
    run(
        "rustup",
        &["component", "add", "rust-src", "--toolchain", "nightly"],
        &[],
        "install the nightly rust-src component",
    )?;
    println!("setup: nightly toolchain with rust-src: ok");
    Ok(())
}

/// bpf-linker links against nightly rustc's own libLLVM: Debian's LLVM is
/// usually older than the LLVM nightly emits bitcode for. Its build looks
/// for the library under `$LLVM_PREFIX/lib`, so that directory holds
/// symlinks into the nightly sysroot (and must stay: the linker loads the
/// library through them at run time).
fn setup_bpf_linker() -> Result<(), String> {
    if succeeds("bpf-linker", &["--version"]) {
        println!("setup: bpf-linker: ok");
        return Ok(());
    }
    let version = output("rustup", &["run", "nightly", "rustc", "-vV"])
        .ok_or("cannot run the nightly rustc")?;
    let major = version
        .lines()
        .find_map(|line| line.strip_prefix("LLVM version: "))
        .and_then(|v| v.split('.').next())
        .ok_or("`rustc +nightly -vV` reports no LLVM version")?
        .to_string();
    let sysroot = output("rustup", &["run", "nightly", "rustc", "--print", "sysroot"])
        .ok_or("cannot find the nightly sysroot")?;
    let home = std::env::var("HOME").map_err(|_| "HOME is not set")?;
    let prefix = Path::new(&home).join(".local/oae-llvm");
    link_rustc_llvm(&Path::new(&sysroot).join("lib"), &prefix.join("lib"))?;

    let prefix = prefix.to_string_lossy().into_owned();
    let feature = format!("llvm-{major}");
    run(
        "cargo",
        &[
            "install",
            "bpf-linker",
            "--locked",
            "--force",
            "--no-default-features",
            "--features",
            &feature,
        ],
        &[("LLVM_PREFIX", &prefix)],
        "install bpf-linker",
    )?;
    if !succeeds("bpf-linker", &["--version"]) {
        return Err("bpf-linker was installed but does not run: is ~/.cargo/bin on PATH?".into());
    }
    println!("setup: bpf-linker: installed against nightly's LLVM {major}");
    Ok(())
}

/// Points `lib_dir/<name>` at every libLLVM file in `sysroot_lib`, plus the
/// unversioned `libLLVM.so` the linker asks for, replacing stale links left
/// by an older nightly.
fn link_rustc_llvm(sysroot_lib: &Path, lib_dir: &Path) -> Result<(), String> {
    let entries = std::fs::read_dir(sysroot_lib)
        .map_err(|e| format!("reading {}: {e}", sysroot_lib.display()))?;
    let mut names: Vec<String> = entries
        .filter_map(|entry| entry.ok()?.file_name().into_string().ok())
        .filter(|name| name.starts_with("libLLVM") && name.contains(".so"))
        .collect();
    names.sort();
    let main = names
        .iter()
        .find(|name| name.starts_with("libLLVM.so."))
        .or_else(|| names.first())
        .ok_or_else(|| format!("no libLLVM in {}", sysroot_lib.display()))?
        .clone();
    std::fs::create_dir_all(lib_dir).map_err(|e| format!("creating {}: {e}", lib_dir.display()))?;
    let links = names
        .iter()
        .map(|name| (name.as_str(), name.as_str()))
        .chain([("libLLVM.so", main.as_str())]);
    for (link, target) in links {
        let link = lib_dir.join(link);
        if std::fs::symlink_metadata(&link).is_ok() {
            std::fs::remove_file(&link).map_err(|e| format!("removing {}: {e}", link.display()))?;
        }
        std::os::unix::fs::symlink(sysroot_lib.join(target), &link)
            .map_err(|e| format!("linking {}: {e}", link.display()))?;
    }
    Ok(())
}

/// True when `program args` runs and exits successfully (output hidden).
fn succeeds(program: &str, args: &[&str]) -> bool {
    Command::new(program)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// The trimmed standard output of `program args`, if it ran successfully.
fn output(program: &str, args: &[&str]) -> Option<String> {
    let out = Command::new(program)
        .args(args)
        .stderr(Stdio::null())
        .output()
        .ok()
        .filter(|out| out.status.success())?;
    Some(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// `oaed` and `oaectl`, release builds: what the main job runs and what
/// writes the completions and manual pages.
fn build_release_binaries() -> Result<(), String> {
    cargo(
        &[
            "build",
            "--release",
            "--quiet",
            "-p",
            "oae-dataplane",
            "-p",
            "oae-ctl",
            "--bins",
        ],
        &[],
    )
}

fn run_main_job(extra: &[String]) -> Result<(), String> {
    build_release_binaries()?;
    let mut args = vec!["demo"];
    args.extend(extra.iter().map(String::as_str));
    run(
        "target/release/oaectl",
        &args,
        &[],
        "the two-namespace demo",
    )
}

/// Completions and manual pages, generated by the release binaries from
/// their own argument definitions, where bash-completion, zsh, fish and man
/// look under `prefix`.
fn install_cli_docs(extra: &[String]) -> Result<(), String> {
    let prefix = match extra {
        [] => PathBuf::from("/usr/local"),
        [flag, dir] if flag == "--prefix" => PathBuf::from(dir),
        _ => return Err("usage: cargo xtask install-cli-docs [--prefix DIR]".into()),
    };
    build_release_binaries()?;
    let share = prefix.join("share");
    for (binary, completions) in [
        ("oaectl", vec!["completions"]),
        ("oaed", vec!["--completions"]),
    ] {
        let exe = format!("target/release/{binary}");
        for (shell, path) in [
            (
                "bash",
                share.join(format!("bash-completion/completions/{binary}")),
            ),
            ("zsh", share.join(format!("zsh/site-functions/_{binary}"))),
            (
                "fish",
                share.join(format!("fish/vendor_completions.d/{binary}.fish")),
            ),
        ] {
            let mut args = completions.clone();
            args.push(shell);
            let out = Command::new(&exe)
                .args(&args)
                .output()
                .map_err(|e| format!("cannot start {exe}: {e}"))?;
            if !out.status.success() {
                return Err(format!(
                    "{exe} {}: {}",
                    args.join(" "),
                    String::from_utf8_lossy(&out.stderr)
                ));
            }
            if let Some(dir) = path.parent() {
                std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
            }
            std::fs::write(&path, &out.stdout).map_err(|e| format!("{}: {e}", path.display()))?;
            eprintln!("xtask: {}", path.display());
        }
    }
    let man1 = share.join("man/man1");
    let man1 = man1.to_str().ok_or("the prefix is not UTF-8")?;
    run(
        "target/release/oaectl",
        &["man", man1],
        &[],
        "oaectl's manual pages",
    )?;
    run(
        "target/release/oaed",
        &["--man", man1],
        &[],
        "oaed's manual page",
    )?;
    eprintln!(
        "xtask: try `man oaectl` (`man -M {} oaectl` for another prefix)",
        share.join("man").display()
    );
    Ok(())
}

fn sim_table(extra: &[String]) -> Result<(), String> {
    let mut args = vec!["run", "--release", "-p", "oae-sim", "--", "table"];
    args.extend(extra.iter().map(String::as_str));
    cargo(&args, &[])
}

fn bench(extra: &[String]) -> Result<(), String> {
    cargo(
        &["bench", "-p", "oae-perf", "--bench", "cas_round_trip"],
        &[],
    )?;
    // The suite drives `oaectl demo`, which starts `oaed`: all three from
    // one build.
    cargo(
        &[
            "build",
            "--release",
            "--quiet",
            "-p",
            "oae-perf",
            "-p",
            "oae-ctl",
            "-p",
            "oae-dataplane",
            "--bins",
        ],
        &[],
    )?;
    // The libfabric experiment loads the provider from target/oae-c.
    install_c::install_c(&["--prefix".into(), "target/oae-c".into()])?;
    let mut args = vec!["suite"];
    args.extend(extra.iter().map(String::as_str));
    run("target/release/oae-perf", &args, &[], "the benchmark suite")
}

fn soak(extra: &[String]) -> Result<(), String> {
    let mut args = vec![
        "run",
        "--release",
        "-p",
        "oae-sim",
        "--",
        "soak",
        "--seeds",
        "1000",
    ];
    args.extend(extra.iter().map(String::as_str));
    cargo(&args, &[])
}

fn test() -> Result<(), String> {
    disk_report("before the build");
    cargo(&["fmt", "--all", "--check"], &[])?;
    cargo(
        &[
            "clippy",
            "--workspace",
            "--all-targets",
            "--",
            "-D",
            "warnings",
        ],
        &[],
    )?;
    cargo(
        &["bench", "-p", "oae-perf", "--bench", "cas_round_trip"],
        &[("OAE_BENCH_QUICK", "1")],
    )?;
    // The real-link tests start `oaed` and `oaectl` as processes: build
    // them with the tests' profile, into the directory the tests look in.
    cargo(
        &["build", "--profile", "test", "--workspace", "--bins"],
        &[],
    )?;
    // liboae as a C program meets it: the committed header, installed with
    // its pkg-config file where tests/tests/c_library.rs looks.
    c_header(&["--check".into()])?;
    install_c::install_c(&["--prefix".into(), "target/oae-c".into(), "--debug".into()])?;
    // OAE against raw AF_XDP in quick mode: checks that every part of the
    // comparison runs on real links; the figures mean nothing this short.
    run(
        "target/debug/oae-linkbench",
        &["--quick"],
        &[],
        "the link benchmark in quick mode",
    )?;
    // Every experiment of the suite, short: it must complete and write
    // well-formed results, whatever the figures.
    let quick = "target/perf-quick";
    let _ = std::fs::remove_dir_all(quick);
    run(
        "target/debug/oae-perf",
        &["suite", "--quick", "--out", quick],
        &[],
        "the benchmark suite in quick mode",
    )?;
    run(
        "target/debug/oae-perf",
        &["check", quick],
        &[],
        "check the quick suite's results",
    )?;
    disk_report("before the test binaries are built");
    let mut totals = [0u64; 3];
    // Every test binary runs even after one fails, so a run reports every
    // failure, not the first.
    let tests = cargo_test(
        &["test", "--workspace", "--all-targets", "--no-fail-fast"],
        &mut totals,
    );
    let docs = cargo_test(&["test", "--workspace", "--doc"], &mut totals);
    // The swap rings' and the shared memory's orderings, explored by loom:
    // its own cfg, so its own target directory.
    let loom = cargo_test_env(
        &[
            "test",
            "-p",
            "oae-swapring",
            "-p",
            "oae-proto",
            "--release",
            "--test",
            "loom",
        ],
        &[
            ("RUSTFLAGS", "--cfg loom"),
            ("CARGO_TARGET_DIR", "target/loom"),
        ],
        &mut totals,
    );
    let [passed, failed, ignored] = totals;
    println!("tests: {passed} passed, {failed} failed, {ignored} skipped");
    disk_report("after the tests");
    tests.and(docs).and(loom)?;
    cross()?;
    disk_report("at the end");
    Ok(())
}

/// What a whole `cargo xtask test` from a fresh clone needs in `target/`
/// (measured: 6.2 GB at its peak, the aarch64 build included), with room
/// to spare: below this, say so before a link fails with ENOSPC.
const TEST_DISK_NEED_GB: u64 = 8;

/// Prints how much `target/` holds and how much its filesystem has free, so
/// a run that fills the disk shows where; warns when too little is left.
fn disk_report(stage: &str) {
    let kib = |program: &str, args: &[&str], column: usize| -> Option<u64> {
        let out = Command::new(program).args(args).output().ok()?;
        let text = String::from_utf8_lossy(&out.stdout);
        text.lines()
            .last()?
            .split_whitespace()
            .nth(column)?
            .parse()
            .ok()
    };
    let _ = std::fs::create_dir_all("target");
    let used = kib("du", &["-sk", "target"], 0);
    let free = kib("df", &["-Pk", "target"], 3);
    let gb = |k: Option<u64>| k.map_or("?".to_string(), |k| format!("{:.1}", k as f64 / 1048576.0));
    println!(
        "disk {stage}: target/ holds {} GB, {} GB free",
        gb(used),
        gb(free)
    );
    if let (Some(used), Some(free)) = (used, free)
        && (used + free) / 1048576 < TEST_DISK_NEED_GB
    {
        println!(
            "disk: warning: a full test run needs about {TEST_DISK_NEED_GB} GB in target/; \
             free space or point CARGO_TARGET_DIR elsewhere"
        );
    }
}

/// The IPU's ARM cores.
const CROSS_TARGET: &str = "aarch64-unknown-linux-gnu";

/// Crates built for the ARM cores by `cargo xtask cross` (and so by
/// `cargo xtask test`). Crates that will run on the IPU belong here; a
/// crate with a binary is then also worth a smoke run in `cross_smoke`.
const CROSS_BUILD: &[&str] = &[
    "oae-common",
    "oae-proto",
    "oae-sim",
    "oae-pmd",
    "oae-swapring",
    "oae-dataplane",
    "oae-ctl",
];

/// Crates whose unit tests run for the ARM cores, under qemu-user-static
/// (the runner in .cargo/config.toml). Emulation is slow: unit tests only.
const CROSS_TEST: &[&str] = &["oae-common", "oae-proto", "oae-swapring"];

/// Longest an emulated test binary or smoke check may run before it is
/// killed: a hang under emulation must fail CI, not stall it.
const QEMU_LIMIT_S: &str = "300";

/// What the aarch64 build needs on Debian: the cross compiler and C
/// library, qemu to run the results, and the arm64 builds of the libraries
/// the vendored libbpf and libxdp link (multiarch; libc6-dev:arm64 also
/// gives the /usr/include/aarch64-linux-gnu headers libxdp's build uses,
/// and the arm64 glibc the binaries run with under qemu).
const CROSS_APT_PACKAGES: &[&str] = &[
    "gcc-aarch64-linux-gnu",
    "binutils-aarch64-linux-gnu",
    "libc6-dev-arm64-cross",
    "qemu-user-static",
    "libc6-dev:arm64",
    "libelf-dev:arm64",
    "zlib1g-dev:arm64",
];

/// Settings of the C builds inside the aarch64 build: libbpf-sys and
/// libxdp-sys compile with the `cc` crate, which takes the compiler and
/// archiver per target; libxdp-sys wraps its XDP programs into objects with
/// plain `$LD -r -b binary` and `$OBJCOPY`, which must produce and read
/// aarch64 objects; pkg-config must answer for arm64, not the host.
const CROSS_ENV: &[(&str, &str)] = &[
    ("CC_aarch64_unknown_linux_gnu", "aarch64-linux-gnu-gcc"),
    ("AR_aarch64_unknown_linux_gnu", "aarch64-linux-gnu-ar"),
    ("LD", "aarch64-linux-gnu-ld"),
    ("OBJCOPY", "aarch64-linux-gnu-objcopy"),
    ("PKG_CONFIG_ALLOW_CROSS", "1"),
    (
        "PKG_CONFIG_LIBDIR",
        "/usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig",
    ),
];

/// How the aarch64 binaries run here: the runner in .cargo/config.toml,
/// which says why it takes no `-L`.
const QEMU: &str = "qemu-aarch64-static";

/// Installs the cross toolchain, the arm64 libraries and the Rust target.
fn setup_cross() -> Result<(), String> {
    install_apt_packages("aarch64 packages", CROSS_APT_PACKAGES)?;
    let installed = output("rustup", &["target", "list", "--installed"]).unwrap_or_default();
    if installed.lines().any(|t| t == CROSS_TARGET) {
        println!("setup: Rust target {CROSS_TARGET}: ok");
        return Ok(());
    }
    run(
        "rustup",
        &["target", "add", CROSS_TARGET],
        &[],
        &format!("install the Rust target {CROSS_TARGET}"),
    )?;
    println!("setup: Rust target {CROSS_TARGET}: installed");
    Ok(())
}

/// Builds the dataplane for the IPU's ARM cores, runs the core's unit
/// tests and a smoke check of the binaries under emulation. The test
/// profile throughout (optimised, with debug assertions): the unit tests
/// need it, and the binaries then share its build of every dependency.
/// DPDK stays out (no arm64 DPDK here): the binaries refuse DPDK queues.
fn cross() -> Result<(), String> {
    let start = Instant::now();
    setup_cross()?;
    let step = |what: &str| println!("cross: {what} ({:.0?} so far)", start.elapsed());

    step(&format!(
        "building {} for {CROSS_TARGET}",
        CROSS_BUILD.join(", ")
    ));
    let mut args = vec![
        "build",
        "--target",
        CROSS_TARGET,
        "--profile",
        "test",
        "--no-default-features",
    ];
    for krate in CROSS_BUILD {
        args.extend(["-p", krate]);
    }
    cargo(&args, CROSS_ENV)?;

    step(&format!(
        "unit tests of {} under qemu",
        CROSS_TEST.join(", ")
    ));
    let mut args = vec!["test", "--target", CROSS_TARGET, "--lib"];
    for krate in CROSS_TEST {
        args.extend(["-p", krate]);
    }
    let mut totals = [0u64; 3];
    let runner = format!("timeout --signal=KILL {QEMU_LIMIT_S} {QEMU}");
    let mut env = CROSS_ENV.to_vec();
    env.push(("CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER", &runner));
    cargo_test_env(&args, &env, &mut totals)?;
    let [passed, failed, ignored] = totals;
    println!("cross: unit tests under qemu: {passed} passed, {failed} failed, {ignored} skipped");

    step("smoke check of oaed and oaectl under qemu");
    cross_smoke()?;
    println!("cross: done in {:.0?}", start.elapsed());
    Ok(())
}

/// Runs the aarch64 `oaed` and `oaectl` under qemu: their help, the IPU
/// configuration's check, and the refusal of a DPDK configuration by a
/// build without DPDK.
fn cross_smoke() -> Result<(), String> {
    // Paths below are relative to the workspace's root.
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .ok_or("xtask/ lives inside the workspace")?;
    let target_dir = std::env::var("CARGO_TARGET_DIR").unwrap_or_else(|_| "target".into());
    let bin = |name: &str| format!("{target_dir}/{CROSS_TARGET}/debug/{name}");
    let emulate = |args: &[&str]| -> Result<(bool, String), String> {
        let out = Command::new("timeout")
            .args(["--signal=KILL", QEMU_LIMIT_S, QEMU])
            .args(args)
            .current_dir(root)
            .output()
            .map_err(|e| format!("cannot start {QEMU}: {e}"))?;
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        Ok((out.status.success(), text))
    };
    let oaed = bin("oaed");
    let oaectl = bin("oaectl");
    let checks: [(&[&str], bool, &str); 4] = [
        (&[&oaed, "--help"], true, "--config"),
        (&[&oaectl, "--help"], true, "Usage"),
        (
            &[&oaed, "--check", "--config", "configs/ipu.toml"],
            true,
            "configuration is valid",
        ),
        (
            &[
                &oaed,
                "--check",
                "--config",
                "configs/dpdk-memif.toml",
                "--name",
                "a",
            ],
            false,
            "built without DPDK",
        ),
    ];
    for (args, should_succeed, expected) in checks {
        let shown = args[1..].join(" ");
        let (ok, text) = emulate(args)?;
        if ok != should_succeed || !text.contains(expected) {
            return Err(format!(
                "aarch64 `{} {shown}` under qemu: expected {} mentioning '{expected}', got \
                 (exit {}):\n{text}",
                args[0].rsplit('/').next().unwrap_or(args[0]),
                if should_succeed {
                    "success"
                } else {
                    "a refusal"
                },
                if ok { "success" } else { "failure" },
            ));
        }
        println!(
            "cross: {} {shown}: {}",
            args[0].rsplit('/').next().unwrap_or(args[0]),
            if ok { "ok" } else { "refused, as it should be" }
        );
    }
    Ok(())
}

/// The fuzz targets (fuzz/fuzz_targets), each run for a number of
/// executions from its corpus under fuzz/corpus/<target>, which is kept
/// (minimised) in the repository.
const FUZZ_TARGETS: [&str; 7] = [
    "frame",
    "auth",
    "handshake",
    "node",
    "config",
    "host_ring",
    "control",
];

fn fuzz(extra: &[String]) -> Result<(), String> {
    let usage = "usage: cargo xtask fuzz [--runs N] [TARGET...] (default: 10000000 runs of \
                 each of frame, auth, handshake, node, config, host_ring, control)";
    let mut runs = 10_000_000u64;
    let mut targets = Vec::new();
    let mut args = extra.iter();
    while let Some(a) = args.next() {
        match a.as_str() {
            "--runs" => {
                let n = args.next().ok_or(usage)?;
                runs = n
                    .parse()
                    .map_err(|_| format!("--runs takes a number of executions, got '{n}'"))?;
            }
            t if FUZZ_TARGETS.contains(&t) => targets.push(t),
            other => return Err(format!("unknown fuzz argument '{other}'\n{usage}")),
        }
    }
    if targets.is_empty() {
        targets = FUZZ_TARGETS.to_vec();
    }
    if !Command::new("cargo")
        .args(["+nightly", "fuzz", "--version"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
    {
        run(
            "cargo",
            &["install", "cargo-fuzz", "--locked"],
            &[],
            "install cargo-fuzz",
        )?;
    }
    for target in targets {
        let corpus = format!("fuzz/corpus/{target}");
        std::fs::create_dir_all(&corpus).map_err(|e| format!("{corpus}: {e}"))?;
        let started = Instant::now();
        run(
            "cargo",
            &[
                "+nightly",
                "fuzz",
                "run",
                target,
                "--",
                &format!("-runs={runs}"),
                "-print_final_stats=1",
            ],
            &[],
            &format!("fuzz target {target}"),
        )
        .map_err(|e| format!("{e} (run from the fuzz/ directory's parent)"))?;
        let secs = started.elapsed().as_secs_f64();
        // Keep the corpus small enough to commit: only inputs that add
        // coverage.
        run(
            "cargo",
            &["+nightly", "fuzz", "cmin", target],
            &[],
            &format!("minimise the {target} corpus"),
        )?;
        println!(
            "fuzz: {target}: {runs} executions, no failure, in {secs:.0} s with the build ({:.0}/s); corpus {corpus}",
            runs as f64 / secs
        );
    }
    Ok(())
}

fn cargo(args: &[&str], env: &[(&str, &str)]) -> Result<(), String> {
    run("cargo", args, env, &format!("cargo {}", args.join(" ")))
}

fn run(program: &str, args: &[&str], env: &[(&str, &str)], what: &str) -> Result<(), String> {
    eprintln!("xtask: {program} {}", args.join(" "));
    let status = Command::new(program)
        .args(args)
        .envs(ci_env())
        .envs(env.iter().copied())
        .status()
        .map_err(|e| format!("{what}: cannot start {program}: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("{what} failed ({status})"))
    }
}

/// On CI (a fresh clone, built once and thrown away) incremental
/// compilation only costs disk.
fn ci_env() -> Vec<(&'static str, &'static str)> {
    if std::env::var_os("CI").is_some() {
        vec![("CARGO_INCREMENTAL", "0")]
    } else {
        Vec::new()
    }
}

/// Runs `cargo test`, passing its output through, and adds every test
/// binary's passed, failed and ignored counts to `totals`.
fn cargo_test(args: &[&str], totals: &mut [u64; 3]) -> Result<(), String> {
    cargo_test_env(args, &[], totals)
}

/// [`cargo_test`] with extra environment variables.
fn cargo_test_env(
    args: &[&str],
    env: &[(&str, &str)],
    totals: &mut [u64; 3],
) -> Result<(), String> {
    eprintln!("xtask: cargo {}", args.join(" "));
    let mut child = Command::new("cargo")
        .args(args)
        .envs(ci_env())
        .envs(env.iter().copied())
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start cargo: {e}"))?;
    let stdout = child.stdout.take().expect("piped");
    for line in BufReader::new(stdout).lines() {
        let line = line.map_err(|e| format!("reading cargo test output: {e}"))?;
        println!("{line}");
        if let Some(rest) = line.strip_prefix("test result: ") {
            for part in rest.split(['.', ';']) {
                let mut words = part.split_whitespace();
                if let (Some(n), Some(kind)) = (words.next(), words.next())
                    && let Ok(n) = n.parse::<u64>()
                {
                    match kind {
                        "passed" => totals[0] += n,
                        "failed" => totals[1] += n,
                        "ignored" => totals[2] += n,
                        _ => {}
                    }
                }
            }
        }
    }
    let status = child
        .wait()
        .map_err(|e| format!("waiting for cargo: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("cargo {} failed ({status})", args.join(" ")))
    }
}

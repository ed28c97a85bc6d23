//! Builds the XDP program (`ebpf/`, crate `oae-ebpf`) for the BPF target
//! with the nightly toolchain, and hands its path to `src/xdp.rs`, which
//! embeds the object.
//!
//! The eBPF crate needs `-Z build-std=core` (nightly, with the `rust-src`
//! component) and `bpf-linker`; `cargo xtask setup` installs all three.

use std::env;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

const SETUP_HINT: &str = "run `cargo xtask setup` to install it";

fn main() {
    let manifest_dir = PathBuf::from(env_var("CARGO_MANIFEST_DIR"));
    let root = manifest_dir
        .parent()
        .expect("pmd/ lives inside the workspace");
    let ebpf_dir = root.join("ebpf");
    for watched in [
        "ebpf/src",
        "ebpf/Cargo.toml",
        "ebpf/Cargo.lock",
        "common/src",
    ] {
        println!("cargo:rerun-if-changed={}", root.join(watched).display());
    }

    check_toolchain();

    let target = match env_var("CARGO_CFG_TARGET_ENDIAN").to_str() {
        Some("big") => "bpfeb-unknown-none",
        _ => "bpfel-unknown-none",
    };
    let out_dir = PathBuf::from(env_var("OUT_DIR"));
    // A target directory of its own: the outer cargo holds the lock on the
    // workspace's, and waiting for it from here would deadlock.
    let target_dir = out_dir.join("ebpf-target");

    let mut cmd = nightly("cargo");
    cmd.current_dir(&ebpf_dir)
        .args([
            "build",
            "--release",
            "-Z",
            "build-std=core",
            "--target",
            target,
        ])
        .arg("--target-dir")
        .arg(&target_dir)
        // aya-ebpf picks register layouts by the architecture the program
        // will run on, which is the one pmd is built for.
        .env("CARGO_ENCODED_RUSTFLAGS", rustflags())
        .stdout(Stdio::null());
    let status = cmd
        .status()
        .unwrap_or_else(|e| panic!("cannot run `rustup run nightly cargo`: {e}; {SETUP_HINT}"));
    if !status.success() {
        panic!(
            "building the XDP program in {} failed ({status}); the compiler's messages are \
             above. If a tool is missing, run `cargo xtask setup`",
            ebpf_dir.display()
        );
    }

    let object = target_dir.join(target).join("release").join("oae-ebpf");
    if !object.is_file() {
        panic!(
            "the XDP program build reported success but left no {}",
            object.display()
        );
    }
    println!("cargo:rustc-env=OAE_EBPF_OBJECT={}", object.display());
}

/// Fails with a message naming the missing piece before the nested build
/// fails with a less obvious one.
fn check_toolchain() {
    let sysroot = nightly("rustc")
        .args(["--print", "sysroot"])
        .output()
        .ok()
        .filter(|out| out.status.success())
        .map(|out| PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()))
        .unwrap_or_else(|| {
            panic!("the nightly Rust toolchain is needed to build the XDP program; {SETUP_HINT}")
        });
    let core_src = Path::new("lib/rustlib/src/rust/library/core");
    if !sysroot.join(core_src).is_dir() {
        panic!(
            "the rust-src component of the nightly toolchain is needed to build the XDP \
             program; {SETUP_HINT}"
        );
    }
    let linker = Command::new("bpf-linker")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    if !linker.is_ok_and(|s| s.success()) {
        panic!("bpf-linker is needed to build the XDP program (not found on PATH); {SETUP_HINT}");
    }
}

/// `rustup run nightly <program>`, whatever toolchain the outer build uses,
/// with none of the outer build's settings.
fn nightly(program: &str) -> Command {
    let mut cmd = Command::new("rustup");
    cmd.args(["run", "nightly", program]);
    clear_inherited_env(&mut cmd);
    cmd
}

/// Flags in cargo's 0x1f-separated encoding: the target architecture for
/// aya-ebpf, and BTF so the kernel can check the map value types.
fn rustflags() -> OsString {
    let arch = env_var("CARGO_CFG_TARGET_ARCH");
    let mut flags = OsString::from("--cfg=bpf_target_arch=\"");
    flags.push(arch);
    flags.push("\"\x1f-Cdebuginfo=2\x1f-Clink-arg=--btf");
    flags
}

/// Removes what the outer cargo (or clippy) set for this build script and
/// would otherwise steer the nested build: its compiler and wrappers, its
/// flags, its target and target directory, and the per-package variables
/// that build scripts of the nested crates must not see.
fn clear_inherited_env(cmd: &mut Command) {
    for key in [
        "RUSTC",
        "RUSTC_WRAPPER",
        "RUSTC_WORKSPACE_WRAPPER",
        "RUSTDOC",
        "RUSTFLAGS",
        "RUSTDOCFLAGS",
        "RUSTC_LINKER",
        "RUSTUP_TOOLCHAIN",
        "CARGO",
        "CARGO_TARGET_DIR",
        "CARGO_ENCODED_RUSTFLAGS",
        "CARGO_ENCODED_RUSTDOCFLAGS",
        "CARGO_PRIMARY_PACKAGE",
        "TARGET",
        "HOST",
        "OUT_DIR",
        "PROFILE",
        "OPT_LEVEL",
        "DEBUG",
        "NUM_JOBS",
    ] {
        cmd.env_remove(key);
    }
    for (key, _) in env::vars_os() {
        let Some(key) = key.to_str() else { continue };
        if [
            "CARGO_BUILD_",
            "CARGO_CFG_",
            "CARGO_FEATURE_",
            "CARGO_PKG_",
            "CARGO_MANIFEST_",
        ]
        .iter()
        .any(|prefix| key.starts_with(prefix))
        {
            cmd.env_remove(key);
        }
    }
}

fn env_var(key: &str) -> OsString {
    env::var_os(key).unwrap_or_else(|| panic!("cargo did not set {key} for the build script"))
}

//! `cargo xtask install-c`: liboae installed as a C library is: a shared
//! library with its SONAME and versioned names, stripped; a static
//! archive; the header; `oae.pc` for linking the shared library and
//! `oae-static.pc` for the archive; and, where libfabric's headers are,
//! the libfabric provider built on it.

use std::path::{Path, PathBuf};

use crate::{C_HEADER, cargo, run};

/// What liboae.a needs besides itself: rustc's `--print
/// native-static-libs` for this target. The static link in
/// tests/tests/c_library.rs fails if it falls short.
const STATIC_DEPS: &str = "-lgcc_s -lutil -lrt -lpthread -lm -ldl -lc";

const FI_PROVIDER_SOURCE: &str = "liboae/fi/oae_fi.c";

const USAGE: &str = "usage: cargo xtask install-c [--prefix DIR] [--debug]";

/// Builds liboae and installs it under `--prefix` (default /usr/local).
pub fn install_c(extra: &[String]) -> Result<(), String> {
    let mut prefix = PathBuf::from("/usr/local");
    let mut debug = false;
    let mut args = extra.iter();
    while let Some(a) = args.next() {
        match a.as_str() {
            "--prefix" => prefix = PathBuf::from(args.next().ok_or("--prefix needs a DIR")?),
            "--debug" => debug = true,
            _ => return Err(USAGE.into()),
        }
    }
    let prefix = std::path::absolute(&prefix).map_err(|e| format!("{}: {e}", prefix.display()))?;
    let (profile, built) = if debug {
        ("test", "target/debug")
    } else {
        ("release", "target/release")
    };
    cargo(
        &["build", "--quiet", "--profile", profile, "-p", "liboae"],
        &[],
    )?;
    let lib = prefix.join("lib");
    let include = prefix.join("include");
    let pkgconfig = lib.join("pkgconfig");
    for d in [&lib, &include, &pkgconfig] {
        std::fs::create_dir_all(d).map_err(|e| format!("{}: {e}", d.display()))?;
    }
    let version = env!("CARGO_PKG_VERSION");
    let major = env!("CARGO_PKG_VERSION_MAJOR");
    let real = lib.join(format!("liboae.so.{version}"));
    install(Path::new(built).join("liboae.so"), &real)?;
    strip(&real, "--strip-unneeded")?;
    link(
        &format!("liboae.so.{version}"),
        &lib.join(format!("liboae.so.{major}")),
    )?;
    link(&format!("liboae.so.{major}"), &lib.join("liboae.so"))?;
    let archive = lib.join("liboae.a");
    install(Path::new(built).join("liboae.a"), &archive)?;
    strip(&archive, "--strip-debug")?;
    install(PathBuf::from(C_HEADER), &include.join("oae.h"))?;
    write_pc(&pkgconfig, &prefix)?;
    if Path::new("/usr/include/rdma/fabric.h").exists() {
        build_fi_provider(&lib)?;
    } else {
        eprintln!(
            "xtask: libfabric's headers are not installed (libfabric-dev): the libfabric \
             provider is not built"
        );
    }
    eprintln!(
        "xtask: build against it with `PKG_CONFIG_PATH={} cc prog.c $(pkg-config --cflags \
         --libs oae)` (or oae-static for the archive)",
        pkgconfig.display()
    );
    Ok(())
}

fn install(from: PathBuf, to: &Path) -> Result<(), String> {
    // A new file, not one written through: a running program may have the
    // old one mapped.
    let _ = std::fs::remove_file(to);
    std::fs::copy(&from, to).map_err(|e| format!("{} -> {}: {e}", from.display(), to.display()))?;
    eprintln!("xtask: {}", to.display());
    Ok(())
}

fn strip(file: &Path, how: &str) -> Result<(), String> {
    let path = file.display().to_string();
    run("strip", &[how, &path], &[], &format!("strip {path}"))
}

fn link(target: &str, at: &Path) -> Result<(), String> {
    let _ = std::fs::remove_file(at);
    std::os::unix::fs::symlink(target, at)
        .map_err(|e| format!("{} -> {target}: {e}", at.display()))?;
    eprintln!("xtask: {} -> {target}", at.display());
    Ok(())
}

/// `oae.pc` links the shared library (with a run path, so programs find
/// it without `LD_LIBRARY_PATH`); `oae-static.pc` the archive and what it
/// needs.
fn write_pc(pkgconfig: &Path, prefix: &Path) -> Result<(), String> {
    let head = format!(
        "prefix={}\nlibdir=${{prefix}}/lib\nincludedir=${{prefix}}/include\n\n\
         Description: Open Atomic Ethernet verbs on a running oaed's host ring\n\
         Version: {}\n\
         Cflags: -I${{includedir}}\n",
        prefix.display(),
        env!("CARGO_PKG_VERSION"),
    );
    // The loader searches /usr/lib; any other prefix (even /usr/local,
    // until ldconfig runs) needs the run path.
    let rpath = if prefix == Path::new("/usr") {
        ""
    } else {
        " -Wl,-rpath,${libdir}"
    };
    for (name, text) in [
        (
            "oae.pc",
            format!("{head}Name: oae\nLibs: -L${{libdir}} -loae{rpath}\n"),
        ),
        (
            "oae-static.pc",
            format!("{head}Name: oae-static\nLibs: ${{libdir}}/liboae.a {STATIC_DEPS}\n"),
        ),
    ] {
        let pc = pkgconfig.join(name);
        std::fs::write(&pc, text).map_err(|e| format!("{}: {e}", pc.display()))?;
        eprintln!("xtask: {}", pc.display());
    }
    Ok(())
}

/// Builds the libfabric provider on the liboae just installed in `lib`:
/// `lib/libfabric/liboae-fi.so`, which libfabric loads from a directory
/// named in `FI_PROVIDER_PATH`.
fn build_fi_provider(lib: &Path) -> Result<(), String> {
    let dir = lib.join("libfabric");
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let out = dir.join("liboae-fi.so");
    let lib_text = lib.display().to_string();
    let rpath = format!("-Wl,-rpath,{lib_text}");
    let out_text = out.display().to_string();
    run(
        "cc",
        &[
            "-std=gnu11",
            "-shared",
            "-fPIC",
            "-O2",
            "-Wall",
            "-Wextra",
            "-Werror",
            "-I",
            "liboae/include",
            FI_PROVIDER_SOURCE,
            "-L",
            &lib_text,
            "-loae",
            &rpath,
            "-o",
            &out_text,
        ],
        &[],
        "build the libfabric provider (needs libfabric-dev)",
    )?;
    eprintln!("xtask: {out_text}");
    Ok(())
}

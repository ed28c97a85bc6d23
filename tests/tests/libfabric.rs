//! The libfabric provider, checked by programs no one here wrote: libfabric
//! 1.17's `fi_info` lists it, its `fi_pingpong` runs over it in both
//! directions with its data check, and a C program written against
//! `rdma/fabric.h` alone sends messages, tagged messages, RMA and atomics to
//! the peer, whose memory then holds the program's ledger. The programs
//! run outside the namespaces, as host programs: they reach each dataplane
//! through its host ring, and need no NIC.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use oae_os::child::Supervised;
use oae_tests::dataplanes::{Dataplanes, Options, TARGET_KEY, TARGET_REGION, host_ring_path_of};
use oae_tests::{CommandOutput, poll_until, run};

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Where `cargo xtask test` installs liboae and the provider.
fn prefix() -> PathBuf {
    let prefix = workspace().join("target/oae-c");
    assert!(
        prefix.join("lib/libfabric/liboae-fi.so").exists(),
        "the provider is not installed under {}: run `cargo xtask install-c --prefix \
         target/oae-c --debug` first (`cargo xtask test` does)",
        prefix.display()
    );
    prefix
}

/// A command that loads the oae provider, on dataplane `i`'s host ring.
fn on_dataplane(program: &str, d: &Dataplanes, i: usize) -> Command {
    let mut cmd = Command::new(program);
    cmd.env("FI_PROVIDER_PATH", prefix().join("lib/libfabric"))
        .env("FI_OAE_RING", host_ring_path_of(&d.pair, i))
        .env("FI_OAE_CONTROL", &d.sockets[i]);
    cmd
}

/// A TCP port for fi_pingpong's out-of-band exchange, this test's own.
fn control_port() -> u16 {
    40000 + (std::process::id() % 20000) as u16
}

/// Runs a background command to its end, bounded, and returns what it said.
fn finish(mut child: Supervised, out: &Path, err: &Path, limit: Duration) -> (bool, String) {
    let status = child.wait_for(limit);
    let said = format!(
        "{} ({status:?})\nstdout:\n{}\nstderr:\n{}",
        child.name(),
        std::fs::read_to_string(out).unwrap_or_default(),
        std::fs::read_to_string(err).unwrap_or_default()
    );
    (status.is_some_and(|s| s.success()), said)
}

fn start_pair(tag: &str) -> Dataplanes {
    Dataplanes::start(
        tag,
        &Options {
            host_ring_cost: Some("zero"),
            host_rings_on_both: true,
            poll: Some("idle = \"sleep\""),
            ..Options::default()
        },
    )
}

/// fi_pingpong's server on dataplane `server`, its client on the other;
/// returns the client's output.
fn pingpong(d: &Dataplanes, server: usize) -> CommandOutput {
    let port = control_port().to_string();
    let args = ["-p", "oae", "-e", "rdm", "-c", "-I", "200"];
    let (out, err) = (d.dir.join("pp-server.out"), d.dir.join("pp-server.err"));
    let mut cmd = on_dataplane("fi_pingpong", d, server);
    cmd.args(args)
        .args(["-B", &port])
        .stdout(std::fs::File::create(&out).unwrap())
        .stderr(std::fs::File::create(&err).unwrap())
        .stdin(Stdio::null());
    let srv = Supervised::spawn(&mut cmd, "fi_pingpong server", Duration::from_secs(5)).unwrap();
    let port_number = control_port();
    poll_until(
        Duration::from_secs(60),
        "fi_pingpong's server to listen",
        || oae_os::tcp::listening(port_number),
        || std::fs::read_to_string(&err).unwrap_or_default(),
    );
    let client = run(on_dataplane("timeout", d, 1 - server)
        .arg("120")
        .arg("fi_pingpong")
        .args(args)
        .args(["-P", &port, "127.0.0.1"]));
    let (server_ok, server_said) = finish(srv, &out, &err, Duration::from_secs(60));
    assert!(
        client.success() && server_ok,
        "fi_pingpong over oae, server on dataplane {server}:\nclient: {client}\nserver: \
         {server_said}\nlogs:\n{}\n{}",
        d.log(0),
        d.log(1)
    );
    client
}

#[test]
fn libfabric_tools_and_a_program_of_its_own_run_over_the_oae_provider() {
    if !oae_tests::require_root(
        "libfabric_tools_and_a_program_of_its_own_run_over_the_oae_provider",
    ) {
        return;
    }
    let d = start_pair("fi");

    // fi_info lists the provider, its endpoint type and capabilities.
    let info = run(on_dataplane("fi_info", &d, 0).args(["-p", "oae", "-v"]));
    assert!(info.success(), "{info}");
    for want in [
        "prov_name: oae",
        "FI_EP_RDM",
        "FI_MSG",
        "FI_TAGGED",
        "FI_RMA",
        "FI_ATOMIC",
    ] {
        assert!(
            info.stdout.contains(want),
            "fi_info does not say {want}: {info}"
        );
    }
    // Without a dataplane named, the provider offers nothing, and says so.
    let none = run(Command::new("fi_info")
        .args(["-p", "oae"])
        .env("FI_PROVIDER_PATH", prefix().join("lib/libfabric"))
        .env("FI_LOG_LEVEL", "info"));
    assert!(
        !none.success() && none.stderr.contains("FI_OAE_RING"),
        "{none}"
    );

    // fi_pingpong, both ways, with its data check; every message accounted.
    for server in [0, 1] {
        let client = pingpong(&d, server);
        let rows: Vec<&str> = client
            .stdout
            .lines()
            .filter(|l| l.starts_with("64 ") || l.starts_with("256 "))
            .collect();
        assert_eq!(rows.len(), 2, "a row for 64 and 256 bytes: {client}");
        assert!(rows.iter().all(|r| r.contains("=200")), "{client}");
    }

    // A program against rdma/fabric.h alone.
    let program = d.dir.join("fabric");
    let built = run(Command::new("cc")
        .args(["-std=c11", "-Wall", "-Wextra", "-Werror"])
        .arg(workspace().join("examples/c/fabric.c"))
        .arg("-lfabric")
        .arg("-o")
        .arg(&program));
    assert!(built.success(), "{built}");
    let (out, err) = (
        d.dir.join("fabric-server.out"),
        d.dir.join("fabric-server.err"),
    );
    let mut cmd = on_dataplane(program.to_str().unwrap(), &d, 1);
    cmd.args(["server", "1", "16"])
        .stdout(std::fs::File::create(&out).unwrap())
        .stderr(std::fs::File::create(&err).unwrap());
    let server = Supervised::spawn(&mut cmd, "fabric server", Duration::from_secs(5)).unwrap();
    poll_until(
        Duration::from_secs(60),
        "the fabric server's receives",
        || std::fs::read_to_string(&out).is_ok_and(|o| o.contains("ready")),
        || std::fs::read_to_string(&err).unwrap_or_default(),
    );
    let base = 2048u64;
    let rkey = (u64::from(TARGET_REGION) << 32) | u64::from(TARGET_KEY);
    let client = run(on_dataplane("timeout", &d, 0)
        .arg("120")
        .arg(&program)
        .args([
            "client",
            "2",
            &format!("{rkey:#x}"),
            &base.to_string(),
            "16",
        ]));
    let (server_ok, server_said) = finish(server, &out, &err, Duration::from_secs(60));
    assert!(
        client.success() && client.stdout.contains("PASSED") && server_ok,
        "client: {client}\nserver: {server_said}"
    );
    assert!(
        client
            .stdout
            .contains("a write under a wrong key: Key was rejected by service, provider code 3"),
        "{client}"
    );
    // The peer's memory holds the client's ledger, exactly.
    let memory = d.region(1, TARGET_REGION);
    let base = base as usize;
    assert_eq!(memory[base..base + 8], 11u64.to_le_bytes(), "{client}");
    let written: Vec<u8> = (0..32).map(|i| 0xa0 + i).collect();
    assert_eq!(&memory[base + 32..base + 64], &written[..], "{client}");
    let big: Vec<u8> = (0..900u32).map(|i| (i * 7) as u8).collect();
    assert_eq!(&memory[base + 128..base + 1028], &big[..], "{client}");
    assert!(
        memory[base + 8..base + 32].iter().all(|&b| b == 0)
            && memory[base + 64..base + 128].iter().all(|&b| b == 0),
        "bytes the client never named changed: {client}"
    );
}

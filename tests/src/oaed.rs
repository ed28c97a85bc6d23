//! One `oaed` process of a test: where its binary is, starting it until it
//! answers, shutting it down by its PID, the regions every test dataplane
//! registers, and the turn that keeps two sets of polling dataplanes from
//! sharing this machine's two vCPUs.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use oae_client::control::Client;
use oae_os::child::Supervised;

/// The region every test dataplane offers its peer, and its key.
pub const TARGET_REGION: u16 = 1;
pub const TARGET_KEY: u32 = 0x0ae1;
/// The region a test dataplane's own verbs read into and write from.
pub const LOCAL_REGION: u16 = 2;

/// Path of a workspace binary built beside the test executable
/// (`target/<profile>/<name>`).
pub fn binary(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("test executable path");
    // target/<profile>/deps/<test> → target/<profile>/<name>
    let dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("target directory");
    let path = dir.join(name);
    assert!(
        path.exists(),
        "{} is missing: build the binaries first (cargo build --workspace --bins), \
         as `cargo xtask test` does",
        path.display()
    );
    path
}

/// The tests' shortest round and silent rounds: tests of one binary run two
/// at a time, so four busy-polling dataplanes share this machine's two
/// vCPUs, and a peer descheduled for a time slice (or waiting for a CPU
/// the other one's busy loop holds) must not look dead. Tests of how fast
/// a dead peer is noticed set their own.
pub use oae_config::deployment::{SHARED_CPU_MIN_ROUND_NS, SHARED_CPU_UNREACHABLE_ROUNDS};

/// Held by every `Dataplanes` and `fabric::Fabric` for its life:
/// the tests of one binary run in parallel, and two sets of busy-polling
/// dataplanes on this machine's two vCPUs starve each other long enough to
/// look dead (a peer silent for 8 rounds is declared unreachable). One set
/// at a time.
pub(crate) static ONE_SET_AT_A_TIME: Mutex<()> = Mutex::new(());

/// The turn of a test that starts busy-polling dataplanes of its own,
/// outside `Dataplanes` and `fabric::Fabric`: hold it while they
/// run (see [`ONE_SET_AT_A_TIME`]).
pub fn polling_turn() -> MutexGuard<'static, ()> {
    // A test that failed while holding the turn poisons the lock; the turn
    // is still free.
    ONE_SET_AT_A_TIME
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
}

/// Starts `oaed` as `cmd` says and waits (bounded) until it answers on
/// `socket`; panics with its log (`log`) if it exits or stays silent.
/// Dropping the result ends it by its PID.
pub fn start_oaed(cmd: Command, socket: &Path, log: &Path) -> Supervised {
    let mut oaed = spawn_oaed(cmd);
    await_oaed(&mut oaed, socket, log);
    oaed
}

/// Starts `oaed` as `cmd` says, without waiting for it to answer.
pub fn spawn_oaed(mut cmd: Command) -> Supervised {
    // A shutdown request is answered within the drain (2 s).
    Supervised::spawn(&mut cmd, "oaed", Duration::from_secs(5)).expect("start oaed")
}

/// Waits until `oaed` answers on `socket`; panics with its log if it exits
/// or does not answer within 10 s.
pub fn await_oaed(oaed: &mut Supervised, socket: &Path, log: &Path) {
    let deadline = Instant::now() + Duration::from_secs(10);
    let log_text = || std::fs::read_to_string(log).unwrap_or_default();
    while Client::new(socket, Duration::from_secs(1))
        .status()
        .is_err()
    {
        if let Some(status) = oaed.exited() {
            panic!(
                "oaed ({}) exited with {status}:\n{}",
                socket.display(),
                log_text()
            );
        }
        if Instant::now() > deadline {
            oaed.kill9();
            panic!("oaed ({}) did not start:\n{}", socket.display(), log_text());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Asks `oaed` on `socket` to shut down and waits for it, killing it by its
/// PID if it does not exit in its grace period; true if it exited by itself.
pub fn shut_down(oaed: &mut Supervised, socket: &Path) -> bool {
    let _ = Client::new(socket, Duration::from_secs(2)).shutdown();
    matches!(oaed.stop(true), Some((_, false)))
}

/// The tests' two regions, as `[[<prefix>region]]` tables: the peers'
/// target (every permission) and the local block bilateral swaps trade.
pub(crate) fn regions_toml(prefix: &str) -> String {
    format!(
        r#"
[[{prefix}region]]
id = {TARGET_REGION}
key = {TARGET_KEY}
len = 65536
perms = "rwa"

[[{prefix}region]]
id = {LOCAL_REGION}
key = 2
len = 65536
perms = "rw"
"#
    )
}

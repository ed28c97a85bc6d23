//! Arbitrary bytes on a control connection, served as `oaed` serves them:
//! the request reader with the protocol's line limit, the JSON parser, the
//! dispatcher and the answers (`daemon::serve_connection_without_queues`,
//! a dataplane with a registered region and no queue, so region dumps read
//! real memory and requests for a polling core are answered that there is
//! none). The oracle: nothing panics or hangs, every line `oaed` writes
//! back is one `Response` (an answer, an error, or a closing line that
//! names its limit), and it answers no more lines than the input has. The
//! line limit is cut to 512 bytes so inputs of the fuzzer's size reach it.

#![no_main]

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::time::Duration;

use libfuzzer_sys::fuzz_target;
use oae_dataplane::control::Response;
use oae_dataplane::daemon::serve_connection_without_queues;
use oae_proto::memory::{Permissions, RegionSpec};
use oae_proto::{SharedMemory, Store};

fn memory() -> SharedMemory {
    let mut memory = SharedMemory::new();
    memory
        .register(RegionSpec {
            id: 1,
            key: 0xae1,
            len: 4096,
            permissions: Permissions::ALL,
        })
        .expect("a small region");
    memory
}

/// A closing server makes the input's last writes fail: as an error, not
/// a SIGPIPE that would end the fuzzer (no Rust runtime start-up set it
/// ignored under libFuzzer's main).
fn ignore_sigpipe() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // SAFETY: installs the SIG_IGN disposition, no handler code runs;
        // done once, before this process writes to any socket.
        unsafe {
            libc::signal(libc::SIGPIPE, libc::SIG_IGN);
        }
    });
}

fuzz_target!(|data: &[u8]| {
    ignore_sigpipe();
    let (client, server) = UnixStream::pair().expect("a socket pair");
    // The answers are read as they come, so a large one never blocks the
    // server; the input is written whole, then the client's side closes.
    let reader = {
        let client = client.try_clone().expect("clone");
        std::thread::spawn(move || {
            let mut lines = 0usize;
            for line in BufReader::new(client).lines() {
                let Ok(line) = line else { break };
                if let Err(e) = serde_json::from_str::<Response>(&line) {
                    panic!("oaed answered a line that is no Response ({e}): {line}");
                }
                lines += 1;
            }
            lines
        })
    };
    let server = std::thread::spawn(move || {
        serve_connection_without_queues(server, memory(), Duration::from_millis(200), 512)
    });
    let _ = (&client).write_all(data);
    let _ = client.shutdown(std::net::Shutdown::Write);
    server.join().expect("the connection ended");
    let _ = client.shutdown(std::net::Shutdown::Both);
    let answered = reader.join().expect("answers read");
    let requests = data.split(|&b| b == b'\n').count();
    assert!(answered <= requests, "{answered} answers to {requests} lines");
});

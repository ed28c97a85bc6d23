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
use std::sync::{Mutex, OnceLock, mpsc};
use std::time::Duration;

use libfuzzer_sys::fuzz_target;
use oae_client::control::Response;
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

/// The one thread that serves the connections, one input at a time: a
/// thread made per input would cost more than the input, and the address
/// sanitizer keeps something of every thread it has seen.
fn server() -> &'static Mutex<(mpsc::Sender<UnixStream>, mpsc::Receiver<()>)> {
    static SERVER: OnceLock<Mutex<(mpsc::Sender<UnixStream>, mpsc::Receiver<()>)>> =
        OnceLock::new();
    SERVER.get_or_init(|| {
        let (connections, incoming) = mpsc::channel::<UnixStream>();
        let (served, done) = mpsc::channel();
        std::thread::spawn(move || {
            for stream in incoming {
                serve_connection_without_queues(stream, memory(), Duration::from_millis(200), 512);
                let _ = served.send(());
            }
        });
        Mutex::new((connections, done))
    })
}

fuzz_target!(|data: &[u8]| {
    ignore_sigpipe();
    let (client, server_end) = UnixStream::pair().expect("a socket pair");
    let server = server().lock().expect("the server thread lives");
    server.0.send(server_end).expect("the server thread lives");
    // The input is written whole (libFuzzer's inputs fit in the socket's
    // buffer, so this does not wait for the server), then the client's side
    // closes; the answers are read here as they come, so a large one never
    // blocks the server.
    let _ = (&client).write_all(data);
    let _ = client.shutdown(std::net::Shutdown::Write);
    let mut answered = 0usize;
    for line in BufReader::new(&client).lines() {
        let Ok(line) = line else { break };
        if let Err(e) = serde_json::from_str::<Response<serde_json::Value>>(&line) {
            panic!("oaed answered a line that is no Response ({e}): {line}");
        }
        answered += 1;
    }
    server.1.recv().expect("the connection ended");
    let requests = data.split(|&b| b == b'\n').count();
    assert!(
        answered <= requests,
        "{answered} answers to {requests} lines"
    );
});

//! The control socket of a running `oaed`, as a client that misbehaves
//! sees it: at most `MAX_CONTROL_CONNECTIONS` served at once, request lines
//! of at most `MAX_REQUEST_LINE_BYTES`, at most `MAX_WORKLOAD_PHASES` per
//! workload, dumps of at most `MAX_DUMP_BYTES` (larger regions in
//! windows), each refusal naming its limit; the socket private from the
//! start; a file at its path left alone. Needs root.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use oae_client::control::{
    CloseReason, ErrorCode, MAX_CONTROL_CONNECTIONS, MAX_DUMP_BYTES, MAX_REQUEST_LINE_BYTES,
    MAX_WORKLOAD_PHASES, RegionDump, Request, Response, WorkloadSpec,
};
use oae_os::child::Supervised;
use oae_tests::dataplanes::{Dataplanes, LOCAL_REGION, Options, TARGET_KEY, TARGET_REGION, binary};
use oae_tests::run;

/// A connection of its own to `socket`, as a raw client.
fn connect(socket: &Path) -> UnixStream {
    let stream = UnixStream::connect(socket).expect("connect to the control socket");
    // Only so that a daemon that never answers fails the test instead of
    // hanging it.
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .expect("read timeout");
    stream
}

fn read_answer(stream: &UnixStream) -> Response<RegionDump> {
    let mut line = String::new();
    BufReader::new(stream)
        .read_line(&mut line)
        .expect("an answer line");
    serde_json::from_str(&line).unwrap_or_else(|e| panic!("not a response ({e}): {line:?}"))
}

fn ask(stream: &UnixStream, request: &Request) -> Response<RegionDump> {
    let mut line = serde_json::to_string(request).expect("request as JSON");
    line.push('\n');
    (&*stream)
        .write_all(line.as_bytes())
        .expect("send the request");
    read_answer(stream)
}

/// A request the control thread answers itself, without a polling core.
fn small_dump() -> Request {
    Request::RegionDumpRange {
        id: TARGET_REGION,
        queue: 0,
        offset: 0,
        len: Some(8),
    }
}

#[test]
fn a_running_dataplane_bounds_what_control_clients_hold() {
    if !oae_tests::require_root("a_running_dataplane_bounds_what_control_clients_hold") {
        return;
    }
    let d = Dataplanes::start("ctlsock", &Options::default());
    let socket = &d.sockets[0];
    let mode = std::fs::metadata(socket)
        .expect("socket")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600, "{}", socket.display());

    // Every connection held is one being served: connections of the
    // harness that just closed may still count for a moment.
    let mut held = Vec::new();
    while held.len() < MAX_CONTROL_CONNECTIONS {
        let stream = connect(socket);
        match ask(&stream, &small_dump()) {
            Response::Ok(_) => held.push(stream),
            Response::Closed(c) if matches!(c.reason, CloseReason::TooManyConnections { .. }) => {
                std::thread::sleep(Duration::from_millis(20));
            }
            other => panic!("{other:?}\n{}", d.log(0)),
        }
    }
    let one_more = connect(socket);
    match read_answer(&one_more) {
        Response::Closed(c) => {
            assert_eq!(
                c.reason,
                CloseReason::TooManyConnections {
                    limit: MAX_CONTROL_CONNECTIONS
                }
            );
            assert!(
                c.message.contains(&MAX_CONTROL_CONNECTIONS.to_string()),
                "{c:?}"
            );
        }
        other => panic!("connection {} was served: {other:?}", held.len() + 1),
    }
    drop(held);
    d.wait_for(
        Duration::from_secs(10),
        "a control connection to be served again",
        |d| d.client(0).status().is_ok(),
    );

    // A line one byte too long: refused before the newline comes.
    let long = connect(socket);
    (&long)
        .write_all(&vec![b' '; MAX_REQUEST_LINE_BYTES + 1])
        .expect("send a long line");
    match read_answer(&long) {
        Response::Closed(c) => assert_eq!(
            c.reason,
            CloseReason::RequestTooLong {
                limit_bytes: MAX_REQUEST_LINE_BYTES
            }
        ),
        other => panic!("a long line was read: {other:?}"),
    }

    // Phases of a running workload.
    d.client(0)
        .workload_start(WorkloadSpec {
            region: TARGET_REGION,
            key: TARGET_KEY,
            local_region: LOCAL_REGION,
            lanes: 2,
            seconds: 600.0,
            seed: 1,
            ..Default::default()
        })
        .expect("workload start");
    let phase = |n: usize| {
        d.client(0)
            .workload_phase(0, 0, None, &format!("phase {n}"))
    };
    for n in 0..MAX_WORKLOAD_PHASES {
        phase(n).unwrap_or_else(|e| panic!("phase {n}: {e:?}"));
    }
    let err = phase(MAX_WORKLOAD_PHASES).expect_err("one phase too many");
    assert!(
        err.code == ErrorCode::BadRequest
            && err.message.contains("MAX_WORKLOAD_PHASES")
            && err.message.contains(&MAX_WORKLOAD_PHASES.to_string()),
        "{err:?}"
    );

    // A region twice the largest dump, through oaectl.
    let ctl = |args: &[&str]| {
        run(Command::new(binary("oaectl"))
            .arg("--socket")
            .arg(socket)
            .args(args))
    };
    let region = (2 * MAX_DUMP_BYTES).to_string();
    let out = ctl(&["region", "add", "--id", "9", "--key", "1", "--len", &region]);
    assert!(out.success(), "{out}");
    let out = ctl(&["region", "dump", "--id", "9"]);
    assert!(
        !out.success()
            && out.stderr.contains(&MAX_DUMP_BYTES.to_string())
            && out.stderr.contains("--offset"),
        "{out}"
    );
    let half = MAX_DUMP_BYTES.to_string();
    let out = ctl(&[
        "region", "dump", "--id", "9", "--offset", &half, "--len", &half, "--json",
    ]);
    assert!(out.success(), "{out}");
    let dump: RegionDump = serde_json::from_str(&out.stdout)
        .unwrap_or_else(|e| panic!("not a region dump ({e}): {out}"));
    assert_eq!(
        (dump.offset, dump.region_len, dump.data.len()),
        (
            MAX_DUMP_BYTES,
            2 * MAX_DUMP_BYTES,
            2 * MAX_DUMP_BYTES as usize
        )
    );
    // For people, a hex dump: the offset, the bytes, the bytes as text.
    let out = ctl(&[
        "region", "dump", "--id", "1", "--offset", "8", "--len", "20",
    ]);
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert!(
        out.success()
            && lines.len() == 2
            && lines[0].starts_with("00000008  00 00 00 00 00 00 00 00  00 ")
            && lines[0].ends_with("|................|")
            && lines[1].starts_with("00000018  00 00 00 00 ")
            && lines[1].ends_with("|....|"),
        "{out}"
    );

    // Still serving, its link still up.
    assert!(d.link(0).state.up, "{}", d.log(0));
}

#[test]
fn oaed_leaves_a_file_at_its_socket_path_alone() {
    if !oae_tests::require_root("oaed_leaves_a_file_at_its_socket_path_alone") {
        return;
    }
    let d = Dataplanes::start_alone("ctlfile", &Options::default());
    let path = d.dir.join("not-a-socket");
    std::fs::write(&path, "precious").expect("write the file");
    let (out_log, err_log) = (d.dir.join("b.stdout"), d.dir.join("b.stderr"));
    let mut cmd = d
        .pair
        .command(1, binary("oaed").to_str().expect("utf-8 path"));
    cmd.arg("--config")
        .arg(&d.config)
        .args(["--name", "b"])
        .arg("--socket")
        .arg(&path)
        .arg("--state-dir")
        .arg(d.dir.join("b.state"))
        .stdout(std::fs::File::create(&out_log).expect("stdout file"))
        .stderr(std::fs::File::create(&err_log).expect("stderr file"));
    let command = format!("{cmd:?}");
    let mut oaed = Supervised::spawn(&mut cmd, "oaed", Duration::from_secs(5)).expect("start oaed");
    // It refuses before it starts anything; one that took the path would
    // run on, and is ended by its PID.
    let status = oaed.wait_for(Duration::from_secs(60)).or_else(|| {
        oaed.kill9();
        None
    });
    let stdout = std::fs::read_to_string(&out_log).unwrap_or_default();
    let stderr = std::fs::read_to_string(&err_log).unwrap_or_default();
    let said =
        format!("{command} exited with {status:?}\n--- stdout:\n{stdout}\n--- stderr:\n{stderr}");
    assert!(status.is_some_and(|s| !s.success()), "{said}");
    assert!(
        stderr.contains(&path.display().to_string())
            && stderr.contains("not a socket")
            && stderr.contains("--socket"),
        "{said}"
    );
    assert_eq!(
        std::fs::read_to_string(&path).expect("the file is still there"),
        "precious"
    );
}

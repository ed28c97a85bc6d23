//! `oaectl capture`: asks a running dataplane's polling core for the next
//! frames it receives and sends, and writes them as pcapng (one interface
//! per port, nanosecond timestamps from the core's clock, each packet
//! marked inbound or outbound) for Wireshark and tools/wireshark/oae.lua.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use oae_client::control::{
    CaptureReport, Client, MAX_CAPTURE_FRAMES, MAX_CAPTURE_SECONDS, from_hex,
};
use oae_pmd::capture::{PcapFrame, Pcapng};

use crate::failure::Failure;

#[derive(clap::Args)]
pub struct CaptureArgs {
    /// Frames to record (received and sent together).
    #[arg(long, short, default_value_t = 100)]
    count: u32,
    /// Give up waiting for them after this many seconds, keeping what came.
    #[arg(long, default_value_t = 10.0)]
    seconds: f64,
    /// The queue whose ports to record.
    #[arg(long, default_value_t = 0)]
    queue: u16,
    /// The pcapng file to write.
    #[arg(short = 'w', long = "write")]
    file: PathBuf,
}

pub fn run(args: &CaptureArgs, socket: &Path, json: bool) -> Result<(), Failure> {
    if args.count == 0 || args.count > MAX_CAPTURE_FRAMES {
        return Err(Failure::usage(format!(
            "--count: use 1 to {MAX_CAPTURE_FRAMES} frames"
        )));
    }
    if !(args.seconds > 0.0 && args.seconds <= MAX_CAPTURE_SECONDS) {
        return Err(Failure::usage(format!(
            "--seconds: use more than 0 and at most {MAX_CAPTURE_SECONDS}"
        )));
    }
    let report = Client::new(
        socket,
        Duration::from_secs_f64(args.seconds) + Duration::from_secs(10),
    )
    .capture(args.queue, args.count, args.seconds)?;
    write_pcapng(&report, &args.file)
        .map_err(|e| format!("writing {}: {e}", args.file.display()))?;
    let sent = report.frames.iter().filter(|f| f.outbound).count();
    if json {
        let summary = CaptureSummary {
            file: args.file.display().to_string(),
            queue: report.queue,
            ports: report.ports.clone(),
            received: report.frames.len() - sent,
            sent,
            complete: report.complete,
        };
        return Ok(crate::out::json(&summary)?);
    }
    outln!(
        "{}: {} frames from queue {} ({} received, {} sent){}",
        args.file.display(),
        report.frames.len(),
        report.queue,
        report.frames.len() - sent,
        sent,
        if report.complete {
            String::new()
        } else {
            format!(
                " in {} s, fewer than the {} asked",
                args.seconds, args.count
            )
        }
    );
    Ok(())
}

/// `oaectl capture --json`: what was written where.
#[derive(serde::Serialize)]
struct CaptureSummary {
    file: String,
    queue: u16,
    ports: Vec<String>,
    received: usize,
    sent: usize,
    /// Whether `--count` frames were recorded (else the time ran out).
    complete: bool,
}

fn write_pcapng(report: &CaptureReport, path: &Path) -> Result<(), String> {
    let file = File::create(path).map_err(|e| e.to_string())?;
    let mut out = Pcapng::new(BufWriter::new(file))?;
    for port in &report.ports {
        out.interface(port)?;
    }
    for frame in &report.frames {
        let data = from_hex(&frame.hex)?;
        out.frame(&PcapFrame {
            interface: u32::from(frame.port),
            t_ns: frame.t_ns,
            outbound: frame.outbound,
            original_len: frame.original_len,
            data: &data,
        })?;
    }
    out.into_inner().flush().map_err(|e| e.to_string())
}

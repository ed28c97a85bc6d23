//! A capture in progress on a polling core: the next frames its ports
//! receive and send, copied into a buffer the control thread allocated and
//! touched before handing it over, so recording neither allocates nor
//! faults a page per frame. The core hands the buffer back as it is; the
//! control thread turns it into a report. With no capture the ports pass
//! `None` and pay one branch per frame.

use std::sync::mpsc::SyncSender;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use oae_common::MAX_OAE_FRAME_ON_WIRE;
use oae_proto::Nanos;

use oae_client::control::{CaptureReport, CapturedFrame, to_hex};

/// The longest frame a port carries, Ethernet header included.
const FRAME_ROOM: usize = MAX_OAE_FRAME_ON_WIRE as usize;

struct Seen {
    at: usize,
    len: usize,
    original_len: usize,
    t: Nanos,
    port: u8,
    outbound: bool,
}

/// Room for `count` frames, made (and its pages touched) off the core.
pub struct CaptureBuffer {
    bytes: Vec<u8>,
    used: usize,
    seen: Vec<Seen>,
    wanted: usize,
}

impl CaptureBuffer {
    pub fn new(count: u32) -> CaptureBuffer {
        let wanted = count as usize;
        CaptureBuffer {
            // Written, not just reserved: the pages fault here, not on the
            // polling core.
            bytes: vec![0xff; wanted * FRAME_ROOM],
            used: 0,
            seen: Vec::with_capacity(wanted),
            wanted,
        }
    }

    fn full(&self) -> bool {
        self.seen.len() == self.wanted
    }
}

/// A capture handed back by the core, for the control thread to report.
pub struct FinishedCapture {
    buffer: CaptureBuffer,
    queue: u16,
    ports: Vec<String>,
    /// The wall clock, and the core's clock, when the capture started.
    wall_at_start: u64,
    started: Nanos,
}

impl FinishedCapture {
    pub fn report(self) -> CaptureReport {
        let b = &self.buffer;
        let frames = b
            .seen
            .iter()
            .map(|s| CapturedFrame {
                t_ns: self.wall_at_start + (s.t - self.started),
                outbound: s.outbound,
                port: s.port,
                original_len: s.original_len as u32,
                hex: to_hex(&b.bytes[s.at..s.at + s.len]),
            })
            .collect();
        CaptureReport {
            queue: self.queue,
            ports: self.ports,
            frames,
            complete: b.full(),
        }
    }
}

pub(super) struct Tap {
    buffer: CaptureBuffer,
    until: Nanos,
    wall_at_start: u64,
    started: Nanos,
    done: SyncSender<FinishedCapture>,
}

impl Tap {
    pub fn new(
        buffer: CaptureBuffer,
        within: Duration,
        now: Nanos,
        done: SyncSender<FinishedCapture>,
    ) -> Tap {
        let wall = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        Tap {
            buffer,
            until: now + within.as_nanos() as Nanos,
            wall_at_start: wall,
            started: now,
            done,
        }
    }

    /// Copies `frame` (Ethernet header included), stamped with the time of
    /// the iteration that received or composed it, unless the capture has
    /// all it wants.
    pub fn record(&mut self, port: u8, outbound: bool, frame: &[u8], now: Nanos) {
        let b = &mut self.buffer;
        if b.full() {
            return;
        }
        let len = frame.len().min(FRAME_ROOM);
        b.bytes[b.used..b.used + len].copy_from_slice(&frame[..len]);
        b.seen.push(Seen {
            at: b.used,
            len,
            original_len: frame.len(),
            t: now,
            port,
            outbound,
        });
        b.used += len;
    }

    /// Whether it has its frames or its time is up.
    pub fn done(&self, now: Nanos) -> bool {
        self.buffer.full() || now >= self.until
    }

    /// Hands the buffer back to the control thread that started it.
    pub fn finish(self, queue: u16, ports: Vec<String>) {
        let _ = self.done.send(FinishedCapture {
            buffer: self.buffer,
            queue,
            ports,
            wall_at_start: self.wall_at_start,
            started: self.started,
        });
    }
}

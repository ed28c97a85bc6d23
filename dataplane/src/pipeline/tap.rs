//! A capture in progress on a polling core: the next frames its ports
//! receive and send, copied into a buffer sized when the capture starts, so
//! recording allocates nothing per frame. With no capture the ports pass
//! `None` and pay one branch per burst.

use std::sync::mpsc::SyncSender;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use oae_proto::Nanos;
use oae_proto::wire::{ETH_HEADER_LEN, MAX_FRAME};
use serde_json::Value;

use crate::control::{CaptureReport, CapturedFrame, to_hex};

struct Seen {
    at: usize,
    len: usize,
    t: Nanos,
    port: u8,
    outbound: bool,
}

pub(super) struct Tap {
    wanted: usize,
    until: Nanos,
    /// The wall clock at `started` on the core's clock, to stamp frames.
    wall_at_start: u64,
    started: Nanos,
    bytes: Vec<u8>,
    seen: Vec<Seen>,
    reply: SyncSender<Result<Value, String>>,
}

impl Tap {
    pub fn new(
        count: u32,
        within: Duration,
        now: Nanos,
        reply: SyncSender<Result<Value, String>>,
    ) -> Tap {
        let wanted = count as usize;
        let wall = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        Tap {
            wanted,
            until: now + within.as_nanos() as Nanos,
            wall_at_start: wall,
            started: now,
            bytes: Vec::with_capacity(wanted * (ETH_HEADER_LEN + MAX_FRAME)),
            seen: Vec::with_capacity(wanted),
            reply,
        }
    }

    /// Copies `frame` (Ethernet header included), unless the capture has
    /// all it wants.
    pub fn record(&mut self, port: u8, outbound: bool, frame: &[u8], now: Nanos) {
        if self.seen.len() == self.wanted {
            return;
        }
        // Within the capacity reserved: every frame is at most this long.
        let frame = &frame[..frame.len().min(ETH_HEADER_LEN + MAX_FRAME)];
        self.seen.push(Seen {
            at: self.bytes.len(),
            len: frame.len(),
            t: now,
            port,
            outbound,
        });
        self.bytes.extend_from_slice(frame);
    }

    /// Whether it has its frames or its time is up.
    pub fn done(&self, now: Nanos) -> bool {
        self.seen.len() == self.wanted || now >= self.until
    }

    /// Answers the request that started it.
    pub fn finish(self, queue: u16, ports: Vec<String>) {
        let frames = self
            .seen
            .iter()
            .map(|s| CapturedFrame {
                t_ns: self.wall_at_start + (s.t - self.started),
                outbound: s.outbound,
                port: s.port,
                hex: to_hex(&self.bytes[s.at..s.at + s.len]),
            })
            .collect();
        let report = CaptureReport {
            queue,
            ports,
            frames,
            complete: self.seen.len() == self.wanted,
        };
        let _ = self
            .reply
            .send(serde_json::to_value(report).map_err(|e| e.to_string()));
    }
}

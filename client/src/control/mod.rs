//! The control protocol between `oaed` and its clients (`oaectl`, tests,
//! other processes submitting verbs): one JSON request per line on a Unix
//! socket, one JSON response line back.

use std::time::Duration;

use oae_common::FaultConfig;
use oae_common::FaultScope;
use oae_proto::Opcode;
use oae_proto::auth::{Authenticator, KEY_NUMBERS, LinkKey};
use oae_proto::verb::{Block, MAX_BLOCK, MAX_MCAS_WORDS, McasWord, Output, RegionRef, Verb};
use serde::{Deserialize, Serialize};

mod client;
mod error;

pub use client::{Client, CloseReason, Closed, Response};
pub use error::{ControlError, ErrorCode, ErrorReport};

/// What a client asks.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "request")]
pub enum Request {
    Status,
    Stats,
    /// Latency percentiles of the verbs completed on a queue.
    Hist {
        #[serde(default)]
        queue: u16,
    },
    Verb {
        #[serde(default)]
        queue: u16,
        #[serde(default)]
        link: u16,
        /// Or the peer's node id: the dataplane picks the queue and link.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        node: Option<u64>,
        verb: VerbSpec,
    },
    RegionAdd {
        id: u16,
        key: u32,
        len: u32,
        perms: String,
    },
    RegionList,
    /// A whole region's bytes: refused for a region larger than
    /// [`MAX_DUMP_BYTES`] (ask for a window of it with
    /// [`Request::RegionDumpRange`]).
    RegionDump {
        id: u16,
        #[serde(default)]
        queue: u16,
    },
    /// Bytes `offset..offset + len` of a region (`len` left out: to its
    /// end), at most [`MAX_DUMP_BYTES`].
    RegionDumpRange {
        id: u16,
        #[serde(default)]
        queue: u16,
        #[serde(default)]
        offset: u32,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        len: Option<u32>,
    },
    /// Changes the XDP fault injector of every attached interface; fields
    /// left out keep their value.
    Fault(FaultChange),
    WorkloadStart(WorkloadSpec),
    WorkloadStatus {
        #[serde(default)]
        queue: u16,
        #[serde(default)]
        link: u16,
        /// The workload aimed at this node through the queue's fabric.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        node: Option<u64>,
    },
    /// Starts a new phase of the running workload (e.g. "loss"): verbs
    /// completing from now on count in its own latency histogram too.
    WorkloadPhase {
        #[serde(default)]
        queue: u16,
        #[serde(default)]
        link: u16,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        node: Option<u64>,
        name: String,
    },
    /// Records the next `count` OAE frames the queue receives and sends,
    /// for at most `seconds`; answered with a [`CaptureReport`].
    Capture {
        #[serde(default)]
        queue: u16,
        count: u32,
        seconds: f64,
    },
    /// Changes the keys of an authenticated link; answered with a
    /// [`KeyState`].
    Key {
        #[serde(default)]
        queue: u16,
        #[serde(default)]
        link: u16,
        change: KeyChange,
    },
    /// Posts a receive on a link, `region[offset..+len]` of the
    /// dataplane's memory, and answers with the message the next SEND on
    /// that link puts in it; withdrawn after `timeout_ms` (at most
    /// [`MAX_RECV_TIMEOUT_MS`]) if none came.
    Recv {
        #[serde(default)]
        queue: u16,
        #[serde(default)]
        link: u16,
        region: u16,
        offset: u32,
        len: u16,
        timeout_ms: u32,
    },
    /// Stop accepting work, finish what is in flight, exit.
    Shutdown,
}

/// Longest a `recv` request waits for its message.
pub const MAX_RECV_TIMEOUT_MS: u32 = 50_000;

/// A change to a link's keys. Keys travel as 64 hex digits and are never
/// written to a log or an answer.
#[derive(Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case", tag = "action")]
pub enum KeyChange {
    /// Nothing: the answer tells the state.
    Show,
    /// Accept frames under key `number` from now on.
    Add { number: u8, key: String },
    /// Send under key `number` from the next frame.
    Use { number: u8 },
    /// Stop accepting key `number`.
    Retire { number: u8 },
    /// Add `key` under the next number, send under it once the peer
    /// accepts it, retire the old key once both ends use the new one.
    Roll { key: String },
}

impl core::fmt::Debug for KeyChange {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            KeyChange::Show => f.write_str("Show"),
            KeyChange::Add { number, .. } => write!(f, "Add {{ number: {number}, key: <secret> }}"),
            KeyChange::Use { number } => write!(f, "Use {{ number: {number} }}"),
            KeyChange::Retire { number } => write!(f, "Retire {{ number: {number} }}"),
            KeyChange::Roll { .. } => f.write_str("Roll { key: <secret> }"),
        }
    }
}

/// 64 hex digits (an optional `0x`): a 256-bit link key.
pub fn parse_key(text: &str) -> Result<LinkKey, String> {
    let bytes = from_hex(text.trim()).map_err(|e| format!("a key is 64 hex digits: {e}"))?;
    let key: [u8; 32] = bytes
        .try_into()
        .map_err(|b: Vec<u8>| format!("a key is 32 bytes (64 hex digits), not {}", b.len()))?;
    Ok(LinkKey(key))
}

impl KeyChange {
    pub fn apply(&self, a: &mut Authenticator) -> Result<(), String> {
        let number = |n: u8| {
            if usize::from(n) < KEY_NUMBERS {
                Ok(n)
            } else {
                Err(format!("key numbers are 0 to {}", KEY_NUMBERS - 1))
            }
        };
        match self {
            KeyChange::Show => Ok(()),
            KeyChange::Add { number: n, key } => {
                a.add_key(number(*n)?, &parse_key(key)?);
                Ok(())
            }
            KeyChange::Use { number: n } => a.use_key(number(*n)?).map_err(String::from),
            KeyChange::Retire { number: n } => a.retire_key(number(*n)?).map_err(String::from),
            KeyChange::Roll { key } => {
                a.roll(&parse_key(key)?);
                Ok(())
            }
        }
    }
}

/// An authenticated link's keys, by number (never the keys themselves).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct KeyState {
    /// The key frames go out under.
    pub sending: u8,
    /// Key numbers accepted.
    pub accepted: Vec<u8>,
    /// A roll in progress: the number it sends under once the peer has it.
    pub rolling_to: Option<u8>,
}

impl KeyState {
    pub fn of(a: &Authenticator) -> KeyState {
        KeyState {
            sending: a.sending(),
            accepted: (0..KEY_NUMBERS as u8)
                .filter(|n| a.accepts() & (1 << n) != 0)
                .collect(),
            rolling_to: a.rolling_to(),
        }
    }
}

/// Most frames one capture holds (its buffer, about 1 KiB a frame, is
/// made when it starts).
pub const MAX_CAPTURE_FRAMES: u32 = 10_000;
/// Longest a capture may run: the control socket waits 30 s for an answer.
pub const MAX_CAPTURE_SECONDS: f64 = 20.0;

// What one client may hold of `oaed` through its control socket: each
// limit bounds the daemon's threads or memory, whatever a client sends.
// docs/ARCHITECTURE.md ("The control socket") lists them.

/// Control connections served at once (a thread each). One more is
/// answered with [`CloseReason::TooManyConnections`] and closed.
pub const MAX_CONTROL_CONNECTIONS: usize = 32;
/// Longest a connection may take to send a whole request, from being
/// accepted or from its last answer; then it is answered with
/// [`CloseReason::Idle`] and closed. Counted per request, not per read, so
/// a client that trickles bytes is closed too.
pub const CONTROL_IDLE_TIMEOUT: Duration = Duration::from_secs(60);
/// Longest request line, its newline not counted: the largest request
/// (a WRITE of 960 bytes, as hex) is a few KiB. A longer one is answered
/// with [`CloseReason::RequestTooLong`] and the connection closed, before
/// more of it is read.
pub const MAX_REQUEST_LINE_BYTES: usize = 64 * 1024;
/// Most bytes one region dump returns (twice as many hex digits in the
/// answer), as big as the largest region of the shipped configurations.
pub const MAX_DUMP_BYTES: u32 = 1 << 20;
/// Phases one workload keeps: each has its own latency histogram (about
/// 220 KB).
pub const MAX_WORKLOAD_PHASES: usize = 16;
/// Longest phase name, in bytes.
pub const MAX_PHASE_NAME_BYTES: usize = 64;

/// One frame a polling core saw, with its Ethernet header.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct CapturedFrame {
    /// Wall-clock time, nanoseconds since the Unix epoch: the polling
    /// core's clock at the start of the iteration that received or composed
    /// the frame (frames of one burst share it).
    pub t_ns: u64,
    /// Sent (true) or received.
    pub outbound: bool,
    /// Index into [`CaptureReport::ports`].
    pub port: u8,
    /// Its length on the wire; `hex` holds at most a frame of the largest
    /// class.
    pub original_len: u32,
    /// The frame, as hex.
    pub hex: String,
}

/// What a capture recorded.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct CaptureReport {
    pub queue: u16,
    /// The interfaces the queue's ports run on.
    pub ports: Vec<String>,
    /// In the order the core saw them.
    pub frames: Vec<CapturedFrame>,
    /// Whether `count` frames were recorded (else the time ran out).
    pub complete: bool,
}

/// `oaectl hist`: latency percentiles of the verbs a queue completed.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct HistReport {
    pub queue: u16,
    pub latency_ns: Percentiles,
}

/// A verb run through the control socket: its result and latency.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct VerbAnswer {
    pub result: OutputView,
    pub latency_ns: u64,
}

/// A message a posted receive took: its bytes (hex, read from the
/// receive) and the SEND's immediate data.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct ReceivedAnswer {
    pub link: u16,
    pub len: u16,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub imm: Option<u32>,
    pub data: String,
}

/// A registered region, as `oaectl region list` shows it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct RegionView {
    pub id: u16,
    pub key: u32,
    pub len: u32,
    /// Any of `r`, `w`, `a`.
    pub perms: String,
}

/// `oaectl region add`: the region now registered.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct RegionAdded {
    pub registered: u16,
}

/// `oaectl region dump`: a region's bytes, or a window of them.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct RegionDump {
    pub id: u16,
    /// Where `data` starts in the region.
    #[serde(default)]
    pub offset: u32,
    /// The region's length, of which `data` may be a part.
    #[serde(default)]
    pub region_len: u32,
    /// The bytes, as hex.
    pub data: String,
    /// Words of `data` held by tentative transfers at the time.
    pub locked_words: usize,
}

/// `oaectl shutdown`: the dataplane is draining and will exit.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Stopping {
    pub stopping: bool,
}

/// The fault injector of one interface after a [`Request::Fault`].
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct FaultsSet {
    pub iface: String,
    pub faults: crate::stats::FaultView,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct FaultChange {
    pub drop_ppm: Option<u32>,
    pub corrupt_ppm: Option<u32>,
    /// Byte offset of the flipped bit's byte; `null` in JSON keeps it,
    /// `u32::MAX` means random.
    pub corrupt_offset: Option<u32>,
    pub link_down: Option<bool>,
    pub seed: Option<u64>,
    /// Which frames the faults apply to: `oae` (OAE frames, the default),
    /// `ipv4` (every IPv4 frame) or `port:N` (IPv4 TCP and UDP segments
    /// with source or destination port N).
    #[serde(default, skip_serializing_if = "Option::is_none", with = "scope_text")]
    pub scope: Option<FaultScope>,
    /// Only the XDP program of this interface (every interface of the
    /// dataplane when absent): one link of a node with several.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iface: Option<String>,
}

impl FaultChange {
    /// `faults` with this change's settings in place of theirs.
    pub fn applied_to(&self, faults: FaultConfig) -> FaultConfig {
        let mut f = faults;
        if let Some(v) = self.drop_ppm {
            f.drop_ppm = v;
        }
        if let Some(v) = self.corrupt_ppm {
            f.corrupt_ppm = v;
        }
        if let Some(v) = self.corrupt_offset {
            f.corrupt_offset = v;
        }
        if let Some(v) = self.link_down {
            f.link_down = u32::from(v);
        }
        if let Some(v) = self.seed {
            f.seed = v;
        }
        match self.scope {
            Some(scope) => f.with_scope(scope),
            None => f,
        }
    }
}

/// A fault scope travels as its text (`oae`, `ipv4`, `port:N`): the form
/// users type, parsed once on each side by the same `FromStr`.
mod scope_text {
    use oae_common::FaultScope;
    use serde::{Deserialize, Deserializer, Serializer, de::Error as _};

    pub fn serialize<S: Serializer>(scope: &Option<FaultScope>, s: S) -> Result<S::Ok, S::Error> {
        match scope {
            Some(scope) => s.collect_str(scope),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<FaultScope>, D::Error> {
        Option::<String>::deserialize(d)?
            .map(|text| text.parse().map_err(D::Error::custom))
            .transpose()
    }
}

/// A verb in the control protocol's terms (data in hex).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case", tag = "op")]
pub enum VerbSpec {
    Read {
        region: u16,
        key: u32,
        offset: u32,
        local_region: u16,
        local_offset: u32,
        len: u16,
    },
    Write {
        region: u16,
        key: u32,
        offset: u32,
        data: String,
    },
    Cas {
        region: u16,
        key: u32,
        offset: u32,
        expected: u64,
        new: u64,
    },
    Faa {
        region: u16,
        key: u32,
        offset: u32,
        add: u64,
    },
    Swap {
        region: u16,
        key: u32,
        offset: u32,
        new: u64,
    },
    /// Words as (offset, expected, new).
    Mcas {
        region: u16,
        key: u32,
        words: Vec<(u32, u64, u64)>,
    },
    Bswap {
        region: u16,
        key: u32,
        offset: u32,
        local_region: u16,
        local_offset: u32,
        len: u16,
    },
    /// A message for the peer's posted receive, with optional immediate
    /// data.
    Send {
        data: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        imm: Option<u32>,
    },
}

impl VerbSpec {
    /// The kind of verb; its serde tag (`"op"`) is the kind's name.
    pub fn opcode(&self) -> Opcode {
        match self {
            VerbSpec::Read { .. } => Opcode::Read,
            VerbSpec::Write { .. } => Opcode::Write,
            VerbSpec::Cas { .. } => Opcode::CompareAndSwap,
            VerbSpec::Faa { .. } => Opcode::FetchAdd,
            VerbSpec::Swap { .. } => Opcode::Swap,
            VerbSpec::Mcas { .. } => Opcode::MultiWordCommit,
            VerbSpec::Bswap { .. } => Opcode::BilateralSwap,
            VerbSpec::Send { .. } => Opcode::Send,
        }
    }

    pub fn to_verb(&self) -> Result<Verb, String> {
        let target = |region: u16, key: u32| RegionRef { id: region, key };
        Ok(match self {
            VerbSpec::Read {
                region,
                key,
                offset,
                local_region,
                local_offset,
                len,
            } => Verb::Read {
                target: target(*region, *key),
                offset: *offset,
                local_region: *local_region,
                local_offset: *local_offset,
                len: *len,
            },
            VerbSpec::Write {
                region,
                key,
                offset,
                data,
            } => {
                let bytes = from_hex(data)?;
                let data = Block::new(&bytes).ok_or_else(|| {
                    format!("write data is {} bytes; at most {MAX_BLOCK}", bytes.len())
                })?;
                Verb::Write {
                    target: target(*region, *key),
                    offset: *offset,
                    data,
                }
            }
            VerbSpec::Cas {
                region,
                key,
                offset,
                expected,
                new,
            } => Verb::CompareAndSwap {
                target: target(*region, *key),
                offset: *offset,
                expected: *expected,
                new: *new,
            },
            VerbSpec::Faa {
                region,
                key,
                offset,
                add,
            } => Verb::FetchAdd {
                target: target(*region, *key),
                offset: *offset,
                add: *add,
            },
            VerbSpec::Swap {
                region,
                key,
                offset,
                new,
            } => Verb::Swap {
                target: target(*region, *key),
                offset: *offset,
                new: *new,
            },
            VerbSpec::Mcas { region, key, words } => {
                if words.is_empty() || words.len() > MAX_MCAS_WORDS {
                    return Err(format!(
                        "mcas takes 1 to {MAX_MCAS_WORDS} words, got {}",
                        words.len()
                    ));
                }
                let mut all = [McasWord::default(); MAX_MCAS_WORDS];
                for (w, &(offset, expected, new)) in all.iter_mut().zip(words) {
                    *w = McasWord {
                        offset,
                        expected,
                        new,
                    };
                }
                Verb::MultiWordCommit {
                    target: target(*region, *key),
                    count: words.len() as u8,
                    words: all,
                }
            }
            VerbSpec::Bswap {
                region,
                key,
                offset,
                local_region,
                local_offset,
                len,
            } => Verb::BilateralSwap {
                target: target(*region, *key),
                offset: *offset,
                local_region: *local_region,
                local_offset: *local_offset,
                len: *len,
            },
            VerbSpec::Send { data, imm } => {
                let bytes = from_hex(data)?;
                let data = Block::new(&bytes).ok_or_else(|| {
                    format!("a message is {} bytes; at most {MAX_BLOCK}", bytes.len())
                })?;
                Verb::Send { imm: *imm, data }
            }
        })
    }
}

/// A verb's result in the control protocol's terms. A READ's or bilateral
/// swap's `data` is what landed in its local block, read back from there
/// when the verb completed.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case", tag = "op")]
pub enum OutputView {
    Read { data: String },
    Write,
    Cas { old: u64, swapped: bool },
    Faa { old: u64 },
    Swap { old: u64 },
    Mcas { committed: bool, old: Vec<u64> },
    Bswap { data: String },
    Send,
}

impl OutputView {
    /// `output` in the control protocol's terms; `landed` is the local
    /// block of a READ or bilateral swap (ignored for other verbs).
    pub fn new(o: &Output, landed: &[u8]) -> OutputView {
        match o {
            Output::Read { .. } => OutputView::Read {
                data: to_hex(landed),
            },
            Output::Write => OutputView::Write,
            Output::CompareAndSwap { old, swapped } => OutputView::Cas {
                old: *old,
                swapped: *swapped,
            },
            Output::FetchAdd { old } => OutputView::Faa { old: *old },
            Output::Swap { old } => OutputView::Swap { old: *old },
            Output::MultiWordCommit {
                committed,
                count,
                old,
            } => OutputView::Mcas {
                committed: *committed,
                old: old[..usize::from(*count)].to_vec(),
            },
            Output::BilateralSwap { .. } => OutputView::Bswap {
                data: to_hex(landed),
            },
            Output::Send => OutputView::Send,
        }
    }
}

/// The mixed workload run inside a queue's polling loop.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct WorkloadSpec {
    #[serde(default)]
    pub queue: u16,
    /// The queue's link the verbs go to (its peers in order).
    #[serde(default)]
    pub link: u16,
    /// Or the peer's node id: the dataplane picks the queue and link.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<u64>,
    /// The lanes are `first_lane..first_lane + lanes`: workloads of one
    /// dataplane (which share its memory) or aimed at one peer need lanes
    /// of their own.
    #[serde(default)]
    pub first_lane: u32,
    /// Contended mode (`crate::contend`): every lane hammers the four words
    /// of lane `first_lane` with FETCH_ADD, CAS and MULTI-WORD COMMIT, and
    /// the report counts what took effect instead of modelling the bytes.
    #[serde(default)]
    pub contend: bool,
    /// Target region on the peer, and the local region bilateral swaps
    /// trade with.
    pub region: u16,
    pub key: u32,
    pub local_region: u16,
    /// Independent streams: each owns 64 bytes of both regions and keeps
    /// one verb in flight.
    pub lanes: u32,
    pub seconds: f64,
    pub seed: u64,
    /// Which verbs to mix; empty means CAS, FAA, WRITE, MCAS and BSWAP.
    #[serde(default)]
    pub verbs: Vec<String>,
}

/// What a contended workload's verbs did to the shared words.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct ContendedCounts {
    /// FETCH_ADDs of 1 to word 0 that completed.
    pub adds: u64,
    /// CAS increments of word 1 that swapped.
    pub cas_wins: u64,
    /// MULTI-WORD COMMITs that incremented words 2 and 3.
    pub mcas_wins: u64,
}

/// Counters and histogram of a workload, while it runs and when done.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct WorkloadReport {
    pub running: bool,
    pub elapsed_s: f64,
    pub completed: u64,
    pub failed: u64,
    /// Completed verbs whose result contradicts the ledger's model.
    pub mismatches: u64,
    pub per_verb: Vec<(String, u64)>,
    /// Failed verbs by outcome, by its stable name (`refused_bad_key`).
    pub errors: Vec<(String, u64)>,
    pub latency: Percentiles,
    /// The latency distribution as `(quantile, ns)` points, for plots.
    #[serde(default)]
    pub cdf: Vec<(f64, u64)>,
    /// The same, per phase, in the order the phases began.
    #[serde(default)]
    pub phases: Vec<PhaseReport>,
    /// Where the expected bytes start in both regions (the first lane's).
    #[serde(default)]
    pub first_byte: usize,
    /// The longest time between two of its verbs' completions, µs: how
    /// long it stalled (across a link cut, the failover).
    #[serde(default)]
    pub longest_gap_us: f64,
    /// In contended mode, what took effect (and no expected bytes).
    #[serde(default)]
    pub contended: Option<ContendedCounts>,
    /// Expected contents, from the ledger of issued verbs: the peer's
    /// region and this side's local region, each `lanes * 64` bytes from
    /// `first_byte`.
    pub expected_remote: String,
    pub expected_local: String,
}

impl WorkloadReport {
    /// Workloads that ran side by side (on several queues), as one: counts
    /// summed, the longest elapsed time, and each latency figure the worst
    /// of theirs (an upper bound: the distributions are not merged; the
    /// first report's CDF is kept). No expected bytes: check each report.
    pub fn side_by_side(reports: &[WorkloadReport]) -> WorkloadReport {
        let mut all = reports.first().cloned().unwrap_or_default();
        all.expected_remote.clear();
        all.expected_local.clear();
        for r in reports.iter().skip(1) {
            all.running |= r.running;
            all.elapsed_s = all.elapsed_s.max(r.elapsed_s);
            all.longest_gap_us = all.longest_gap_us.max(r.longest_gap_us);
            all.completed += r.completed;
            all.failed += r.failed;
            all.mismatches += r.mismatches;
            add_counts(&mut all.per_verb, &r.per_verb);
            add_counts(&mut all.errors, &r.errors);
            all.latency = all.latency.worst(&r.latency);
            for p in &r.phases {
                match all.phases.iter_mut().find(|q| q.name == p.name) {
                    Some(q) => {
                        q.started_s = q.started_s.min(p.started_s);
                        q.completed += p.completed;
                        q.failed += p.failed;
                        q.latency = q.latency.worst(&p.latency);
                    }
                    None => all.phases.push(p.clone()),
                }
            }
        }
        all
    }
}

fn add_counts(into: &mut Vec<(String, u64)>, from: &[(String, u64)]) {
    for (name, n) in from {
        match into.iter_mut().find(|(m, _)| m == name) {
            Some((_, c)) => *c += n,
            None => into.push((name.clone(), *n)),
        }
    }
}

/// Verbs that completed during one phase of a workload.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct PhaseReport {
    pub name: String,
    /// Seconds from the workload's start to the phase's.
    pub started_s: f64,
    pub completed: u64,
    pub failed: u64,
    pub latency: Percentiles,
    #[serde(default)]
    pub cdf: Vec<(f64, u64)>,
}

/// Latency percentiles in nanoseconds.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq)]
pub struct Percentiles {
    pub count: u64,
    pub min: u64,
    pub p50: u64,
    pub p90: u64,
    pub p99: u64,
    pub p999: u64,
    pub max: u64,
    pub mean: f64,
}

impl Percentiles {
    /// The larger of each figure (counts summed): a bound on a merged
    /// distribution's figures.
    pub fn worst(&self, other: &Percentiles) -> Percentiles {
        let count = self.count + other.count;
        let mean = if count == 0 {
            0.0
        } else {
            (self.mean * self.count as f64 + other.mean * other.count as f64) / count as f64
        };
        Percentiles {
            count,
            min: self.min.min(other.min),
            p50: self.p50.max(other.p50),
            p90: self.p90.max(other.p90),
            p99: self.p99.max(other.p99),
            p999: self.p999.max(other.p999),
            max: self.max.max(other.max),
            mean,
        }
    }

    pub fn of(h: &hdrhistogram::Histogram<u64>) -> Percentiles {
        if h.is_empty() {
            return Percentiles::default();
        }
        Percentiles {
            count: h.len(),
            min: h.min(),
            p50: h.value_at_quantile(0.5),
            p90: h.value_at_quantile(0.9),
            p99: h.value_at_quantile(0.99),
            p999: h.value_at_quantile(0.999),
            max: h.max(),
            mean: h.mean(),
        }
    }
}

/// Quantiles a latency distribution is sampled at for plots: even steps
/// through the body, then ever closer to the tail.
const CDF_QUANTILES: [f64; 27] = [
    0.0, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.55, 0.6, 0.65, 0.7, 0.75, 0.8,
    0.85, 0.9, 0.95, 0.99, 0.995, 0.999, 0.9995, 0.9999, 0.99999, 1.0,
];

/// `(quantile, ns)` points of `h`'s distribution; empty if `h` is.
pub fn cdf_points(h: &hdrhistogram::Histogram<u64>) -> Vec<(f64, u64)> {
    if h.is_empty() {
        return Vec::new();
    }
    CDF_QUANTILES
        .iter()
        .map(|&q| (q, h.value_at_quantile(q)))
        .collect()
}

/// `oaectl workload start`: where the workload runs, for the status and
/// phase requests that follow (a node through the fabric, or a link).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct WorkloadStarted {
    pub started: bool,
    pub queue: u16,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link: Option<u16>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<u64>,
}

/// A workload's new phase has begun.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct PhaseStarted {
    pub phase_started: bool,
}

/// Every answer the dataplane gives, as it writes them: each goes out as
/// its own JSON (untagged), and a client reads the one type its request
/// names ([`Client`]).
#[derive(Debug, Clone, Serialize)]
#[serde(untagged)]
pub enum Answer {
    Status(crate::status::DataplaneStatus),
    QueueStatus(Box<crate::status::QueueStatus>),
    Stats(crate::stats::DataplaneStats),
    QueueStats(Box<crate::stats::QueueStats>),
    Hist(HistReport),
    Verb(VerbAnswer),
    Received(ReceivedAnswer),
    RegionAdded(RegionAdded),
    Regions(Vec<RegionView>),
    RegionDump(RegionDump),
    FaultsSet(Vec<FaultsSet>),
    WorkloadStarted(WorkloadStarted),
    Workload(Box<WorkloadReport>),
    PhaseStarted(PhaseStarted),
    Capture(CaptureReport),
    Key(KeyState),
    Stopping(Stopping),
    /// Taken by a polling core, its result to come another way (a capture
    /// begun, a workload started): never sent to a client.
    Accepted,
}

/// Bytes as lower-case hex (the one encoder, `oae_common::hex`).
pub fn to_hex(bytes: &[u8]) -> String {
    oae_common::hex::encode(bytes)
}

/// Hex text as bytes (the one decoder, `oae_common::hex`), its error as
/// the control protocol's text.
pub fn from_hex(s: &str) -> Result<Vec<u8>, String> {
    oae_common::hex::decode(s).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One verb of each kind, as the control protocol carries it.
    fn sample(kind: Opcode) -> VerbSpec {
        let (region, key, offset) = (1, 2, 8);
        match kind {
            Opcode::Read => VerbSpec::Read {
                region,
                key,
                offset,
                local_region: 2,
                local_offset: 16,
                len: 8,
            },
            Opcode::Write => VerbSpec::Write {
                region,
                key,
                offset,
                data: "ab".into(),
            },
            Opcode::CompareAndSwap => VerbSpec::Cas {
                region,
                key,
                offset,
                expected: 1,
                new: 2,
            },
            Opcode::FetchAdd => VerbSpec::Faa {
                region,
                key,
                offset,
                add: 1,
            },
            Opcode::Swap => VerbSpec::Swap {
                region,
                key,
                offset,
                new: 3,
            },
            Opcode::MultiWordCommit => VerbSpec::Mcas {
                region,
                key,
                words: vec![(offset, 1, 2)],
            },
            Opcode::BilateralSwap => VerbSpec::Bswap {
                region,
                key,
                offset,
                local_region: 2,
                local_offset: 0,
                len: 8,
            },
            Opcode::Send => VerbSpec::Send {
                data: "ab".into(),
                imm: Some(7),
            },
        }
    }

    /// Every kind has a form in the control protocol, tagged with the
    /// kind's name, that becomes a verb of that kind.
    #[test]
    fn every_kind_of_verb_has_its_spec_tagged_with_its_name() {
        for kind in Opcode::ALL {
            let spec = sample(kind);
            assert_eq!(spec.opcode(), kind);
            let json = serde_json::to_value(&spec).unwrap();
            assert_eq!(json["op"], kind.name(), "{json}");
            assert_eq!(spec.to_verb().unwrap().opcode(), kind);
        }
    }

    #[test]
    fn hex_round_trips_and_refuses_junk() {
        assert_eq!(
            from_hex(&to_hex(&[0, 1, 0xab, 0xff])).unwrap(),
            [0, 1, 0xab, 0xff]
        );
        assert!(from_hex("abc").unwrap_err().contains("odd"));
        assert!(from_hex("zz").unwrap_err().contains("not a hex digit"));
        assert!(from_hex("aéa").unwrap_err().contains("not a hex digit"));
    }

    #[test]
    fn requests_read_as_documented() {
        let r: Request = serde_json::from_str(
            r#"{"request":"verb","verb":{"op":"cas","region":1,"key":7,"offset":8,"expected":0,"new":5}}"#,
        )
        .unwrap();
        let Request::Verb { queue: 0, verb, .. } = r else {
            panic!("{r:?}")
        };
        assert!(matches!(
            verb.to_verb().unwrap(),
            Verb::CompareAndSwap {
                offset: 8,
                new: 5,
                ..
            }
        ));
        let too_many = VerbSpec::Mcas {
            region: 1,
            key: 7,
            words: vec![(0, 0, 0); 9],
        };
        assert!(too_many.to_verb().unwrap_err().contains("1 to 8 words"));
    }
}

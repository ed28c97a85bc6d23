//! A mixed verb workload that runs inside a queue's polling loop, with a
//! ledger that predicts every result and the final memory on both sides.
//!
//! Lane `i` owns bytes `[64 i, 64 i + 64)` of the peer's target region and
//! of the local region, and keeps one verb in flight. In the local bytes,
//! READs land in the first half (a half of the lane's remote bytes at a
//! time) and bilateral swaps trade the second; both are read back from
//! the local memory when they complete, since a completion carries only
//! their length. Words of one lane therefore change only through that lane's
//! verbs, in issue order, so the ledger is a plain sequential model: a verb
//! that completed `Ok` took effect exactly once, one that completed `Err`
//! took none. Any result that contradicts the model, and any difference
//! between the model and the memory dumped at the end, is a violation of
//! exactly-once.

use hdrhistogram::Histogram;
use oae_common::rng::Rng;
use oae_proto::verb::UnknownVerb;
use oae_proto::verb::{Block, MAX_MCAS_WORDS, McasWord, Output, RegionRef, Verb, VerbError};
use oae_proto::{LinkId, Nanos, Opcode, SharedMemory, Store};

mod contend;

use self::contend::Contention;
use oae_client::control::{
    ControlError, MAX_PHASE_NAME_BYTES, MAX_WORKLOAD_PHASES, Percentiles, PhaseReport,
    WorkloadReport, WorkloadSpec, cdf_points, to_hex,
};
use oae_client::outcome::Outcome;

/// Bytes of each region a lane owns.
pub const LANE_BYTES: usize = 64;
const WORDS: usize = 4;

/// The verbs a workload runs when its spec names none.
const DEFAULT_MIX: [Opcode; 5] = [
    Opcode::CompareAndSwap,
    Opcode::FetchAdd,
    Opcode::Write,
    Opcode::MultiWordCommit,
    Opcode::BilateralSwap,
];

/// Where in a lane a bilateral swap trades, and how many bytes.
const BILATERAL_AT: usize = 32;
const BILATERAL_LEN: usize = 32;
/// A READ reads half a lane, and lands it in the lane's local bytes before
/// [`BILATERAL_AT`], which nothing else writes.
const READ_LEN: usize = 32;
// What lands is read back into a 32-byte array.
const _: () = assert!(READ_LEN == 32 && BILATERAL_LEN == 32);

/// What a lane's verb in flight does to the lane's bytes, for the ledger.
/// The verb itself stays with the link: a verb has room for a kilobyte,
/// this for what a lane's verbs carry.
#[derive(Clone, Copy)]
enum Issued {
    /// A read of half the lane's remote bytes, from `32 half`.
    Read {
        half: u8,
    },
    Write {
        at: u8,
        len: u8,
        data: [u8; 32],
    },
    CompareAndSwap {
        word: u8,
        expected: u64,
        new: u64,
    },
    FetchAdd {
        word: u8,
        add: u64,
    },
    Swap {
        word: u8,
        new: u64,
    },
    MultiWordCommit {
        first: u8,
        count: u8,
        expected: [u64; WORDS],
        new: [u64; WORDS],
    },
    /// The lane's remote and local bytes at [`BILATERAL_AT`] traded.
    BilateralSwap,
    /// A verb on the shared words of contended mode: counted, not modelled.
    Contended,
}

#[derive(Clone, Copy)]
enum LaneState {
    /// The model is unknown: the next verb reads the lane's first half.
    Unknown,
    /// The first half is known: the next verb reads the second.
    HalfKnown,
    Idle,
    /// `learning`: this read sets the model rather than checking it.
    Busy {
        kind: Opcode,
        issued: Issued,
        learning: bool,
    },
}

struct Lane {
    state: LaneState,
    remote: [u8; LANE_BYTES],
    local: [u8; LANE_BYTES],
    /// The target restarted while this lane's verb was in flight: the verb
    /// may have run on the new incarnation's memory, so its result teaches
    /// nothing about the model; the lane reads its bytes again.
    stale: bool,
}

struct Phase {
    name: String,
    started: Nanos,
    latency: Histogram<u64>,
    completed: u64,
    failed: u64,
}

/// 1 ns to 60 s at three significant digits.
fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 60_000_000_000, 3).expect("valid bounds")
}

pub struct Workload {
    spec: WorkloadSpec,
    /// Where READs and bilateral swaps land, read back when they complete.
    memory: SharedMemory,
    /// The verb [`Workload::poll`] builds each issue in, in place: a
    /// verb has room for a kilobyte of WRITE data.
    scratch: Option<Box<Verb>>,
    /// Contended mode: verbs on shared words, counted rather than modelled.
    contention: Option<Contention>,
    kinds: Vec<Opcode>,
    lanes: Vec<Lane>,
    /// Lanes with no verb in flight, next to issue last: a loop iteration
    /// visits only the lanes that completed, not all of them.
    ready: Vec<u32>,
    rng: Rng,
    started: Option<Nanos>,
    deadline: Nanos,
    latency: Histogram<u64>,
    /// Named phases, the last one current: when each began, and the
    /// latency, completions and failures of the verbs completed in it.
    phases: Vec<Phase>,
    completed: [u64; Opcode::COUNT],
    /// Failures by reason, as they first happened; named in reports.
    errors: Vec<(VerbError, u64)>,
    failed: u64,
    mismatches: u64,
    stopping: bool,
    /// When a verb last completed, and the longest time between two
    /// completions: how long the workload stalled (a link cut, say).
    last_completed_at: Option<Nanos>,
    longest_gap: Nanos,
}

impl Workload {
    /// Checks the spec against this node's memory and the verbs its
    /// transport runs (`runs`), and prepares the lanes.
    pub fn new(
        spec: WorkloadSpec,
        memory: &SharedMemory,
        runs: impl Fn(Opcode) -> bool,
    ) -> Result<Workload, String> {
        if spec.lanes == 0 || spec.lanes > 4096 {
            return Err(format!("lanes = {} must be 1 to 4096", spec.lanes));
        }
        if !(spec.seconds > 0.0 && spec.seconds <= 3600.0) {
            return Err(format!("seconds = {} must be in (0, 3600]", spec.seconds));
        }
        let kinds: Vec<Opcode> = if spec.verbs.is_empty() {
            // The default mix, less what the transport does not run.
            DEFAULT_MIX.into_iter().filter(|&k| runs(k)).collect()
        } else {
            spec.verbs
                .iter()
                .map(|v| {
                    let kind: Opcode = v.parse().map_err(|e: UnknownVerb| e.to_string())?;
                    if runs(kind) {
                        Ok(kind)
                    } else {
                        let names: Vec<&str> = Opcode::ALL
                            .into_iter()
                            .filter(|&k| runs(k))
                            .map(Opcode::name)
                            .collect();
                        Err(format!(
                            "this transport has no '{v}': it runs {}",
                            names.join(", ")
                        ))
                    }
                })
                .collect::<Result<_, _>>()?
        };
        if kinds.is_empty() {
            return Err("no verb of the mix runs on this transport".into());
        }
        if kinds.contains(&Opcode::Send) {
            return Err(
                "the workload's lanes take one-sided verbs; 'send' needs receives \
                        that the peer's application posts, and a workload posts none"
                    .into(),
            );
        }
        let kinds = if spec.contend {
            let wanted: Vec<Opcode> = if spec.verbs.is_empty() {
                contend::KINDS.to_vec()
            } else {
                kinds
            };
            if let Some(k) = wanted.iter().find(|k| !contend::KINDS.contains(k)) {
                return Err(format!(
                    "contended mode runs faa, cas and mcas, not '{}'",
                    k.name()
                ));
            }
            wanted
        } else {
            kinds
        };
        let first = spec.first_lane as usize * LANE_BYTES;
        let span = first + spec.lanes as usize * LANE_BYTES;
        let local = memory.snapshot(spec.local_region).ok_or_else(|| {
            format!(
                "local region {} is not registered here (READs and bilateral swaps land in it)",
                spec.local_region
            )
        })?;
        if local.len() < span {
            return Err(format!(
                "local region {} has {} bytes; {} lanes need {span}",
                spec.local_region,
                local.len(),
                spec.lanes
            ));
        }
        let lanes = (0..spec.lanes as usize)
            .map(|i| {
                let mut l = Lane {
                    // Contended lanes have no bytes of their own to learn.
                    state: if spec.contend {
                        LaneState::Idle
                    } else {
                        LaneState::Unknown
                    },
                    remote: [0; LANE_BYTES],
                    local: [0; LANE_BYTES],
                    stale: false,
                };
                let at = first + i * LANE_BYTES;
                l.local.copy_from_slice(&local[at..at + LANE_BYTES]);
                l
            })
            .collect();
        let contention = spec.contend.then(|| {
            let target = RegionRef {
                id: spec.region,
                key: spec.key,
            };
            Contention::new(target, first as u32)
        });
        Ok(Workload {
            memory: memory.clone(),
            scratch: Some(Box::new(Verb::FetchAdd {
                target: RegionRef { id: 0, key: 0 },
                offset: 0,
                add: 0,
            })),
            contention,
            ready: (0..spec.lanes).rev().collect(),
            rng: Rng::new(spec.seed),
            kinds,
            lanes,
            started: None,
            last_completed_at: None,
            longest_gap: 0,
            deadline: 0,
            latency: new_histogram(),
            phases: Vec::new(),
            completed: [0; Opcode::COUNT],
            errors: Vec::new(),
            failed: 0,
            mismatches: 0,
            stopping: false,
            spec,
        })
    }

    /// Begins phase `name`: verbs completing from `now` on are counted in
    /// it (and in the whole run, as before). Each phase keeps a histogram
    /// for the workload's life, so a workload has at most
    /// [`MAX_WORKLOAD_PHASES`], and their names at most
    /// [`MAX_PHASE_NAME_BYTES`].
    pub fn begin_phase(&mut self, name: String, now: Nanos) -> Result<(), String> {
        if name.len() > MAX_PHASE_NAME_BYTES {
            return Err(format!(
                "a phase name is at most {MAX_PHASE_NAME_BYTES} bytes \
                 (MAX_PHASE_NAME_BYTES), not {}: choose a shorter one",
                name.len()
            ));
        }
        if self.phases.len() >= MAX_WORKLOAD_PHASES {
            return Err(format!(
                "this workload has begun {MAX_WORKLOAD_PHASES} phases, the most one keeps \
                 (MAX_WORKLOAD_PHASES): start a new workload to mark more"
            ));
        }
        self.phases.push(Phase {
            name,
            started: now,
            latency: new_histogram(),
            completed: 0,
            failed: 0,
        });
        Ok(())
    }

    pub fn queue(&self) -> u16 {
        self.spec.queue
    }

    /// No more verbs are issued; those in flight still complete.
    pub fn stop(&mut self) {
        self.stopping = true;
    }

    pub fn is_running(&self) -> bool {
        !self.is_finished()
    }

    pub fn is_finished(&self) -> bool {
        self.stopping
            && self
                .lanes
                .iter()
                .all(|l| !matches!(l.state, LaneState::Busy { .. }))
    }

    /// The next verb of every idle lane; `issue(lane, verb)` submits it and
    /// says whether it was accepted.
    pub fn poll(&mut self, now: Nanos, mut issue: impl FnMut(u32, &Verb) -> bool) {
        let started = *self.started.get_or_insert(now);
        if self.deadline == 0 {
            self.deadline = started + (self.spec.seconds * 1e9) as Nanos;
        }
        if now >= self.deadline {
            self.stopping = true;
        }
        if self.stopping {
            return;
        }
        // The verb is built where it is read: moving a kilobyte-sized verb
        // per issue was most of what the workload cost.
        let mut verb = self.scratch.take().expect("put back after every poll");
        while let Some(lane) = self.ready.pop() {
            let i = lane as usize;
            let (kind, issued, learning) = match self.lanes[i].state {
                LaneState::Busy { .. } => continue,
                LaneState::Unknown => (Opcode::Read, self.read_lane(i, 0, &mut verb), true),
                LaneState::HalfKnown => (Opcode::Read, self.read_lane(i, 1, &mut verb), true),
                LaneState::Idle => {
                    let pick = self.next() as usize % self.kinds.len();
                    let kind = self.kinds[pick];
                    let issued = match &self.contention {
                        Some(c) => {
                            c.make(kind, &mut verb);
                            Issued::Contended
                        }
                        None => self.make(i, kind, &mut verb),
                    };
                    (kind, issued, false)
                }
            };
            if !issue(lane, &verb) {
                // Refused for now (queue full): this lane goes first next time.
                self.ready.push(lane);
                break;
            }
            self.lanes[i].state = LaneState::Busy {
                kind,
                issued,
                learning,
            };
        }
        self.scratch = Some(verb);
    }

    fn target(&self) -> RegionRef {
        RegionRef {
            id: self.spec.region,
            key: self.spec.key,
        }
    }

    /// Where lane `i`'s bytes start, in both regions.
    fn base(&self, i: usize) -> u32 {
        ((self.spec.first_lane as usize + i) * LANE_BYTES) as u32
    }

    /// The link the workload's verbs go to.
    pub fn link(&self) -> LinkId {
        self.spec.link
    }

    /// A READ of half `half` of lane `i`'s remote bytes, into `verb`.
    fn read_lane(&self, i: usize, half: u8, verb: &mut Verb) -> Issued {
        *verb = Verb::Read {
            target: self.target(),
            offset: self.base(i) + u32::from(half) * READ_LEN as u32,
            local_region: self.spec.local_region,
            local_offset: self.base(i),
            len: READ_LEN as u16,
        };
        Issued::Read { half }
    }

    fn next(&mut self) -> u64 {
        self.rng.next_u64()
    }

    fn word(lane: &[u8; LANE_BYTES], w: usize) -> u64 {
        u64::from_le_bytes(lane[w * 8..w * 8 + 8].try_into().expect("eight bytes"))
    }

    /// Lane `i`'s next verb of `kind`, written into `verb`, and what it
    /// will do to the lane.
    fn make(&mut self, i: usize, kind: Opcode, verb: &mut Verb) -> Issued {
        let target = self.target();
        let base = self.base(i);
        let w = self.next() as usize % WORDS;
        let offset = base + (w * 8) as u32;
        let current = Self::word(&self.lanes[i].remote, w);
        // One verb in ten expects a stale value, so failed comparisons are
        // exercised (and must change nothing).
        let stale = self.next().is_multiple_of(10);
        match kind {
            Opcode::Read => {
                let half = (self.next() % 2) as u8;
                self.read_lane(i, half, verb)
            }
            Opcode::Write => {
                let len = 8 * (1 + self.next() as usize % 4);
                let at = 8 * (self.next() as usize % (WORDS + 1 - len / 8));
                let mut data = [0u8; 32];
                for chunk in data[..len].chunks_mut(8) {
                    chunk.copy_from_slice(&self.next().to_le_bytes());
                }
                *verb = Verb::Write {
                    target,
                    offset: base + at as u32,
                    data: Block::new(&data[..len]).expect("32 bytes fit"),
                };
                let (at, len) = (at as u8, len as u8);
                Issued::Write { at, len, data }
            }
            Opcode::CompareAndSwap => {
                let (expected, new) = (current.wrapping_add(u64::from(stale)), self.next());
                *verb = Verb::CompareAndSwap {
                    target,
                    offset,
                    expected,
                    new,
                };
                Issued::CompareAndSwap {
                    word: w as u8,
                    expected,
                    new,
                }
            }
            Opcode::FetchAdd => {
                let add = self.next() % 1000 + 1;
                *verb = Verb::FetchAdd {
                    target,
                    offset,
                    add,
                };
                Issued::FetchAdd { word: w as u8, add }
            }
            Opcode::Swap => {
                let new = self.next();
                *verb = Verb::Swap {
                    target,
                    offset,
                    new,
                };
                Issued::Swap { word: w as u8, new }
            }
            Opcode::MultiWordCommit => self.make_mcas(i, stale, verb),
            Opcode::Send => unreachable!("refused when the workload was built"),
            Opcode::BilateralSwap => {
                let at = base + BILATERAL_AT as u32;
                *verb = Verb::BilateralSwap {
                    target,
                    offset: at,
                    local_region: self.spec.local_region,
                    local_offset: at,
                    len: BILATERAL_LEN as u16,
                };
                Issued::BilateralSwap
            }
        }
    }

    /// A multi-word commit of two or more of lane `i`'s words in a row,
    /// the last one expecting a stale value if `stale`.
    fn make_mcas(&mut self, i: usize, stale: bool, verb: &mut Verb) -> Issued {
        let base = self.base(i);
        let count = 2 + self.next() as usize % (WORDS - 1);
        let first = self.next() as usize % (WORDS + 1 - count);
        let mut words = [McasWord::default(); MAX_MCAS_WORDS];
        let (mut expected, mut new) = ([0; WORDS], [0; WORDS]);
        for k in 0..count {
            let current = Self::word(&self.lanes[i].remote, first + k);
            expected[k] = if stale && k == count - 1 {
                current ^ 1
            } else {
                current
            };
            new[k] = self.next();
            words[k] = McasWord {
                offset: base + ((first + k) * 8) as u32,
                expected: expected[k],
                new: new[k],
            };
        }
        *verb = Verb::MultiWordCommit {
            target: self.target(),
            count: count as u8,
            words,
        };
        Issued::MultiWordCommit {
            first: first as u8,
            count: count as u8,
            expected,
            new,
        }
    }

    /// A lane's verb completed after `latency` nanoseconds.
    pub fn complete(
        &mut self,
        lane: u32,
        result: &Result<Output, VerbError>,
        latency: Nanos,
        now: Nanos,
    ) {
        if let Some(last) = self.last_completed_at.replace(now) {
            self.longest_gap = self.longest_gap.max(now.saturating_sub(last));
        }
        let i = lane as usize;
        let LaneState::Busy {
            kind,
            issued,
            learning,
        } = self.lanes[i].state
        else {
            // A completion for a lane with nothing in flight: never expected.
            self.mismatches += 1;
            return;
        };
        self.lanes[i].state = LaneState::Idle;
        self.ready.push(lane);
        if core::mem::take(&mut self.lanes[i].stale) && self.contention.is_none() {
            if let Ok(output) = result {
                // Not checked, but followed: a bilateral swap's local half
                // is this side's memory and landed whatever the target was.
                self.completed[kind.index()] += 1;
                let _ = self.apply(i, &issued, output, learning);
                self.lanes[i].state = LaneState::Unknown;
                return;
            }
            self.lanes[i].state = LaneState::Unknown;
        }
        match result {
            Ok(output) => {
                self.completed[kind.index()] += 1;
                let _ = self.latency.record(latency.max(1));
                if let Some(p) = self.phases.last_mut() {
                    let _ = p.latency.record(latency.max(1));
                    p.completed += 1;
                }
                let agrees = match &mut self.contention {
                    Some(c) => c.book(output),
                    None => self.apply(i, &issued, output, learning),
                };
                if !agrees {
                    self.mismatches += 1;
                }
                if learning && matches!(issued, Issued::Read { half: 0 }) {
                    self.lanes[i].state = LaneState::HalfKnown;
                }
            }
            Err(e) => {
                self.failed += 1;
                if let Some(p) = self.phases.last_mut() {
                    p.failed += 1;
                }
                match self.errors.iter_mut().find(|(n, _)| n == e) {
                    Some((_, c)) => *c += 1,
                    None => self.errors.push((*e, 1)),
                }
                // The model stays unknown after a failed first read; after
                // a peer restart the memory is a new incarnation's, for
                // every lane: those idle read it again, those busy do once
                // their verb is back.
                if self.contention.is_none() {
                    if learning {
                        self.lanes[i].state = LaneState::Unknown;
                    }
                    if matches!(e, VerbError::PeerRestarted) {
                        self.target_restarted();
                    }
                }
            }
        }
    }

    /// The target is a new incarnation: every lane's model is gone. Idle
    /// lanes read their bytes again; busy ones do once their verb is back.
    pub fn target_restarted(&mut self) {
        if self.contention.is_some() {
            return;
        }
        for lane in &mut self.lanes {
            match lane.state {
                LaneState::Busy { .. } => lane.stale = true,
                _ => lane.state = LaneState::Unknown,
            }
        }
    }

    /// Checks `output` against the model and applies the verb to it;
    /// false if they disagree.
    fn apply(&mut self, i: usize, issued: &Issued, output: &Output, learning: bool) -> bool {
        let landed = self.landed(i, issued);
        let lane = &mut self.lanes[i];
        let word = |lane: &Lane, w: u8| Self::word(&lane.remote, usize::from(w));
        let set = |lane: &mut Lane, w: u8, v: u64| {
            let at = usize::from(w) * 8;
            lane.remote[at..at + 8].copy_from_slice(&v.to_le_bytes());
        };
        match (*issued, output) {
            (Issued::Read { half }, Output::Read { len }) => {
                let span = usize::from(half) * READ_LEN..(usize::from(half) + 1) * READ_LEN;
                let ok = usize::from(*len) == READ_LEN
                    && (learning || landed == lane.remote[span.clone()]);
                lane.remote[span].copy_from_slice(&landed);
                lane.local[..READ_LEN].copy_from_slice(&landed);
                ok
            }
            (Issued::Write { at, len, data }, Output::Write) => {
                let (at, len) = (usize::from(at), usize::from(len));
                lane.remote[at..at + len].copy_from_slice(&data[..len]);
                true
            }
            (
                Issued::CompareAndSwap {
                    word: w,
                    expected,
                    new,
                },
                Output::CompareAndSwap { old, swapped },
            ) => {
                let before = word(lane, w);
                if *swapped {
                    set(lane, w, new);
                }
                *old == before && *swapped == (before == expected)
            }
            (Issued::FetchAdd { word: w, add }, Output::FetchAdd { old }) => {
                let before = word(lane, w);
                set(lane, w, before.wrapping_add(add));
                *old == before
            }
            (Issued::Swap { word: w, new }, Output::Swap { old }) => {
                let before = word(lane, w);
                set(lane, w, new);
                *old == before
            }
            (
                Issued::MultiWordCommit {
                    first,
                    count,
                    expected,
                    new,
                },
                Output::MultiWordCommit {
                    committed,
                    count: out_count,
                    old,
                },
            ) => {
                let n = usize::from(count);
                let mut before = [0; WORDS];
                for (k, b) in before[..n].iter_mut().enumerate() {
                    *b = word(lane, first + k as u8);
                }
                let all_match = expected[..n] == before[..n];
                if *committed {
                    for (k, &v) in new[..n].iter().enumerate() {
                        set(lane, first + k as u8, v);
                    }
                }
                count == *out_count && *committed == all_match && old[..n] == before[..n]
            }
            (Issued::BilateralSwap, Output::BilateralSwap { len }) => {
                let span = BILATERAL_AT..BILATERAL_AT + BILATERAL_LEN;
                let ok = usize::from(*len) == BILATERAL_LEN && landed == lane.remote[span.clone()];
                let mine = lane.local;
                lane.remote[span.clone()].copy_from_slice(&mine[span.clone()]);
                lane.local[span].copy_from_slice(&landed);
                ok
            }
            _ => false,
        }
    }

    /// The bytes a READ or bilateral swap of lane `i` landed in the local
    /// region (zeros for other verbs). The lane owns them and has one verb
    /// in flight, so nothing else wrote them since.
    fn landed(&self, i: usize, issued: &Issued) -> [u8; 32] {
        let at = match issued {
            Issued::Read { .. } => 0,
            Issued::BilateralSwap => BILATERAL_AT,
            _ => return [0; 32],
        };
        let mut bytes = [0; 32];
        let offset = self.base(i) + at as u32;
        self.memory
            .with_block(self.spec.local_region, offset, 32, |b| {
                bytes.copy_from_slice(b)
            });
        bytes
    }

    pub fn report(&self, now: Nanos) -> WorkloadReport {
        let contended = self.contention.is_some();
        let elapsed = self.started.map_or(0, |s| now.saturating_sub(s));
        let mut remote = Vec::with_capacity(self.lanes.len() * LANE_BYTES);
        let mut local = Vec::with_capacity(self.lanes.len() * LANE_BYTES);
        for l in &self.lanes {
            remote.extend_from_slice(&l.remote);
            local.extend_from_slice(&l.local);
        }
        WorkloadReport {
            running: self.is_running(),
            elapsed_s: elapsed as f64 / 1e9,
            completed: self.completed.iter().sum(),
            failed: self.failed,
            mismatches: self.mismatches,
            per_verb: Opcode::ALL
                .iter()
                .map(|k| (k.name().to_string(), self.completed[k.index()]))
                .filter(|(_, n)| *n > 0)
                .collect(),
            errors: self
                .errors
                .iter()
                .map(|(e, n)| (Outcome::of_verb::<()>(&Err(*e)).name().to_string(), *n))
                .collect(),
            latency: Percentiles::of(&self.latency),
            cdf: cdf_points(&self.latency),
            phases: self
                .phases
                .iter()
                .map(|p| PhaseReport {
                    name: p.name.clone(),
                    started_s: p.started.saturating_sub(self.started.unwrap_or(0)) as f64 / 1e9,
                    completed: p.completed,
                    failed: p.failed,
                    latency: Percentiles::of(&p.latency),
                    cdf: cdf_points(&p.latency),
                })
                .collect(),
            first_byte: self.spec.first_lane as usize * LANE_BYTES,
            longest_gap_us: self.longest_gap as f64 / 1e3,
            contended: self.contention.as_ref().map(Contention::counts),
            // Contended lanes model no bytes: nothing to expect.
            expected_remote: if contended {
                String::new()
            } else {
                to_hex(&remote)
            },
            expected_local: if contended {
                String::new()
            } else {
                to_hex(&local)
            },
        }
    }
}

/// What a workload's verbs are aimed at: a link of the queue, or a node
/// the queue's fabric reaches by whatever link or path serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Aim {
    Link(LinkId),
    Node(u64),
}

impl core::fmt::Display for Aim {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Aim::Link(l) => write!(f, "link {l}"),
            Aim::Node(n) => write!(f, "node {n}"),
        }
    }
}

/// A queue's workloads: at most one per link and one per node aimed at
/// through the fabric, and the report of the last one that finished on
/// each.
#[derive(Default)]
pub struct LinkWorkloads {
    /// Slot `i` aims at `aims[i]`: the links first, then nodes as
    /// workloads name them.
    aims: Vec<Aim>,
    running: Vec<Option<Workload>>,
    finished: Vec<Option<WorkloadReport>>,
}

impl LinkWorkloads {
    pub fn new(links: usize) -> LinkWorkloads {
        LinkWorkloads {
            aims: (0..links as LinkId).map(Aim::Link).collect(),
            running: (0..links).map(|_| None).collect(),
            finished: (0..links).map(|_| None).collect(),
        }
    }

    pub fn any_running(&self) -> bool {
        self.running.iter().any(Option::is_some)
    }

    fn slot(&self, aim: Aim) -> Option<usize> {
        self.aims.iter().position(|&a| a == aim)
    }

    /// Starts `spec` aimed at `aim`, checked against `memory` and the verbs
    /// the transport runs.
    pub fn start(
        &mut self,
        aim: Aim,
        spec: WorkloadSpec,
        memory: &SharedMemory,
        runs: impl Fn(Opcode) -> bool,
    ) -> Result<(), ControlError> {
        let slot = match (self.slot(aim), aim) {
            (Some(s), _) => s,
            (None, Aim::Node(_)) if self.aims.len() < 256 => {
                self.aims.push(aim);
                self.running.push(None);
                self.finished.push(None);
                self.aims.len() - 1
            }
            (None, _) => {
                return Err(ControlError::not_found(format!(
                    "no {aim} on this queue: it has {} links",
                    self.aims
                        .iter()
                        .filter(|a| matches!(a, Aim::Link(_)))
                        .count()
                )));
            }
        };
        if self.running[slot].is_some() {
            return Err(ControlError::conflict(format!(
                "a workload is already running on {aim}"
            )));
        }
        let workload = Workload::new(spec, memory, runs).map_err(ControlError::bad_request)?;
        self.running[slot] = Some(workload);
        self.finished[slot] = None;
        Ok(())
    }

    pub fn begin_phase(&mut self, aim: Aim, name: String, now: Nanos) -> Result<(), ControlError> {
        match self.slot(aim).and_then(|s| self.running[s].as_mut()) {
            Some(w) => w
                .begin_phase(name, now)
                .map_err(|e| ControlError::bad_request(format!("no phase begun on {aim}: {e}"))),
            None => Err(ControlError::conflict(format!(
                "no workload is running on {aim}"
            ))),
        }
    }

    pub fn status(&self, aim: Aim, now: Nanos) -> Result<WorkloadReport, ControlError> {
        let never =
            || ControlError::not_found(format!("no workload has run on {aim} of this queue"));
        let s = self.slot(aim).ok_or_else(never)?;
        match (&self.running[s], &self.finished[s]) {
            (Some(w), _) => Ok(w.report(now)),
            (_, Some(done)) => Ok(done.clone()),
            _ => Err(never()),
        }
    }

    /// No more verbs; those in flight still complete.
    pub fn stop(&mut self) {
        for w in self.running.iter_mut().flatten() {
            w.stop();
        }
    }

    /// Lets every running workload issue verbs through `issue(aim, slot,
    /// lane, verb)`, and files the reports of those that finished.
    pub fn poll(&mut self, now: Nanos, mut issue: impl FnMut(Aim, u16, u32, &Verb) -> bool) {
        for (i, slot) in self.running.iter_mut().enumerate() {
            let Some(w) = slot else { continue };
            let aim = self.aims[i];
            w.poll(now, |lane, verb| issue(aim, i as u16, lane, verb));
            if w.is_finished() {
                self.finished[i] = Some(w.report(now));
                *slot = None;
            }
        }
    }

    /// The node at the other end of `link` (a link or a path), node `node`,
    /// restarted: the workloads aimed at either relearn its memory.
    pub fn peer_restarted(&mut self, link: LinkId, node: u64) {
        for (i, w) in self.running.iter_mut().enumerate() {
            let aimed = match self.aims[i] {
                Aim::Link(l) => l == link,
                Aim::Node(n) => n == node,
            };
            if let (true, Some(w)) = (aimed, w) {
                w.target_restarted();
            }
        }
    }

    /// A verb of the workload in slot `slot` completed.
    pub fn complete(
        &mut self,
        slot: u16,
        lane: u32,
        result: &Result<Output, VerbError>,
        latency: Nanos,
        now: Nanos,
    ) {
        if let Some(Some(w)) = self.running.get_mut(usize::from(slot)) {
            w.complete(lane, result, latency, now);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use oae_proto::{Permissions, RegionSpec, SharedMemory};

    #[test]
    fn phases_are_bounded_in_number_and_name() {
        let mut memory = SharedMemory::new();
        memory
            .register(RegionSpec {
                id: 2,
                key: 2,
                len: 4096,
                permissions: Permissions::ALL,
            })
            .unwrap();
        let spec = WorkloadSpec {
            region: 1,
            key: 1,
            local_region: 2,
            lanes: 1,
            seconds: 1.0,
            ..WorkloadSpec::default()
        };
        let mut w = Workload::new(spec, &memory, |k| k == Opcode::CompareAndSwap).unwrap();
        let long = "x".repeat(MAX_PHASE_NAME_BYTES + 1);
        let err = w.begin_phase(long, 0).unwrap_err();
        assert!(err.contains(&MAX_PHASE_NAME_BYTES.to_string()), "{err}");
        for n in 0..MAX_WORKLOAD_PHASES {
            w.begin_phase(format!("phase {n}"), n as Nanos).unwrap();
        }
        let err = w.begin_phase("one more".into(), 99).unwrap_err();
        assert!(
            err.contains(&format!("{MAX_WORKLOAD_PHASES} phases")) && err.contains("new workload"),
            "{err}"
        );
        let names: Vec<String> = w.report(100).phases.into_iter().map(|p| p.name).collect();
        assert_eq!(names.len(), MAX_WORKLOAD_PHASES, "{names:?}");
        assert_eq!(names[0], "phase 0");
    }
}

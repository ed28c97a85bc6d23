//! The shared region that stands in for the PCIe BAR: a file (in /dev/shm,
//! or any path both processes can open) mapped shared by both sides.
//!
//! The creator sizes and fills the header, then publishes the magic last
//! with a Release store, so an attacher that sees the magic (Acquire) sees a
//! complete header. An attacher refuses a region whose magic, version, size
//! or geometry is wrong, saying what it found and what it expected.
//!
//! This is the one module that touches raw memory (`mmap`/`munmap` and the
//! view of the mapping as atomics); [`crate::cut`] guards the mapping, and
//! [`crate::words`] maps plain files of words the same way.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::bilateral::{MAX_SLOT_BATCH, SlotView, slot_words};
use crate::cost::{CostModel, MAX_COST_NS};
use crate::cut::{Guard, GuardError};
use crate::fito::{Mitigations, Wakeup};
use crate::layout::*;
use crate::liveness::SideBlock;
use crate::report::{
    ClaimReport, MitigationsReport, RegionReport, RingReport, SideReport, SlotStates,
};
use crate::ring::RingView;

/// Which end of the link a process plays.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    Host,
    Ipu,
}

impl Side {
    pub fn peer(self) -> Side {
        match self {
            Side::Host => Side::Ipu,
            Side::Ipu => Side::Host,
        }
    }
}

/// Everything the creator decides; the attacher reads it back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RegionConfig {
    pub mode: Mode,
    pub geometry: Geometry,
    pub cost: CostModel,
    pub mitigations: Mitigations,
    pub wakeup: Wakeup,
}

impl Default for RegionConfig {
    fn default() -> Self {
        RegionConfig {
            mode: Mode::Fito,
            geometry: Geometry::default(),
            cost: CostModel::default(),
            mitigations: Mitigations::none(),
            wakeup: Wakeup::Interrupt,
        }
    }
}

/// Why a region could not be created or attached.
#[derive(Debug, thiserror::Error)]
pub enum RegionError {
    #[error("{op} {path}: {source}")]
    Io {
        op: &'static str,
        path: PathBuf,
        source: io::Error,
    },
    #[error("{path}: file is {len} bytes, shorter than the {HEADER_BYTES}-byte header")]
    TooShortForHeader { path: PathBuf, len: u64 },
    #[error("{path}: magic is 0; the creator has not finished initialising it")]
    NotReady { path: PathBuf },
    #[error(
        "{path}: bad magic {found:#018x}, expected {MAGIC:#018x} (\"OAESWAP1\"): not a swap ring region"
    )]
    BadMagic { path: PathBuf, found: u64 },
    #[error("{path}: layout version {found}, this build speaks version {VERSION}")]
    BadVersion { path: PathBuf, found: u64 },
    #[error("{path}: header says {header} bytes but the file is {file} bytes")]
    SizeMismatch {
        path: PathBuf,
        header: u64,
        file: u64,
    },
    #[error("{path}: record size {found} bytes, expected {RECORD_BYTES}")]
    BadRecordSize { path: PathBuf, found: u64 },
    #[error("{path}: unknown mode {found}, expected 1 (FITO) or 2 (bilateral)")]
    BadMode { path: PathBuf, found: u64 },
    #[error(
        "{path}: geometry of {ring_capacity} records per ring, {slots} slots of {slot_batch} records \
         is out of bounds (expected 1..={MAX_RING_CAPACITY} records, at most {MAX_SLOTS} slots, \
         1..={MAX_SLOT_BATCH} records per slot)"
    )]
    GeometryOutOfBounds {
        path: PathBuf,
        ring_capacity: u64,
        slots: u64,
        slot_batch: u64,
    },
    #[error(
        "{path}: geometry of {ring_capacity} records per ring, {slots} slots of {slot_batch} records \
         needs {need} bytes but the header's total size is {total} bytes"
    )]
    GeometryDoesNotFit {
        path: PathBuf,
        ring_capacity: u64,
        slots: u64,
        slot_batch: u64,
        need: u64,
        total: u64,
    },
    #[error(
        "geometry {0:?} is out of bounds (records 1..={MAX_RING_CAPACITY}, slots <= {MAX_SLOTS}, \
         records per slot 1..={MAX_SLOT_BATCH})"
    )]
    InvalidGeometry(Geometry),
    #[error(
        "{path}: the cost model ({cost}) charges more than {MAX_COST_NS} ns (1 ms) an \
         interaction"
    )]
    CostOutOfBounds { path: PathBuf, cost: CostModel },
    #[error("{path}: {source}")]
    Guard { path: PathBuf, source: GuardError },
}

/// A mapped region. Unmapped on drop; the creator's drop also removes the
/// file unless [`Region::keep_file`] was called.
pub struct Region {
    mapping: Mapping,
    path: PathBuf,
    remove_on_drop: bool,
    shape: Shape,
}

/// What the header said when it was validated. The peer can write the
/// header at any time, so every view is cut from this copy, never from a
/// fresh read: a host that scribbles on its header cannot make the
/// dataplane index outside the mapping.
#[derive(Clone, Copy, Debug)]
struct Shape {
    mode: Mode,
    geometry: Geometry,
    layout: Layout,
    /// Costs, mitigations and wake-up as validated: a cost read afresh
    /// would let the peer make every access spin as long as it wrote.
    config: RegionConfig,
}

/// A shared mapping of a file, viewed as words, guarded against the file
/// being cut short under it ([`crate::cut`]). Unmapped on drop.
pub(crate) struct Mapping {
    base: *mut libc::c_void,
    len: usize,
    /// Freed before the mapping is unmapped, so the handler never acts on
    /// an address range that may already be someone else's.
    guard: Option<Guard>,
}

#[allow(unsafe_code)]
// SAFETY: `Mapping` owns its mapping; all access goes through `&[AtomicU64]`
// views, which are `Sync`, and the raw pointer is never written through.
unsafe impl Send for Mapping {}
#[allow(unsafe_code)]
// SAFETY: as above; shared references only hand out atomics.
unsafe impl Sync for Mapping {}

impl Mapping {
    pub(crate) fn new(
        file: &File,
        path: &Path,
        len: u64,
        set_len: bool,
    ) -> Result<Mapping, RegionError> {
        if set_len {
            file.set_len(len).map_err(|source| RegionError::Io {
                op: "size",
                path: path.to_path_buf(),
                source,
            })?;
            // Pages reserved now: a full /dev/shm is an error here, not a
            // SIGBUS at the first touch of a page it had no room for.
            let reserved = i64::try_from(len)
                .map_err(|_| libc::EFBIG)
                .and_then(|len| nix::fcntl::posix_fallocate(file, 0, len).map_err(|e| e as i32));
            reserved.map_err(|errno| RegionError::Io {
                op: "reserve",
                path: path.to_path_buf(),
                source: io::Error::from_raw_os_error(errno),
            })?;
        }
        let len = usize::try_from(len).expect("region fits the address space");
        #[allow(unsafe_code)]
        // SAFETY: a fresh shared mapping of `len` bytes of an open file
        // descriptor; the kernel picks the address, nothing aliases it yet.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                file.as_raw_fd(),
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(RegionError::Io {
                op: "mmap",
                path: path.to_path_buf(),
                source: io::Error::last_os_error(),
            });
        }
        let mut mapping = Mapping {
            base,
            len,
            guard: None,
        };
        #[allow(unsafe_code)]
        // SAFETY: `base..base + len` was just mapped shared here, and `Drop`
        // frees the guard before it unmaps. On failure `mapping` drops
        // here and unmaps.
        let guard = unsafe { Guard::new(base, len) };
        mapping.guard = Some(guard.map_err(|source| RegionError::Guard {
            path: path.to_path_buf(),
            source,
        })?);
        Ok(mapping)
    }

    pub(crate) fn cut(&self) -> bool {
        self.guard.as_ref().is_some_and(Guard::cut)
    }

    pub(crate) fn words(&self) -> &[AtomicU64] {
        #[allow(unsafe_code)]
        // SAFETY: `base` is page-aligned (so 8-aligned) and maps `len` bytes
        // that stay mapped until `self` drops; the slice borrows `self`, so
        // it cannot outlive the mapping.
        // `AtomicU64` has the layout of `u64` and allows shared mutation, so
        // concurrent writes from the peer are not data races.
        unsafe {
            std::slice::from_raw_parts(self.base.cast::<AtomicU64>(), self.len / 8)
        }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        drop(self.guard.take());
        #[allow(unsafe_code)]
        // SAFETY: `base`/`len` are exactly the mapping made in `new`, and no
        // view outlives `self` (they borrow it).
        unsafe {
            libc::munmap(self.base, self.len);
        }
    }
}

/// Creates `path`, which must not exist (not even as a symbolic link),
/// readable and writable by its owner only: what a region holds (keys,
/// verbs' data, registered memory) is no one else's.
pub(crate) fn create_private(path: &Path) -> Result<File, RegionError> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
        .map_err(|source| RegionError::Io {
            op: "create",
            path: path.to_path_buf(),
            source,
        })
}

impl Region {
    /// Creates `path` (which must not exist, not even as a symbolic link),
    /// readable and writable by its owner only (it carries region keys and
    /// verbs' data), sizes it for `config` and publishes a complete header.
    pub fn create(path: impl AsRef<Path>, config: &RegionConfig) -> Result<Region, RegionError> {
        let path = path.as_ref().to_path_buf();
        let (Some(bytes), Some(layout)) = (config.geometry.bytes(), config.geometry.layout())
        else {
            return Err(RegionError::InvalidGeometry(config.geometry));
        };
        if config.cost.largest_ns() > MAX_COST_NS {
            return Err(RegionError::CostOutOfBounds {
                path,
                cost: config.cost,
            });
        }
        let file = create_private(&path)?;
        let mapping = match Mapping::new(&file, &path, bytes, true) {
            Ok(m) => m,
            Err(e) => {
                let _ = std::fs::remove_file(&path);
                return Err(e);
            }
        };
        let region = Region {
            mapping,
            path,
            remove_on_drop: true,
            shape: Shape {
                mode: config.mode,
                geometry: config.geometry,
                layout,
                config: *config,
            },
        };
        let w = region.words();
        w[W_VERSION].store(VERSION, Ordering::Relaxed);
        w[W_TOTAL_BYTES].store(bytes, Ordering::Relaxed);
        w[W_MODE].store(config.mode as u64, Ordering::Relaxed);
        w[W_RING_CAPACITY].store(config.geometry.ring_capacity, Ordering::Relaxed);
        w[W_RECORD_BYTES].store(RECORD_BYTES, Ordering::Relaxed);
        w[W_SLOTS].store(config.geometry.slots, Ordering::Relaxed);
        w[W_SLOT_BATCH].store(config.geometry.slot_batch, Ordering::Relaxed);
        let m = config.mitigations;
        let flags = (m.write_batching as u64 * FLAG_WRITE_BATCHING)
            | (m.prestaged_decisions as u64 * FLAG_PRESTAGED)
            | (m.prefetch as u64 * FLAG_PREFETCH)
            | ((config.wakeup == Wakeup::Poll) as u64 * FLAG_HOST_POLLS);
        w[W_FLAGS].store(flags, Ordering::Relaxed);
        for (i, c) in config.cost.to_words().into_iter().enumerate() {
            w[W_COST + i].store(c, Ordering::Relaxed);
        }
        w[W_MAGIC].store(MAGIC, Ordering::Release);
        Ok(region)
    }

    /// Attaches to an existing region after validating its header.
    pub fn open(path: impl AsRef<Path>) -> Result<Region, RegionError> {
        let path = path.as_ref().to_path_buf();
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)
            .map_err(|source| RegionError::Io {
                op: "open",
                path: path.clone(),
                source,
            })?;
        let len = file
            .metadata()
            .map_err(|source| RegionError::Io {
                op: "stat",
                path: path.clone(),
                source,
            })?
            .len();
        if len < HEADER_BYTES as u64 {
            return Err(RegionError::TooShortForHeader { path, len });
        }
        let mapping = Mapping::new(&file, &path, len, false)?;
        let shape = validate(mapping.words(), &path, len)?;
        Ok(Region {
            mapping,
            path,
            remove_on_drop: false,
            shape,
        })
    }

    /// Attaches, retrying while the creator has not yet published the magic,
    /// at most `attempts` times, yielding between tries.
    pub fn open_when_ready(path: impl AsRef<Path>, attempts: u32) -> Result<Region, RegionError> {
        let path = path.as_ref();
        let mut last = None;
        for _ in 0..attempts.max(1) {
            match Self::open(path) {
                Err(e @ (RegionError::NotReady { .. } | RegionError::TooShortForHeader { .. })) => {
                    last = Some(e)
                }
                Err(RegionError::Io { source, .. }) if source.kind() == io::ErrorKind::NotFound => {
                    last = Some(RegionError::NotReady {
                        path: path.to_path_buf(),
                    })
                }
                other => return other,
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        Err(last.expect("at least one attempt"))
    }

    /// The whole region as words. Every access to shared memory goes
    /// through these atomics: the peer process writes concurrently.
    pub fn words(&self) -> &[AtomicU64] {
        self.mapping.words()
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// True once the file was found cut short under the mapping (another
    /// process truncated it): the region now reads zeros and nothing
    /// written to it reaches the other side. Stop serving it.
    pub fn cut(&self) -> bool {
        self.mapping.cut()
    }

    /// Leaves the file in place when this (creator's) handle drops.
    pub fn keep_file(&mut self) {
        self.remove_on_drop = false;
    }

    /// The mode as validated when the region was created or opened.
    pub fn mode(&self) -> Mode {
        self.shape.mode
    }

    /// The geometry as validated when the region was created or opened.
    pub fn geometry(&self) -> Geometry {
        self.shape.geometry
    }

    /// The configuration as the creator set it and this handle validated.
    pub fn config(&self) -> RegionConfig {
        self.shape.config
    }

    /// One of the four rings (`RING_*` in [`crate::layout`]).
    pub fn ring(&self, which: usize) -> RingView<'_> {
        let l = self.shape.layout;
        let at = l.rings[which];
        RingView::new(
            &self.words()[at..at + l.ring_words],
            self.geometry().ring_capacity as usize,
        )
    }

    pub fn slot_count(&self) -> usize {
        self.geometry().slots as usize
    }

    pub fn slot(&self, index: usize) -> SlotView<'_> {
        assert!(
            index < self.slot_count(),
            "slot {index} out of {}",
            self.slot_count()
        );
        let batch = self.geometry().slot_batch as usize;
        let words = slot_words(batch);
        let at = self.shape.layout.slots + index * words;
        SlotView::new(&self.words()[at..at + words], batch)
    }

    /// The word a host process claims the verb rings with
    /// ([`crate::owner`]): they are single-producer single-consumer, so one
    /// host process at a time.
    pub fn ring_owner_word(&self) -> &AtomicU64 {
        &self.words()[W_RING_OWNER]
    }

    /// A side's header block (liveness counter, pid, stats).
    pub fn side(&self, side: Side) -> SideBlock<'_> {
        let at = match side {
            Side::Host => W_HOST_SIDE,
            Side::Ipu => W_IPU_SIDE,
        };
        SideBlock::new(&self.words()[at..at + SIDE_WORDS])
    }

    /// Registers this process as `side`.
    pub fn attach_as(&self, side: Side) -> SideBlock<'_> {
        let block = self.side(side);
        block.attach(std::process::id());
        block
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        if self.remove_on_drop {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

fn validate(w: &[AtomicU64], path: &Path, file_len: u64) -> Result<Shape, RegionError> {
    let path = path.to_path_buf();
    let magic = w[W_MAGIC].load(Ordering::Acquire);
    if magic == 0 {
        return Err(RegionError::NotReady { path });
    }
    if magic != MAGIC {
        return Err(RegionError::BadMagic { path, found: magic });
    }
    let version = w[W_VERSION].load(Ordering::Relaxed);
    if version != VERSION {
        return Err(RegionError::BadVersion {
            path,
            found: version,
        });
    }
    let total = w[W_TOTAL_BYTES].load(Ordering::Relaxed);
    if total != file_len {
        return Err(RegionError::SizeMismatch {
            path,
            header: total,
            file: file_len,
        });
    }
    let record = w[W_RECORD_BYTES].load(Ordering::Relaxed);
    if record != RECORD_BYTES {
        return Err(RegionError::BadRecordSize {
            path,
            found: record,
        });
    }
    let mode = w[W_MODE].load(Ordering::Relaxed);
    let Some(mode) = Mode::from_word(mode) else {
        return Err(RegionError::BadMode { path, found: mode });
    };
    let geometry = Geometry {
        ring_capacity: w[W_RING_CAPACITY].load(Ordering::Relaxed),
        slots: w[W_SLOTS].load(Ordering::Relaxed),
        slot_batch: w[W_SLOT_BATCH].load(Ordering::Relaxed),
    };
    let (ring_capacity, slots, slot_batch) =
        (geometry.ring_capacity, geometry.slots, geometry.slot_batch);
    let (Some(need), Some(layout)) = (geometry.bytes(), geometry.layout()) else {
        return Err(RegionError::GeometryOutOfBounds {
            path,
            ring_capacity,
            slots,
            slot_batch,
        });
    };
    if need > total {
        return Err(RegionError::GeometryDoesNotFit {
            path,
            ring_capacity,
            slots,
            slot_batch,
            need,
            total,
        });
    }
    let flags = w[W_FLAGS].load(Ordering::Relaxed);
    let cost = CostModel::from_words(std::array::from_fn(|i| {
        w[W_COST + i].load(Ordering::Relaxed)
    }));
    if cost.largest_ns() > MAX_COST_NS {
        return Err(RegionError::CostOutOfBounds { path, cost });
    }
    let config = RegionConfig {
        mode,
        geometry,
        cost,
        mitigations: Mitigations {
            write_batching: flags & FLAG_WRITE_BATCHING != 0,
            prestaged_decisions: flags & FLAG_PRESTAGED != 0,
            prefetch: flags & FLAG_PREFETCH != 0,
        },
        wakeup: if flags & FLAG_HOST_POLLS != 0 {
            Wakeup::Poll
        } else {
            Wakeup::Interrupt
        },
    };
    Ok(Shape {
        mode,
        geometry,
        layout,
        config,
    })
}

/// A region name unique to this process and call, under /dev/shm.
pub fn unique_shm_path(prefix: &str) -> PathBuf {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    PathBuf::from(format!("/dev/shm/{prefix}-{}-{n}", std::process::id()))
}

impl Region {
    /// A snapshot of the region for operators (`oaectl swap-ring`): header,
    /// both sides' liveness and counters, every ring's indexes, and the
    /// swap slots by state. Reads only; neither side notices.
    pub fn report(&self) -> RegionReport {
        use crate::bilateral::{Phase, SlotReport};
        use crate::liveness::{
            STAT_ABORTED, STAT_COMMITTED, STAT_LOST_RACES, STAT_NONPOSTED_READS, STAT_RECEIVED,
            STAT_REFUSED_FULL, STAT_SENT, STAT_SWAPS, STAT_WITHDRAWN,
        };
        let config = self.config();
        let claim = |word: &AtomicU64| {
            crate::owner::Claim::of(word.load(Ordering::Acquire)).map(|c| ClaimReport {
                pid: c.pid,
                generation: c.generation,
            })
        };
        let side = |s: Side| {
            let b = self.side(s);
            SideReport {
                pid: b.pid(),
                attachments: b.attachments(),
                interactions: b.interactions(),
                sent: b.stat(STAT_SENT),
                received: b.stat(STAT_RECEIVED),
                refused_full: b.stat(STAT_REFUSED_FULL),
                committed: b.stat(STAT_COMMITTED),
                aborted: b.stat(STAT_ABORTED),
                swaps: b.stat(STAT_SWAPS),
                withdrawn: b.stat(STAT_WITHDRAWN),
                lost_races: b.stat(STAT_LOST_RACES),
                nonposted_reads: b.stat(STAT_NONPOSTED_READS),
            }
        };
        let rings = ["messages", "decisions", "verb_requests", "verb_responses"]
            .iter()
            .enumerate()
            .map(|(i, name)| {
                let r = self.ring(i);
                RingReport {
                    ring: name.to_string(),
                    capacity: r.capacity(),
                    head: r.head(),
                    tail: r.tail(),
                    queued: r.tail().wrapping_sub(r.head()),
                    doorbells: r.doorbells(),
                    refused_full: r.refused_full(),
                }
            })
            .collect();
        let mut states = SlotStates::default();
        for i in 0..self.slot_count() {
            match self.slot(i).inspect() {
                SlotReport::Consistent(ctl) => match ctl.phase {
                    Phase::Idle => states.idle += 1,
                    Phase::Offered => states.offered += 1,
                    Phase::Swapped => states.swapped += 1,
                },
                SlotReport::HalfApplied { .. } => states.half_applied += 1,
                SlotReport::Corrupt { .. } => states.corrupt += 1,
            }
        }
        RegionReport {
            path: self.path().display().to_string(),
            version: crate::layout::VERSION,
            mode: match config.mode {
                Mode::Fito => "fito",
                Mode::Bilateral => "bilateral",
            }
            .to_string(),
            ring_capacity: config.geometry.ring_capacity,
            slots: config.geometry.slots,
            slot_batch: config.geometry.slot_batch,
            cost: config.cost.to_string(),
            mitigations: MitigationsReport {
                write_batching: config.mitigations.write_batching,
                prestaged_decisions: config.mitigations.prestaged_decisions,
                prefetch: config.mitigations.prefetch,
            },
            host_wakeup: format!("{:?}", config.wakeup).to_lowercase(),
            host: side(Side::Host),
            ipu: side(Side::Ipu),
            rings,
            slot_states: states,
            ring_claim: claim(self.ring_owner_word()),
            slot_claims: (0..self.slot_count())
                .map(|i| claim(self.slot(i).owner_word()))
                .collect(),
        }
    }
}

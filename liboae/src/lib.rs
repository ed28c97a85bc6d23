//! liboae: OAE verbs from C, C++ or any language with a C FFI.
//!
//! A program attaches to the host ring of a running `oaed` (`[host] ring`
//! in its configuration), posts verbs against the peer's registered memory
//! and polls their completions, as a libibverbs program posts work requests
//! and polls a completion queue. Every posted verb completes exactly once:
//! with `OAE_WC_SUCCESS` and its result, or with a status that says why it
//! had no effect at the target. Functions return 0 (or a count) on success
//! and a negative `OAE_ERR_*` code on failure; `oae_last_error` tells the
//! details of the last failure on the calling thread, `oae_strerror` names
//! any code.
//!
//! The header, `include/oae.h`, is generated from this file by
//! `cargo xtask c-header`; `cargo xtask install-c` installs the libraries,
//! the header and a pkg-config file (`oae.pc`).

#![allow(non_camel_case_types)]

use std::cell::RefCell;
use std::ffi::{CStr, CString, c_char, c_int};
use std::path::Path;
use std::time::Duration;

use oae_client::api::{
    Completion, Destination, LocalSubmission, LocalVerb, ReceivePost, Received, Submission,
};
use oae_client::control::{Client, ErrorCode};
use oae_client::host::{HostAnswer, HostQueue, SharedWords};
use oae_client::outcome::Outcome;
use oae_client::proto::verb::{MAX_MCAS_WORDS, Output};
use oae_client::proto::{Block, McasWord, Opcode, RegionRef, Verb};

mod codes;
pub use codes::*;

/// A host program's queue on a dataplane's host ring. Opaque to C.
pub struct oae_queue {
    queue: HostQueue,
    /// Posted verbs and receives by the id the ring carries, so a failed
    /// completion still names the caller's `wr_id` and what it was.
    posted: Vec<Option<Posted>>,
    free: Vec<u32>,
    /// Where verbs posted from now on go.
    to: Destination,
}

/// What a ring id stands for until it completes.
#[derive(Clone, Copy)]
enum Posted {
    Verb {
        wr_id: u64,
        kind: Opcode,
    },
    /// The caller's buffer its message is copied into.
    Receive {
        wr_id: u64,
        buf: *mut u8,
        len: u16,
    },
}

/// One word of a multi-word commit.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct oae_mcas_word {
    /// Byte offset in the region, 8-aligned.
    pub offset: u32,
    pub expected: u64,
    pub desired: u64,
}

/// A completion: the verb's `wr_id`, its status (`OAE_WC_*`) and, on
/// success, its result.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct oae_wc {
    pub wr_id: u64,
    /// `OAE_WC_SUCCESS`, or why the verb had no effect at the target.
    pub status: u32,
    /// `OAE_OP_*`: which verb this completes.
    pub opcode: u32,
    /// From the dataplane's burst that took the verb to the one that
    /// completed it, in nanoseconds.
    pub latency_ns: u64,
    /// CAS, FETCH-ADD, SWAP: the word before the verb.
    pub old: u64,
    /// CAS: 1 if it swapped.
    pub swapped: u8,
    /// MULTI-WORD COMMIT: 1 if every word matched and all were written.
    pub committed: u8,
    /// MULTI-WORD COMMIT: words in `mcas_old`.
    pub count: u8,
    pub reserved: u8,
    /// READ, BILATERAL SWAP: bytes that landed in the verb's local block
    /// (read them with `oae_region_read`). RECV: the message's length.
    pub len: u32,
    /// RECV: `OAE_WC_WITH_IMM` if the message came with `imm_data`.
    pub wc_flags: u32,
    /// RECV: the SEND's immediate data.
    pub imm_data: u32,
    /// MULTI-WORD COMMIT: each word before the verb.
    pub mcas_old: [u64; 8],
}

// A completion carries no data inline: it stays two cache lines.
const _: () = assert!(size_of::<oae_wc>() <= 128);

thread_local! {
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
}

/// Records `why` for `oae_last_error` and returns `code`.
fn fail(code: c_int, why: impl Into<String>) -> c_int {
    let text = CString::new(why.into().replace('\0', " ")).unwrap_or_default();
    LAST_ERROR.with(|e| *e.borrow_mut() = text);
    code
}

/// The details of the last call that failed on this thread (an empty
/// string if none did). Valid until the next failing call on the thread.
#[unsafe(no_mangle)]
pub extern "C" fn oae_last_error() -> *const c_char {
    LAST_ERROR.with(|e| e.borrow().as_ptr())
}

/// What a code means: an `OAE_ERR_*` a function returned, or an
/// `OAE_WC_*` status of a completion. Never NULL; a static string.
#[unsafe(no_mangle)]
pub extern "C" fn oae_strerror(code: c_int) -> *const c_char {
    codes::describe(code).as_ptr()
}

/// Reads a C string argument.
///
/// SAFETY (callers): `s` is NULL or points to a NUL-terminated string that
/// lives for the call.
unsafe fn text<'a>(s: *const c_char, what: &str) -> Result<&'a str, c_int> {
    if s.is_null() {
        return Err(fail(OAE_ERR_INVALID, format!("{what} is NULL")));
    }
    // SAFETY: not NULL, and NUL-terminated by the caller's contract.
    unsafe { CStr::from_ptr(s) }
        .to_str()
        .map_err(|_| fail(OAE_ERR_INVALID, format!("{what} is not UTF-8")))
}

/// Attaches to the host ring at `ring_path` (the `[host] ring` of a running
/// `oaed`), waiting up to about a second for the dataplane to create it.
/// On success stores the queue in `*queue` and returns 0.
///
/// # Safety
/// `ring_path` is a NUL-terminated string; `queue` points to writable
/// storage for one pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn oae_queue_open(
    ring_path: *const c_char,
    queue: *mut *mut oae_queue,
) -> c_int {
    // SAFETY: the caller's contract above.
    let path = match unsafe { text(ring_path, "ring_path") } {
        Ok(p) => p,
        Err(code) => return code,
    };
    if queue.is_null() {
        return fail(OAE_ERR_INVALID, "queue is NULL");
    }
    match HostQueue::attach(Path::new(path), 200) {
        Ok(q) => {
            let handle = Box::new(oae_queue {
                queue: q,
                posted: Vec::new(),
                free: Vec::new(),
                to: Destination::FirstLink,
            });
            // SAFETY: `queue` is not NULL and writable by the contract.
            unsafe { *queue = Box::into_raw(handle) };
            0
        }
        Err(e) => fail(OAE_ERR_ATTACH, e.to_string()),
    }
}

/// Detaches and frees the queue. Verbs still in flight complete at the
/// dataplane, unseen. NULL is ignored.
///
/// # Safety
/// `queue` is NULL or a queue from `oae_queue_open` not closed before.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn oae_queue_close(queue: *mut oae_queue) {
    if !queue.is_null() {
        // SAFETY: made by `Box::into_raw` in `oae_queue_open`, closed once.
        drop(unsafe { Box::from_raw(queue) });
    }
}

/// Verbs posted and not yet polled.
///
/// # Safety
/// `queue` is NULL or an open queue.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn oae_queue_outstanding(queue: *const oae_queue) -> c_int {
    // SAFETY: NULL or an open queue, by the contract.
    match unsafe { queue.as_ref() } {
        Some(q) => c_int::try_from(q.queue.outstanding()).unwrap_or(c_int::MAX),
        None => fail(OAE_ERR_INVALID, "queue is NULL"),
    }
}

/// The slot of a bilateral ring this queue holds (each process its own),
/// or 0 on a FITO ring (one process).
///
/// # Safety
/// `queue` is NULL or an open queue.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn oae_queue_slot(queue: *const oae_queue) -> c_int {
    // SAFETY: NULL or an open queue, by the contract above.
    match unsafe { queue.as_ref() } {
        Some(q) => q
            .queue
            .slot()
            .map_or(0, |s| c_int::try_from(s).unwrap_or(c_int::MAX)),
        None => fail(OAE_ERR_INVALID, "queue is NULL"),
    }
}

/// Sends the verbs posted on `queue` from now on to node `node` (its id),
/// by the dataplane's link to it or a path through its fabric, instead of
/// the ring queue's first link. A node the dataplane has no way to is
/// refused verb by verb, `OAE_WC_NO_ROUTE`.
///
/// # Safety
/// `queue` is NULL or an open queue, used by one thread at a time.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn oae_queue_to_node(queue: *mut oae_queue, node: u64) -> c_int {
    // SAFETY: the caller's contract.
    unsafe { send_to(queue, Destination::Node(node)) }
}

/// Sends the verbs posted on `queue` from now on to link `link` of the
/// ring's queue (its peers in configuration order; 0 is where verbs go
/// unless told otherwise). A link the queue does not have is refused verb
/// by verb, `OAE_WC_NO_SUCH_LINK`.
///
/// # Safety
/// `queue` is NULL or an open queue, used by one thread at a time.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn oae_queue_to_link(queue: *mut oae_queue, link: u16) -> c_int {
    // SAFETY: the caller's contract.
    unsafe { send_to(queue, Destination::Link(link)) }
}

/// Where the verbs posted on `queue` from now on go.
///
/// SAFETY (callers): `queue` is NULL or an open queue used by one thread.
unsafe fn send_to(queue: *mut oae_queue, to: Destination) -> c_int {
    // SAFETY: the callers' contract.
    match unsafe { queue_mut(queue) } {
        Ok(q) => {
            q.to = to;
            0
        }
        Err(code) => code,
    }
}

/// SAFETY (callers): `queue` is NULL or an open queue used by one thread.
unsafe fn queue_mut<'a>(queue: *mut oae_queue) -> Result<&'a mut oae_queue, c_int> {
    // SAFETY: NULL or an open queue, by the callers' contract.
    unsafe { queue.as_mut() }.ok_or_else(|| fail(OAE_ERR_INVALID, "queue is NULL"))
}

impl oae_queue {
    fn post(&mut self, wr_id: u64, verb: Verb) -> c_int {
        let kind = verb.opcode();
        let to = self.to;
        self.post_with(Posted::Verb { wr_id, kind }, |queue, id| {
            queue.submit(Submission { id, verb, to }).map_err(|_| ())
        })
    }

    fn post_local(&mut self, wr_id: u64, verb: LocalVerb, block: (u16, u32, u32)) -> c_int {
        let (kind, most) = match verb {
            LocalVerb::Write { .. } => (Opcode::Write, OAE_MAX_TRANSFER),
            LocalVerb::Read { .. } => (Opcode::Read, OAE_MAX_TRANSFER),
            LocalVerb::Send { .. } => (Opcode::Send, OAE_MAX_BLOCK),
        };
        if block.2 as usize > most {
            return fail(
                OAE_ERR_INVALID,
                format!("a {kind} of {} bytes is longer than {most}", block.2),
            );
        }
        let (local_region, local_offset, len) = block;
        let to = self.to;
        self.post_with(Posted::Verb { wr_id, kind }, |queue, id| {
            let s = LocalSubmission {
                id,
                to,
                verb,
                local_region,
                local_offset,
                len,
            };
            queue.submit_local(s).map_err(|_| ())
        })
    }

    fn post_receive(&mut self, posted: Posted, block: (u16, u32, u16)) -> c_int {
        let (region, offset, len) = block;
        let from = self.to;
        self.post_with(posted, |queue, id| {
            let post = ReceivePost {
                id,
                from,
                region,
                offset,
                len,
            };
            queue.post_receive(post).map_err(|_| ())
        })
    }

    /// Puts `what` on the ring under a free id.
    fn post_with(
        &mut self,
        what: Posted,
        put: impl FnOnce(&mut HostQueue, u64) -> Result<(), ()>,
    ) -> c_int {
        let slot = match self.free.pop() {
            Some(s) => s,
            None => {
                self.posted.push(None);
                (self.posted.len() - 1) as u32
            }
        };
        match put(&mut self.queue, u64::from(slot)) {
            Ok(()) => {
                self.posted[slot as usize] = Some(what);
                0
            }
            Err(()) => {
                self.free.push(slot);
                fail(
                    OAE_ERR_AGAIN,
                    "the host ring is full: poll completions, then post again",
                )
            }
        }
    }

    /// What ring id `id` stood for; its id is free again.
    fn take_posted(&mut self, id: u64) -> Option<Posted> {
        let slot = u32::try_from(id).ok()?;
        let posted = self.posted.get_mut(slot as usize)?.take()?;
        self.free.push(slot);
        Some(posted)
    }

    fn completion(&mut self, c: &Completion, wc: &mut oae_wc) {
        let (wr_id, opcode) = match self.take_posted(c.id) {
            Some(Posted::Verb { wr_id, kind }) => (wr_id, op_number(kind)),
            Some(Posted::Receive { wr_id, .. }) => (wr_id, OAE_OP_UNKNOWN),
            None => (c.id, OAE_OP_UNKNOWN),
        };
        *wc = oae_wc {
            wr_id,
            opcode,
            status: u32::from(Outcome::of(&c.result).code()),
            latency_ns: c.latency_ns,
            ..oae_wc::default()
        };
        if let Ok(output) = &c.result {
            fill_result(output, wc);
        }
    }

    /// A receive's outcome; its message is copied into the caller's buffer.
    fn received(&mut self, r: &Received, wc: &mut oae_wc) {
        let (wr_id, buf, room) = match self.take_posted(r.id) {
            Some(Posted::Receive { wr_id, buf, len }) => (wr_id, buf, len),
            Some(Posted::Verb { wr_id, .. }) => (wr_id, std::ptr::null_mut(), 0),
            None => (r.id, std::ptr::null_mut(), 0),
        };
        *wc = oae_wc {
            wr_id,
            opcode: OAE_OP_RECV,
            ..oae_wc::default()
        };
        let message = match &r.result {
            Ok(m) => m,
            Err(why) => {
                let result: Result<Output, _> = Err(oae_client::api::AppError::NotSubmitted(*why));
                wc.status = u32::from(Outcome::of(&result).code());
                return;
            }
        };
        let data = message.data.as_slice();
        if buf.is_null() || data.len() > usize::from(room) {
            // The dataplane never fills a receive past its length.
            wc.status = u32::from(Outcome::Undecodable.code());
            return;
        }
        // SAFETY: `buf` has `room` writable bytes (`oae_post_recv`'s
        // contract, held until this completion) and `data` fits in them.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), buf, data.len()) };
        wc.status = u32::from(Outcome::Ok.code());
        wc.len = data.len() as u32;
        if let Some(imm) = message.imm {
            wc.wc_flags = OAE_WC_WITH_IMM;
            wc.imm_data = imm;
        }
    }
}

fn fill_result(output: &Output, wc: &mut oae_wc) {
    match output {
        Output::Read { len } | Output::BilateralSwap { len } => wc.len = u32::from(*len),
        Output::Write | Output::Send => {}
        Output::CompareAndSwap { old, swapped } => {
            wc.old = *old;
            wc.swapped = u8::from(*swapped);
        }
        Output::FetchAdd { old } | Output::Swap { old } => wc.old = *old,
        Output::MultiWordCommit {
            committed,
            count,
            old,
        } => {
            wc.committed = u8::from(*committed);
            wc.count = *count;
            wc.mcas_old = *old;
        }
    }
}

/// Posts `verb` on `queue`: 0, or `OAE_ERR_AGAIN` when the ring is full.
///
/// SAFETY (callers): `queue` is NULL or an open queue used by one thread.
unsafe fn post(queue: *mut oae_queue, wr_id: u64, verb: Verb) -> c_int {
    // SAFETY: the callers' contract.
    match unsafe { queue_mut(queue) } {
        Ok(q) => q.post(wr_id, verb),
        Err(code) => code,
    }
}

fn target(region: u16, key: u32) -> RegionRef {
    RegionRef { id: region, key }
}

/// Reads `len` bytes (at most `OAE_MAX_TRANSFER`) at `offset` of the
/// peer's region `region` (key `key`) into the dataplane's own region
/// `local_region` at `local_offset`, as an RDMA READ into a registered
/// buffer. They have landed when the verb completes with
/// `OAE_WC_SUCCESS`; read them in place (`oae_region_map`) or with
/// `oae_region_read`. Up to `OAE_MAX_BLOCK` bytes, on any other status the
/// local block is unchanged; longer, it goes as a READ a frame and
/// completes once, and on failure each frame's block holds the peer's
/// bytes or is unchanged.
///
/// # Safety
/// `queue` is an open queue, used by one thread at a time.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn oae_post_read(
    queue: *mut oae_queue,
    wr_id: u64,
    region: u16,
    key: u32,
    offset: u32,
    local_region: u16,
    local_offset: u32,
    len: u32,
) -> c_int {
    if len == 0 || len as usize > OAE_MAX_TRANSFER {
        return fail(
            OAE_ERR_INVALID,
            format!("a READ moves 1 to {OAE_MAX_TRANSFER} bytes, not {len}"),
        );
    }
    // SAFETY: the contract above.
    let q = match unsafe { queue_mut(queue) } {
        Ok(q) => q,
        Err(code) => return code,
    };
    if let Ok(short) = u16::try_from(len)
        && usize::from(short) <= OAE_MAX_BLOCK
    {
        let verb = Verb::Read {
            target: target(region, key),
            offset,
            local_region,
            local_offset,
            len: short,
        };
        return q.post(wr_id, verb);
    }
    let verb = LocalVerb::Read {
        target: target(region, key),
        offset,
    };
    q.post_local(wr_id, verb, (local_region, local_offset, len))
}

/// Writes `len` bytes from `data` at `offset` of the peer's region.
///
/// # Safety
/// `queue` is an open queue used by one thread at a time; `data` points
/// to `len` readable bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn oae_post_write(
    queue: *mut oae_queue,
    wr_id: u64,
    region: u16,
    key: u32,
    offset: u32,
    data: *const u8,
    len: u16,
) -> c_int {
    // SAFETY: the contract above.
    let block = match unsafe { block_from(data, len, "WRITE") } {
        Ok(b) => b,
        Err(code) => return code,
    };
    let verb = Verb::Write {
        target: target(region, key),
        offset,
        data: block,
    };
    // SAFETY: the contract above.
    unsafe { post(queue, wr_id, verb) }
}

/// Sends a message of `len` bytes (at most `OAE_MAX_MESSAGE`) from `data`
/// into the next receive the peer posted on the link, with `imm` as its
/// immediate data if `flags` has `OAE_SEND_WITH_IMM`. With no receive
/// posted it completes `OAE_WC_REFUSED_NO_RECEIVE`, at once: nothing
/// waits and retries.
///
/// # Safety
/// `queue` is an open queue used by one thread at a time; `data` points
/// to `len` readable bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn oae_post_send(
    queue: *mut oae_queue,
    wr_id: u64,
    data: *const u8,
    len: u16,
    flags: u32,
    imm: u32,
) -> c_int {
    // SAFETY: the contract above.
    let block = match unsafe { block_from(data, len, "SEND") } {
        Ok(b) => b,
        Err(code) => return code,
    };
    if flags & !OAE_SEND_WITH_IMM != 0 {
        return fail(OAE_ERR_INVALID, format!("unknown flags {flags:#x}"));
    }
    let verb = Verb::Send {
        imm: (flags & OAE_SEND_WITH_IMM != 0).then_some(imm),
        data: block,
    };
    // SAFETY: the contract above.
    unsafe { post(queue, wr_id, verb) }
}

/// Writes `len` bytes (at most `OAE_MAX_TRANSFER`) at `offset` of the
/// peer's region, taken from this dataplane's region `local_region` at
/// `local_offset` (which the program fills in place, `oae_region_map`)
/// when the dataplane takes the verb, as an RDMA WRITE's bytes come from
/// a registered buffer: the host ring carries the block's name, not its
/// bytes. Longer than `OAE_MAX_BLOCK`, it goes as a WRITE a frame and
/// completes once: `OAE_WC_SUCCESS` if every frame was written, otherwise
/// the first failure (each frame is then written whole or not at all).
/// Leave the block alone until the verb completes. A block outside the
/// dataplane's regions completes `OAE_WC_INVALID`.
///
/// # Safety
/// `queue` is an open queue, used by one thread at a time.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn oae_post_write_local(
    queue: *mut oae_queue,
    wr_id: u64,
    region: u16,
    key: u32,
    offset: u32,
    local_region: u16,
    local_offset: u32,
    len: u32,
) -> c_int {
    let verb = LocalVerb::Write {
        target: target(region, key),
        offset,
    };
    // SAFETY: the contract above.
    match unsafe { queue_mut(queue) } {
        Ok(q) => q.post_local(wr_id, verb, (local_region, local_offset, len)),
        Err(code) => code,
    }
}

/// Sends a message of `len` bytes (at most `OAE_MAX_BLOCK`) taken from
/// this dataplane's region `local_region` at `local_offset`, as
/// `oae_post_write_local` takes a WRITE's; otherwise as `oae_post_send`.
///
/// # Safety
/// `queue` is an open queue, used by one thread at a time.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn oae_post_send_local(
    queue: *mut oae_queue,
    wr_id: u64,
    local_region: u16,
    local_offset: u32,
    len: u16,
    flags: u32,
    imm: u32,
) -> c_int {
    if flags & !OAE_SEND_WITH_IMM != 0 {
        return fail(OAE_ERR_INVALID, format!("unknown flags {flags:#x}"));
    }
    let verb = LocalVerb::Send {
        imm: (flags & OAE_SEND_WITH_IMM != 0).then_some(imm),
    };
    // SAFETY: the contract above.
    match unsafe { queue_mut(queue) } {
        Ok(q) => q.post_local(wr_id, verb, (local_region, local_offset, u32::from(len))),
        Err(code) => code,
    }
}

/// Posts a receive for the next message on the link verbs go to (the
/// queue's first link, or the one `oae_queue_to_link`/`oae_queue_to_node`
/// names): it lands in the dataplane's region `region` at `offset`, and at
/// completion (`OAE_OP_RECV`) is copied into `buf`, `len` bytes at most
/// (`OAE_MAX_MESSAGE`); the completion's `len` is the message's. A
/// receive stays posted until a message fills it or the dataplane stops.
///
/// # Safety
/// `queue` is an open queue used by one thread at a time; `buf` points to
/// `len` writable bytes, kept until the receive completes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn oae_post_recv(
    queue: *mut oae_queue,
    wr_id: u64,
    region: u16,
    offset: u32,
    buf: *mut u8,
    len: u16,
) -> c_int {
    if buf.is_null() && len > 0 {
        return fail(OAE_ERR_INVALID, "buf is NULL");
    }
    if usize::from(len) > OAE_MAX_MESSAGE {
        return fail(
            OAE_ERR_INVALID,
            format!("a receive of {len} bytes is longer than OAE_MAX_MESSAGE ({OAE_MAX_MESSAGE})"),
        );
    }
    // SAFETY: the contract above.
    match unsafe { queue_mut(queue) } {
        Ok(q) => q.post_receive(Posted::Receive { wr_id, buf, len }, (region, offset, len)),
        Err(code) => code,
    }
}

/// `len` bytes at `data` as a block, or why not.
///
/// SAFETY (callers): `data` is NULL or points to `len` readable bytes.
unsafe fn block_from(data: *const u8, len: u16, what: &str) -> Result<Block, c_int> {
    if data.is_null() && len > 0 {
        return Err(fail(OAE_ERR_INVALID, "data is NULL"));
    }
    let bytes = if len == 0 {
        &[][..]
    } else {
        // SAFETY: not NULL, and `len` readable bytes by the contract.
        unsafe { std::slice::from_raw_parts(data, usize::from(len)) }
    };
    Block::new(bytes).ok_or_else(|| {
        fail(
            OAE_ERR_INVALID,
            format!("a {what} of {len} bytes is too large"),
        )
    })
}

/// Compare-and-swap of the 8-byte word at `offset`: writes `desired` if it
/// holds `expected`. The completion's `old` is the word before, `swapped`
/// whether it was written.
///
/// # Safety
/// `queue` is an open queue, used by one thread at a time.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn oae_post_cas(
    queue: *mut oae_queue,
    wr_id: u64,
    region: u16,
    key: u32,
    offset: u32,
    expected: u64,
    desired: u64,
) -> c_int {
    let verb = Verb::CompareAndSwap {
        target: target(region, key),
        offset,
        expected,
        new: desired,
    };
    // SAFETY: the contract above.
    unsafe { post(queue, wr_id, verb) }
}

/// Adds `add` to the 8-byte word at `offset`; `old` is the word before.
///
/// # Safety
/// `queue` is an open queue, used by one thread at a time.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn oae_post_faa(
    queue: *mut oae_queue,
    wr_id: u64,
    region: u16,
    key: u32,
    offset: u32,
    add: u64,
) -> c_int {
    let verb = Verb::FetchAdd {
        target: target(region, key),
        offset,
        add,
    };
    // SAFETY: the contract above.
    unsafe { post(queue, wr_id, verb) }
}

/// Writes `value` into the 8-byte word at `offset`; `old` is the word
/// before.
///
/// # Safety
/// `queue` is an open queue, used by one thread at a time.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn oae_post_swap(
    queue: *mut oae_queue,
    wr_id: u64,
    region: u16,
    key: u32,
    offset: u32,
    value: u64,
) -> c_int {
    let verb = Verb::Swap {
        target: target(region, key),
        offset,
        new: value,
    };
    // SAFETY: the contract above.
    unsafe { post(queue, wr_id, verb) }
}

/// Multi-word commit: `count` (1 to 8) words, all written if all match.
///
/// # Safety
/// `queue` is an open queue used by one thread at a time; `words` points
/// to `count` readable words.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn oae_post_mcas(
    queue: *mut oae_queue,
    wr_id: u64,
    region: u16,
    key: u32,
    words: *const oae_mcas_word,
    count: u8,
) -> c_int {
    if words.is_null() || count == 0 || usize::from(count) > MAX_MCAS_WORDS {
        return fail(
            OAE_ERR_INVALID,
            format!("a multi-word commit takes 1 to {MAX_MCAS_WORDS} words, not {count}"),
        );
    }
    // SAFETY: not NULL, and `count` readable words by the contract.
    let given = unsafe { std::slice::from_raw_parts(words, usize::from(count)) };
    let mut all = [McasWord::default(); MAX_MCAS_WORDS];
    for (w, g) in all.iter_mut().zip(given) {
        *w = McasWord {
            offset: g.offset,
            expected: g.expected,
            new: g.desired,
        };
    }
    let verb = Verb::MultiWordCommit {
        target: target(region, key),
        count,
        words: all,
    };
    // SAFETY: the contract above.
    unsafe { post(queue, wr_id, verb) }
}

/// Bilateral swap: the peer's `len` bytes at `offset` and this dataplane's
/// own region `local_region` at `local_offset` trade places, both or
/// neither.
///
/// # Safety
/// `queue` is an open queue, used by one thread at a time.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn oae_post_bswap(
    queue: *mut oae_queue,
    wr_id: u64,
    region: u16,
    key: u32,
    offset: u32,
    local_region: u16,
    local_offset: u32,
    len: u16,
) -> c_int {
    if len == 0 || usize::from(len) > OAE_MAX_BLOCK {
        return fail(
            OAE_ERR_INVALID,
            format!("a BILATERAL SWAP trades 1 to {OAE_MAX_BLOCK} bytes, not {len}"),
        );
    }
    let verb = Verb::BilateralSwap {
        target: target(region, key),
        offset,
        local_region,
        local_offset,
        len,
    };
    // SAFETY: the contract above.
    unsafe { post(queue, wr_id, verb) }
}

/// Takes up to `max` completions into `wc`; returns how many (0 if none
/// is ready), or a negative `OAE_ERR_*`.
///
/// # Safety
/// `queue` is an open queue used by one thread at a time; `wc` points to
/// `max` writable completions.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn oae_poll_cq(queue: *mut oae_queue, max: c_int, wc: *mut oae_wc) -> c_int {
    // SAFETY: the contract above.
    let q = match unsafe { queue_mut(queue) } {
        Ok(q) => q,
        Err(code) => return code,
    };
    let Ok(max) = usize::try_from(max) else {
        return fail(OAE_ERR_INVALID, "max is negative");
    };
    if wc.is_null() && max > 0 {
        return fail(OAE_ERR_INVALID, "wc is NULL");
    }
    let mut taken = 0;
    while taken < max {
        // SAFETY: `wc` has `max` writable entries and `taken < max`.
        let entry = unsafe { &mut *wc.add(taken) };
        match q.queue.poll_answer() {
            Some(HostAnswer::Completion(c)) => q.completion(&c, entry),
            Some(HostAnswer::Received(r)) => q.received(&r, entry),
            None => break,
        }
        taken += 1;
    }
    c_int::try_from(taken).unwrap_or(c_int::MAX)
}

/// Registers a region of `len` bytes, id `id`, key `key`, permissions
/// `perms` (any of "r", "w", "a") in the dataplane whose control socket is
/// `control_socket` (e.g. "/run/oae/a.sock"): what its peers' verbs may
/// reach. Its own memory is zeroed. `OAE_ERR_EXISTS` if it has a region
/// of that id already.
///
/// # Safety
/// `control_socket` and `perms` are NUL-terminated strings.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn oae_region_register(
    control_socket: *const c_char,
    id: u16,
    key: u32,
    len: u32,
    perms: *const c_char,
) -> c_int {
    // SAFETY: the contract above.
    let (socket, perms) =
        match unsafe { (text(control_socket, "control_socket"), text(perms, "perms")) } {
            (Ok(s), Ok(p)) => (s, p),
            (Err(code), _) | (_, Err(code)) => return code,
        };
    match Client::new(socket, Duration::from_secs(10)).region_add(id, key, len, perms) {
        Ok(_) => 0,
        Err(e) if e.code == ErrorCode::Conflict => fail(OAE_ERR_EXISTS, e.message),
        Err(e) => fail(OAE_ERR_CONTROL, e.message),
    }
}

/// Stores in `*node` the node id of the dataplane whose control socket is
/// `control_socket`: the address its peers name it by (`oae_queue_to_node`).
///
/// # Safety
/// `control_socket` is a NUL-terminated string; `node` points to writable
/// storage for one `uint64_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn oae_node_id(control_socket: *const c_char, node: *mut u64) -> c_int {
    // SAFETY: the contract above.
    let socket = match unsafe { text(control_socket, "control_socket") } {
        Ok(s) => s,
        Err(code) => return code,
    };
    if node.is_null() {
        return fail(OAE_ERR_INVALID, "node is NULL");
    }
    match Client::new(socket, Duration::from_secs(10)).status() {
        Ok(status) => {
            // SAFETY: not NULL, writable by the contract.
            unsafe { *node = status.node_id };
            0
        }
        Err(e) => fail(OAE_ERR_CONTROL, e.message),
    }
}

/// Maps region `id` of the dataplane whose host ring is `ring_path` into
/// this process, readable and writable in place: where a READ or a
/// BILATERAL SWAP lands and a receive's message is written, as an RDMA
/// program's registered buffer. Stores its address in `*addr` and its
/// length in bytes in `*len`; the mapping stays until the process exits
/// (mapping a region again returns the same address). The dataplane
/// changes its bytes while verbs run: read a block once the verb that
/// lands in it has completed.
///
/// # Safety
/// `ring_path` is a NUL-terminated string; `addr` and `len` point to
/// writable storage.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn oae_region_map(
    ring_path: *const c_char,
    id: u16,
    addr: *mut *mut u8,
    len: *mut u64,
) -> c_int {
    // SAFETY: the contract above.
    let ring = match unsafe { text(ring_path, "ring_path") } {
        Ok(p) => p,
        Err(code) => return code,
    };
    if addr.is_null() || len.is_null() {
        return fail(OAE_ERR_INVALID, "addr or len is NULL");
    }
    let path = oae_client::host::region_file(Path::new(ring), id);
    let mut mapped = MAPPED
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let words = match mapped.iter().find(|w| w.path() == path) {
        Some(w) => w.words(),
        None => match SharedWords::open(&path) {
            Ok(w) => {
                mapped.push(w);
                mapped.last().expect("just pushed").words()
            }
            Err(e) => {
                return fail(
                    OAE_ERR_ATTACH,
                    format!("region {id}: {e} (does the dataplane serve a host ring there?)"),
                );
            }
        },
    };
    // SAFETY: both were checked not NULL and are writable by the contract.
    unsafe {
        *addr = words.as_ptr().cast::<u8>().cast_mut();
        *len = 8 * words.len() as u64;
    }
    0
}

/// Regions mapped by `oae_region_map`, for the life of the process (the
/// addresses handed out must stay valid; they point into the mappings,
/// which do not move with the handles).
static MAPPED: std::sync::Mutex<Vec<SharedWords>> = std::sync::Mutex::new(Vec::new());

/// Copies `len` bytes at `offset` of the region `id` of the dataplane whose
/// control socket is `control_socket` into `buf`: where a READ or
/// BILATERAL SWAP landed. Returns 0, or `OAE_ERR_CONTROL` (no such region,
/// out of bounds, no answer; see `oae_last_error`). It asks over the
/// control socket, so it costs a round trip to the dataplane's control
/// thread: read landed blocks in batches.
///
/// # Safety
/// `control_socket` is a NUL-terminated string; `buf` points to `len`
/// writable bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn oae_region_read(
    control_socket: *const c_char,
    id: u16,
    offset: u32,
    buf: *mut u8,
    len: u32,
) -> c_int {
    // SAFETY: the contract above.
    let socket = match unsafe { text(control_socket, "control_socket") } {
        Ok(s) => s,
        Err(code) => return code,
    };
    if buf.is_null() && len > 0 {
        return fail(OAE_ERR_INVALID, "buf is NULL");
    }
    let client = Client::new(socket, Duration::from_secs(10));
    let bytes = match client.region_dump(id, offset, Some(len)) {
        Ok(dump) => match oae_client::control::from_hex(&dump.data) {
            Ok(bytes) => bytes,
            Err(e) => return fail(OAE_ERR_CONTROL, format!("region {id}: {e}")),
        },
        Err(e) => return fail(OAE_ERR_CONTROL, e.message),
    };
    if bytes.len() != len as usize {
        return fail(
            OAE_ERR_CONTROL,
            format!("region {id}: {} bytes came back, not {len}", bytes.len()),
        );
    }
    if len > 0 {
        // SAFETY: `buf` has `len` writable bytes (the contract above), and
        // `bytes` is a separate allocation of exactly `len`.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), buf, bytes.len()) };
    }
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_ring_is_refused_with_the_reason() {
        let mut q: *mut oae_queue = std::ptr::null_mut();
        let path = CString::new("/nonexistent/oae-ring").unwrap();
        // SAFETY: a valid string and a writable pointer.
        let code = unsafe { oae_queue_open(path.as_ptr(), &mut q) };
        assert_eq!(code, OAE_ERR_ATTACH);
        assert!(q.is_null());
        // SAFETY: the library's own strings, NUL-terminated.
        let why = unsafe { CStr::from_ptr(oae_last_error()) }.to_string_lossy();
        assert!(why.contains("/nonexistent/oae-ring"), "{why}");
        // SAFETY: NULL is ignored.
        unsafe { oae_queue_close(q) };
    }

    #[test]
    fn null_arguments_are_refused_not_followed() {
        // SAFETY: NULLs are what is being tested.
        unsafe {
            assert_eq!(
                oae_poll_cq(std::ptr::null_mut(), 4, std::ptr::null_mut()),
                OAE_ERR_INVALID
            );
            assert_eq!(
                oae_post_cas(std::ptr::null_mut(), 1, 1, 1, 0, 0, 1),
                OAE_ERR_INVALID
            );
            assert_eq!(oae_queue_outstanding(std::ptr::null()), OAE_ERR_INVALID);
            let mut q: *mut oae_queue = std::ptr::null_mut();
            assert_eq!(oae_queue_open(std::ptr::null(), &mut q), OAE_ERR_INVALID);
        }
    }
}

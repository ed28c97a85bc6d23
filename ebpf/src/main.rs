//! `oae_steer`: the XDP program in front of the AF_XDP sockets.
//!
//! OAE frames (EtherType 0x88B5) go to the AF_XDP socket bound to the queue
//! they arrived on; everything else continues to the kernel stack, so ARP,
//! IP and the management plane keep working on the same interface. On the
//! way, the frames in the fault scope pass the fault injector configured
//! from userspace: the link can be cut, frames dropped or one bit flipped,
//! with dice that replay exactly for a given seed. The scope is OAE frames
//! by default; it can be every IPv4 frame instead, or the TCP and UDP
//! segments of one port, so that a kernel TCP stack on the same link can be
//! hurt exactly as OAE is. Frames outside the scope are never touched, and
//! IPv4 frames in it that survive (corrupted or not) still go to the kernel.

#![no_std]
#![no_main]

use aya_ebpf::bindings::xdp_action::{XDP_DROP, XDP_PASS};
use aya_ebpf::helpers::{
    bpf_get_smp_processor_id, bpf_xdp_get_buff_len, bpf_xdp_load_bytes, bpf_xdp_store_bytes,
};
use aya_ebpf::macros::{map, xdp};
use aya_ebpf::maps::{Array, PerCpuArray, XskMap};
use aya_ebpf::programs::XdpContext;
use oae_common::{
    Counter, ETH_HEADER_LEN, FaultConfig, FaultRoll, IPV4_ETHERTYPE, MAX_QUEUES, OAE_ETHERTYPE,
    RngState, SCOPE_IPV4, SCOPE_OAE, SCOPE_PORT,
};

/// An IPv4 header without options.
const IPV4_MIN_HEADER_LEN: usize = 20;
/// IPv4 protocol numbers of the segments a port scope matches.
const IPPROTO_TCP: u8 = 6;
const IPPROTO_UDP: u8 = 17;

// The statics are named after `oae_common::maps`, which is how userspace
// finds them in the object file.

#[map]
static OAE_SOCKETS: XskMap = XskMap::with_max_entries(MAX_QUEUES, 0);

#[map]
static OAE_FAULTS: Array<FaultConfig> = Array::with_max_entries(1, 0);

#[map]
static OAE_COUNTERS: PerCpuArray<u64> = PerCpuArray::with_max_entries(Counter::COUNT, 0);

#[map]
static OAE_RNG: PerCpuArray<RngState> = PerCpuArray::with_max_entries(1, 0);

#[xdp]
pub fn oae_steer(ctx: XdpContext) -> u32 {
    let (data, end) = (ctx.data(), ctx.data_end());
    if data + ETH_HEADER_LEN > end {
        // Too short for Ethernet: the kernel stack discards it and counts it.
        count(Counter::Passed);
        return XDP_PASS;
    }
    // SAFETY: bytes 12..14 lie inside the packet, checked just above.
    let ethertype = u16::from_be(unsafe { ((data + 12) as *const u16).read_unaligned() });
    if ethertype != OAE_ETHERTYPE {
        return pass(&ctx, ethertype);
    }
    steer(&ctx)
}

#[inline(always)]
fn steer(ctx: &XdpContext) -> u32 {
    if let Some(&faults) = OAE_FAULTS.get(0)
        && !faults.is_clear()
        && faults.scope == SCOPE_OAE
        && dropped_by_fault(ctx, &faults)
    {
        return XDP_DROP;
    }
    // A missing socket makes the helper return the fallback action in the
    // flags (XDP_DROP) instead of XDP_REDIRECT: nobody in the kernel stack
    // would take an OAE frame, and dropping here keeps the count exact.
    match OAE_SOCKETS.redirect(ctx.rx_queue_index(), u64::from(XDP_DROP)) {
        Ok(action) => {
            count(Counter::Steered);
            action
        }
        Err(_) => {
            count(Counter::NoSocket);
            XDP_DROP
        }
    }
}

/// A frame for the kernel stack. It passes unless it is an IPv4 frame in
/// the fault scope and a fault drops it; a corrupted one passes too: the
/// kernel's IP and TCP/UDP checksums catch it where the sender computed
/// them (not with veth's transmit checksum offload on, nor in a UDP
/// datagram sent with checksum 0).
#[inline(always)]
fn pass(ctx: &XdpContext, ethertype: u16) -> u32 {
    if ethertype == IPV4_ETHERTYPE
        && let Some(&faults) = OAE_FAULTS.get(0)
        && !faults.is_clear()
        && faults.scope != SCOPE_OAE
        && ipv4_in_scope(ctx, faults.scope, faults.port)
        && dropped_by_fault(ctx, &faults)
    {
        return XDP_DROP;
    }
    count(Counter::Passed);
    XDP_PASS
}

/// Rolls the fault dice for a frame in scope ([`FaultConfig::roll`], the
/// rule userspace's injector shares): true if it is to be dropped, after
/// counting it; otherwise maybe flips one bit of it (counted) and leaves
/// it to go on.
#[inline(always)]
fn dropped_by_fault(ctx: &XdpContext, faults: &FaultConfig) -> bool {
    if faults.link_down != 0 {
        count(Counter::DroppedByFault);
        return true;
    }
    let Some(dice) = dice(faults.seed) else {
        return false;
    };
    // SAFETY: the helper only reads the context it is given.
    let len = unsafe { bpf_xdp_get_buff_len(ctx.ctx) };
    match faults.roll(dice, len.min(u64::from(u32::MAX)) as u32) {
        FaultRoll::Keep => false,
        FaultRoll::Drop => {
            count(Counter::DroppedByFault);
            true
        }
        FaultRoll::Corrupt { offset, bit } => {
            if flip(ctx, offset, bit) {
                count(Counter::CorruptedByFault);
            }
            false
        }
    }
}

/// Whether an IPv4 frame (EtherType already checked, no VLAN tag) is in
/// `scope`: every one for [`SCOPE_IPV4`]; for [`SCOPE_PORT`], a TCP or UDP
/// segment whose source or destination port is `port`, which needs a
/// well-formed IPv4 header and the first fragment (later ones carry no
/// ports). Any other scope value matches nothing.
///
/// The fixed part of the header is read through the packet pointer, after a
/// bounds check against the frame's end; the ports sit at an offset that
/// depends on the header length, so they come through the load helper,
/// which checks that offset itself (see `corrupt` for why).
#[inline(always)]
fn ipv4_in_scope(ctx: &XdpContext, scope: u32, port: u16) -> bool {
    if scope == SCOPE_IPV4 {
        return true;
    }
    if scope != SCOPE_PORT {
        return false;
    }
    let (data, end) = (ctx.data(), ctx.data_end());
    let ip = data + ETH_HEADER_LEN;
    if ip + IPV4_MIN_HEADER_LEN > end {
        return false;
    }
    // SAFETY: the 20 bytes of an IPv4 header without options lie inside
    // the frame, checked just above; bytes 0, 6..8 and 9 are read.
    let (version_ihl, fragment, protocol) = unsafe {
        (
            (ip as *const u8).read(),
            u16::from_be(((ip + 6) as *const u16).read_unaligned()),
            ((ip + 9) as *const u8).read(),
        )
    };
    let ihl = version_ihl & 0x0f;
    if (version_ihl >> 4) != 4 || ihl < 5 {
        return false;
    }
    if protocol != IPPROTO_TCP && protocol != IPPROTO_UDP {
        return false;
    }
    if (fragment & 0x1fff) != 0 {
        return false;
    }
    let ports_at = ETH_HEADER_LEN as u32 + u32::from(ihl) * 4;
    let mut ports = [0u8; 4];
    // SAFETY: the buffer is four writable bytes on this stack frame, the
    // length passed; the helper fails, touching nothing, if the frame ends
    // before them.
    if unsafe { bpf_xdp_load_bytes(ctx.ctx, ports_at, (&raw mut ports).cast(), 4) } != 0 {
        return false;
    }
    let source = u16::from_be_bytes([ports[0], ports[1]]);
    let destination = u16::from_be_bytes([ports[2], ports[3]]);
    source == port || destination == port
}

/// This CPU's dice, seeded afresh when the configured seed changed (or
/// userspace cleared them).
#[inline(always)]
fn dice(seed: u64) -> Option<&'static mut RngState> {
    let ptr = OAE_RNG.get_ptr_mut(0)?;
    // SAFETY: a per-CPU map slot belongs to the program run on this CPU, and
    // XDP runs with migration disabled, so nothing else writes it meanwhile
    // (userspace writes to it are plain copies that at worst repeat a roll).
    let dice = unsafe { &mut *ptr };
    if dice.needs_seed(seed) {
        // SAFETY: a helper without arguments or side effects.
        let cpu = unsafe { bpf_get_smp_processor_id() };
        *dice = RngState::seeded(seed, cpu);
    }
    Some(dice)
}

/// Flips bit `bit` of the byte at `offset` (from the start of the frame);
/// false when the frame has no such byte.
///
/// Goes through the load/store helpers rather than a pointer: the kernel
/// checks the offset against the frame (fragments included), where a
/// variable offset into packet memory would need a bounds check shaped
/// exactly as the verifier wants, and LLVM is free to reshape it.
#[inline(always)]
fn flip(ctx: &XdpContext, offset: u32, bit: u8) -> bool {
    let mut byte = 0u8;
    // SAFETY: the buffer is one writable byte on this stack frame, the
    // length passed; the helper fails, touching nothing, if the frame is
    // shorter.
    if unsafe { bpf_xdp_load_bytes(ctx.ctx, offset, (&raw mut byte).cast(), 1) } != 0 {
        return false;
    }
    byte ^= 1 << (bit & 7);
    // SAFETY: as above; the byte was just read from this offset.
    unsafe { bpf_xdp_store_bytes(ctx.ctx, offset, (&raw mut byte).cast(), 1) == 0 }
}

#[inline(always)]
fn count(counter: Counter) {
    if let Some(slot) = OAE_COUNTERS.get_ptr_mut(counter as u32) {
        // SAFETY: this CPU's slot; see `dice` for why nothing races with it.
        unsafe { *slot += 1 };
    }
}

/// The kernel refuses helpers marked GPL-only to programs that do not
/// declare a GPL-compatible licence; this program uses none, so it carries
/// the project's own.
#[unsafe(link_section = "license")]
#[unsafe(no_mangle)]
static LICENSE: [u8; 11] = *b"Apache-2.0\0";

#[cfg(not(test))]
#[panic_handler]
fn panic(_info: &core::panic::PanicInfo) -> ! {
    // BPF has no unwinding and the verifier rejects any path reaching here,
    // so a reachable panic shows up as a load failure, not at run time.
    loop {}
}

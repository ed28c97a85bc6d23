//! Poll-mode drivers behind one burst interface: AF_XDP (xsk-rs, steered by
//! the aya XDP program in `ebpf/`) and DPDK.
//!
//! Not built yet; nothing here pretends otherwise.

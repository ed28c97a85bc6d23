//! The dataplane's end of the host ring: it creates the swap-ring region,
//! as a device exposes its BAR, and its polling core serves it between
//! bursts ([`HostPort`]). Host programs attach with
//! [`oae_client::host::HostQueue`]; the ring's settings are
//! [`oae_config::HostRing`].

mod port;

pub use port::{HostOrigin, HostPort, clear_stale};

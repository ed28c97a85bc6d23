//! The OAE dataplane: pinned polling cores running receive burst → OAE core →
//! verbs → transmit burst over AF_XDP or DPDK.
//!
//! Not built yet: today the core runs only under the simulator (`oae-sim`).
//! Nothing here pretends otherwise.

pub use oae_proto as proto;

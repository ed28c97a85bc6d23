//! The OAE dataplane: pinned polling cores running receive burst → OAE core →
//! verbs → transmit burst over AF_XDP, a control socket, and in-process
//! submission/completion queues for applications.

pub mod address;
pub mod daemon;
pub mod embed;
pub mod epoch;
pub mod host;
pub mod identity;
pub mod incarnation;
pub mod log;
pub mod metrics;
pub mod pipeline;
pub mod queue;
pub mod report;
mod state_file;
pub mod transport;
pub mod workload;

pub use oae_proto as proto;

//! How oae's programs are told what to do, checked before anything starts:
//! one dataplane's TOML configuration (this crate's root), deployments of
//! several dataplanes with their network and workload ([`deployment`]),
//! and the binaries' completions and manual pages ([`cli_docs`]).
//!
//! Without the dataplane's drivers: `oaectl`, the benchmarks and the tests
//! write and check configurations without linking the daemon.

pub mod cli_docs;
mod dataplane;
pub mod deployment;

pub use dataplane::*;

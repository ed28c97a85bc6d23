//! What a program needs to drive a running `oaed`, without linking the
//! dataplane: the control protocol ([`control`]) as typed requests and
//! answers, the status and stats a dataplane reports ([`status`],
//! [`stats`]), the verbs API and its outcome codes ([`api`],
//! [`outcome`]), the host ring's client and codec ([`host`]), and what
//! `oaectl demo` reports ([`demo`]).
//!
//! `oaectl`, `liboae`, the benchmarks and the tests depend on this crate;
//! `oae-dataplane` serves what it describes.

pub mod api;
pub mod control;
pub mod demo;
pub mod host;
pub mod outcome;
pub mod pair;
pub mod stats;
pub mod status;

pub use oae_proto as proto;

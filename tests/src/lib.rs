//! Shared helpers for the whole-system tests.

pub mod dataplanes;

/// Debian's interpreter, the one `python3-scapy` is installed for: a pyenv
/// or virtualenv `python3` earlier on PATH would not find scapy.
pub const SCAPY_PYTHON: &str = "/usr/bin/python3";

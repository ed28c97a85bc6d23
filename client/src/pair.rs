//! What `oaectl pair up|down --json` prints, and what `pair up` keeps in
//! the pair's directory for `pair down`: serde types both sides share.

use serde::{Deserialize, Serialize};

/// A pair that is up: its namespaces and dataplanes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PairUp {
    pub pair: String,
    /// Where its files are (configuration, logs, state).
    pub dir: String,
    pub namespaces: [String; 2],
    pub dataplanes: Vec<PairDataplane>,
    /// What was changed from the file to fit this machine's CPUs, in
    /// words (`--as-configured` keeps the file's settings).
    pub fitted: Option<String>,
}

/// One dataplane of a pair.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PairDataplane {
    /// Its `[dataplane.<name>]`.
    pub name: String,
    pub namespace: String,
    pub iface: String,
    pub pid: u32,
    /// Its control socket: `oaectl --socket` this, or `--name <pair>-<name>`.
    pub socket: String,
    pub log: String,
}

/// A pair taken down.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PairDown {
    pub pair: String,
    /// Each dataplane and how it ended: `stopped` (asked), `killed`, or
    /// `gone` (it was not running).
    pub dataplanes: Vec<(String, String)>,
    pub namespaces_removed: Vec<String>,
    /// Nothing of the pair was there.
    pub was_down: bool,
}

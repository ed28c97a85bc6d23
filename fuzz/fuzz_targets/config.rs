//! Arbitrary text as a dataplane's configuration file, through the parser
//! `oaed --check` runs (`Config::from_text`), as a file of one dataplane
//! and as `[dataplane.a]` of a deployment. Nothing may panic. What it
//! accepts, start-up must accept as far as it goes without the operating
//! system (`queue::rehearse`: the regions registered, every queue's links,
//! fabric or RC endpoint built, the host ring's settings): a file that
//! passes `--check` and then fails at start is a defect. Regions too large
//! to allocate inside the fuzzer, and submit queues sized for a million
//! verbs, are checked but not rehearsed.

#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use oae_config::Config;
use oae_dataplane::queue::rehearse;

/// What the fuzzer's memory allows one input to allocate.
const REHEARSE_BYTES: u64 = 64 << 20;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    for name in [None, Some("a")] {
        let Ok(config) = Config::from_text(text, Path::new("fuzz.toml"), name) else {
            continue;
        };
        let regions: u64 = config.regions.iter().map(|r| 2 * u64::from(r.len)).sum();
        let links: u64 = config
            .queues
            .iter()
            .map(|q| {
                let link = q.link.to_link_config();
                let rc = q.rc.to_rc_config();
                (q.peer_macs().len() as u64 + 1)
                    * (link.submit_queue as u64 + u64::from(link.slots) + rc.submit_queue as u64)
            })
            .sum();
        if regions + 256 * links > REHEARSE_BYTES {
            continue;
        }
        if let Err(e) = rehearse(&config) {
            panic!("--check accepted what start-up refuses: {e}\n{text}");
        }
    }
});

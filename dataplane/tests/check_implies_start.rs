//! What `oaed --check` accepts, start-up accepts: for configurations made
//! from the shipped pair with settings drawn from their edges and beyond
//! (submit queues up to 2^63, slots, credits, classes, tens of regions,
//! fabric, the RC model, host rings), whenever `Config::from_text` takes a
//! file, `queue::rehearse` (start-up short of the operating system) takes
//! it too. The fuzz target `config` holds arbitrary text to the same rule.

use std::path::Path;

use oae_config::Config;
use oae_dataplane::queue::rehearse;
use proptest::prelude::*;

const PAIR: &str = include_str!("../../configs/veth-pair.toml");

fn edge_usize() -> impl Strategy<Value = u64> {
    prop_oneof![
        Just(0u64),
        Just(1),
        Just(64),
        Just(4096),
        Just(4097),
        Just(65_536),
        Just(1 << 16),
        Just((1 << 16) + 1),
        Just(1 << 20),
        Just(1_000_000_000_000),
        Just(i64::MAX as u64),
        0u64..10_000,
    ]
}

#[derive(Debug, Clone)]
struct Settings {
    submit_queue: u64,
    slots: u64,
    credits: u64,
    max_class: u64,
    regions: usize,
    region_len: u64,
    fabric: bool,
    rc_model: bool,
    rc_submit_queue: u64,
    host_capacity: Option<u64>,
}

fn settings() -> impl Strategy<Value = Settings> {
    (
        (edge_usize(), edge_usize(), edge_usize(), 0u64..6),
        (
            0usize..80,
            prop_oneof![Just(0u64), Just(7), Just(8), Just(65_536)],
        ),
        (any::<bool>(), any::<bool>(), edge_usize()),
        proptest::option::of(edge_usize()),
    )
        .prop_map(
            |(
                (submit_queue, slots, credits, max_class),
                (regions, region_len),
                (fabric, rc_model, rc_submit_queue),
                host_capacity,
            )| Settings {
                submit_queue,
                slots,
                credits,
                max_class,
                regions,
                region_len,
                fabric,
                rc_model,
                rc_submit_queue,
                host_capacity,
            },
        )
}

/// The pair's file with dataplane a's settings replaced by `s`.
fn file(s: &Settings) -> String {
    let mut link = format!(
        "slots = {}\ncredits = {}\nsubmit_queue = {}\nmax_class = {}\n",
        s.slots, s.credits, s.submit_queue, s.max_class
    );
    if s.rc_model {
        link = format!(
            "[dataplane.a.queue.rc]\nsubmit_queue = {}\n",
            s.rc_submit_queue
        );
    }
    let mut text = PAIR.replacen("slots = 64\ncredits = 64\n", &link, 1);
    if s.rc_model {
        text = text.replacen(
            "[dataplane.a.queue.link]\n",
            "transport = \"rc-model\"\n",
            1,
        );
    }
    if s.fabric {
        text = text.replacen(
            "peer_mac = \"02:0a:e0:00:00:02\"\n",
            "peer_mac = \"02:0a:e0:00:00:02\"\nfabric = true\n",
            1,
        );
    }
    for id in 0..s.regions {
        text += &format!(
            "[[dataplane.a.region]]\nid = {}\nkey = 1\nlen = {}\nperms = \"rwa\"\n",
            100 + id,
            s.region_len
        );
    }
    if let Some(capacity) = s.host_capacity {
        text += &format!(
            "[dataplane.a.host]\nring = \"/dev/shm/oae-check-implies-start\"\ncapacity = {capacity}\n"
        );
    }
    text
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2048, ..ProptestConfig::default() })]

    #[test]
    fn what_check_accepts_start_up_accepts(s in settings()) {
        let text = file(&s);
        if let Ok(config) = Config::from_text(&text, Path::new("pair.toml"), Some("a"))
            && let Err(e) = rehearse(&config)
        {
            prop_assert!(false, "--check accepted, start-up refused: {e}\n{text}");
        }
    }
}

/// The generator reaches both verdicts: the property is not vacuous.
#[test]
fn the_generator_makes_files_check_takes_and_refuses() {
    let base = Settings {
        submit_queue: 4096,
        slots: 64,
        credits: 64,
        max_class: 4,
        regions: 3,
        region_len: 64,
        fabric: true,
        rc_model: false,
        rc_submit_queue: 4096,
        host_capacity: Some(64),
    };
    let check = |s: &Settings| Config::from_text(&file(s), Path::new("pair.toml"), Some("a"));
    let good = check(&base).unwrap_or_else(|e| panic!("{e}\n{}", file(&base)));
    rehearse(&good).unwrap();
    let rc = Settings {
        rc_model: true,
        fabric: false,
        ..base.clone()
    };
    check(&rc).unwrap_or_else(|e| panic!("{e}\n{}", file(&rc)));
    let huge = Settings {
        submit_queue: i64::MAX as u64,
        ..base
    };
    assert!(check(&huge).is_err());
}

//! `oaectl pair up|down`: a pair made for an operator to drive, left
//! running after oaectl exits, found by name, and removed by name. Needs
//! root.

use std::process::Command;

use oae_client::control::{ErrorCode, VerbAnswer};
use oae_client::pair::{PairDown, PairUp};
use oae_client::status::{DataplaneStatus, ProtocolStatus};
use oae_config::deployment::SHARED_CPU_MIN_ROUND_NS;
use oae_os::child::is_running;
use oae_tests::dataplanes::{binary, polling_turn};
use oae_tests::{CommandOutput, json_answer, json_failure, run};

fn ctl(args: &[&str]) -> CommandOutput {
    run(Command::new(binary("oaectl")).args(args))
}

/// Takes the pair down however the test ends.
struct Down(String);

impl Drop for Down {
    fn drop(&mut self) {
        let _ = ctl(&["pair", "down", &self.0]);
    }
}

#[test]
fn a_pair_made_by_name_outlives_oaectl_and_is_removed_by_name() {
    if !oae_tests::require_root("a_pair_made_by_name_outlives_oaectl_and_is_removed_by_name") {
        return;
    }
    let _turn = polling_turn();
    let pair = format!("t{}", std::process::id() % 1_000_000);
    let _down = Down(pair.clone());
    let up: PairUp = json_answer(&ctl(&["pair", "up", &pair, "--json"]));
    assert_eq!(up.dataplanes.len(), 2, "{up:?}");
    for d in &up.dataplanes {
        assert!(
            is_running(d.pid, "oaed"),
            "{d:?} outlives the oaectl that made it"
        );
    }
    // Found by name, its link up; on a machine whose CPUs the two polling
    // threads fill, with the round raised.
    let a = format!("{pair}-a");
    let status: DataplaneStatus = json_answer(&ctl(&["--name", &a, "status", "--json"]));
    assert!(status.all_up(), "{status:?}");
    let shared = std::thread::available_parallelism().map_or(1, usize::from) <= 2;
    assert_eq!(up.fitted.is_some(), shared, "{up:?}");
    if shared {
        let round = status
            .links()
            .map(|(_, l)| match &l.state.protocol {
                ProtocolStatus::Oae(o) => o.round_ns,
                ProtocolStatus::RcModel(_) => 0,
            })
            .min();
        assert!(round >= Some(SHARED_CPU_MIN_ROUND_NS), "{status:?}");
    }
    let answer: VerbAnswer = json_answer(&ctl(&[
        "--name", &a, "verb", "faa", "--region", "1", "--key", "0xae1", "--offset", "8", "--add",
        "3", "--json",
    ]));
    assert!(
        format!("{:?}", answer.result).contains("old: 0"),
        "{answer:?}"
    );

    // A second pair of the same name is refused, the first left running.
    json_failure(
        &ctl(&["pair", "up", &pair, "--json"]),
        ErrorCode::Conflict,
        4,
    );
    assert!(up.dataplanes.iter().all(|d| is_running(d.pid, "oaed")));

    let down: PairDown = json_answer(&ctl(&["pair", "down", &pair, "--json"]));
    assert!(!down.was_down, "{down:?}");
    assert_eq!(
        down.dataplanes,
        [
            ("a".to_string(), "stopped".to_string()),
            ("b".into(), "stopped".into())
        ]
    );
    assert_eq!(down.namespaces_removed, up.namespaces);
    for d in &up.dataplanes {
        assert!(!is_running(d.pid, "oaed"), "{d:?}");
        assert!(!std::path::Path::new(&d.socket).exists(), "{d:?}");
    }
    assert!(!std::path::Path::new(&up.dir).exists(), "{}", up.dir);
    let again: PairDown = json_answer(&ctl(&["pair", "down", &pair, "--json"]));
    assert!(again.was_down, "{again:?}");
    json_failure(
        &ctl(&["pair", "up", "Bad-Name", "--json"]),
        ErrorCode::BadRequest,
        2,
    );
}

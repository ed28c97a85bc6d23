//! oaed without root: as an unprivileged user whose copy of oaed carries
//! exactly the capabilities `deploy/oaed@.service` grants, its link comes
//! up and carries verbs; without them it refuses to start, naming what it
//! lacks. The unit itself passes `systemd-analyze verify`. Needs root (to
//! make the namespaces and set file capabilities).

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use oae_client::control::{OutputView, VerbSpec};
use oae_tests::dataplanes::{Dataplanes, Options, TARGET_KEY, TARGET_REGION, binary};
use oae_tests::{CommandOutput, run, run_ok};

const UNIT: &str = include_str!("../../deploy/oaed@.service");
/// `nobody`: an unprivileged user every Debian has.
const UID: u32 = 65534;

/// The capabilities the unit grants, as `setcap` names them.
fn unit_capabilities() -> Vec<String> {
    let line = UNIT
        .lines()
        .find_map(|l| l.strip_prefix("AmbientCapabilities="))
        .expect("the unit grants ambient capabilities");
    line.split_whitespace().map(|c| c.to_lowercase()).collect()
}

/// A directory of `nobody`'s own, holding a copy of oaed.
fn nobody_dir(d: &Dataplanes) -> (PathBuf, PathBuf) {
    let dir = d.dir.join("nobody");
    std::fs::create_dir_all(&dir).expect("nobody's directory");
    std::os::unix::fs::chown(&dir, Some(UID), Some(UID)).expect("chown");
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).expect("chmod");
    // Every directory above must be passable, and the configuration
    // readable, by nobody.
    std::fs::set_permissions(&d.dir, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let oaed = dir.join("oaed");
    std::fs::copy(binary("oaed"), &oaed).expect("copy oaed");
    (dir, oaed)
}

fn as_nobody() -> Vec<String> {
    [
        "setpriv".to_string(),
        format!("--reuid={UID}"),
        format!("--regid={UID}"),
        "--clear-groups".into(),
        "--".into(),
    ]
    .into()
}

fn proc_status(pid: u32, field: &str) -> String {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("its status");
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .map(|v| v.trim().to_string())
        .unwrap_or_default()
}

#[test]
fn oaed_runs_as_an_unprivileged_user_with_the_units_capabilities() {
    if !oae_tests::require_root("oaed_runs_as_an_unprivileged_user_with_the_units_capabilities") {
        return;
    }
    let mut d = Dataplanes::unstarted("caps", &Options::default());
    let (dir, oaed) = nobody_dir(&d);
    let caps = unit_capabilities();
    assert_eq!(caps.len(), 6, "{caps:?}");
    run_ok(
        Command::new("setcap")
            .arg(format!("{}+ep", caps.join(",")))
            .arg(&oaed),
    );
    let wrapper = as_nobody();
    let wrapper: Vec<&str> = wrapper.iter().map(String::as_str).collect();
    d.launch_with(0, &wrapper, &oaed, Some(&dir));
    d.launch(1);
    d.wait_up(Duration::from_secs(20));
    let pid = d.pid(0).expect("a runs");
    let uids = proc_status(pid, "Uid:");
    assert!(
        uids.split_whitespace().all(|u| u == UID.to_string()),
        "a runs as nobody: {uids}"
    );
    let held = run_ok(Command::new("getpcaps").arg(pid.to_string()));
    let held = format!("{}{}", held.stdout, held.stderr);
    for c in &caps {
        assert!(held.contains(c.as_str()), "{c} not held: {held}");
    }
    assert!(
        !held.contains("cap_sys_admin"),
        "more than the unit grants: {held}"
    );
    let answer = d
        .verb(
            0,
            VerbSpec::Faa {
                region: TARGET_REGION,
                key: TARGET_KEY,
                offset: 0,
                add: 2,
            },
        )
        .unwrap_or_else(|e| panic!("{e:?}\n{}", d.log(0)));
    assert_eq!(answer.result, OutputView::Faa { old: 0 });
}

#[test]
fn oaed_without_its_capabilities_refuses_to_start_naming_them() {
    if !oae_tests::require_root("oaed_without_its_capabilities_refuses_to_start_naming_them") {
        return;
    }
    let d = Dataplanes::unstarted("nocaps", &Options::default());
    let (dir, oaed) = nobody_dir(&d);
    let mut cmd = d.pair.command(0, "setpriv");
    cmd.args(&as_nobody()[1..])
        .arg(&oaed)
        .arg("--config")
        .arg(&d.config)
        .args(["--name", "a", "--socket"])
        .arg(dir.join("a.sock"))
        .arg("--state-dir")
        .arg(dir.join("a.state"));
    let out: CommandOutput = run(&mut cmd);
    assert!(!out.success(), "{out}");
    assert!(
        out.stderr.contains("CAP_") && !out.stderr.contains("panicked"),
        "{out}"
    );
    assert!(!Path::new(&dir.join("a.sock")).exists(), "{out}");
}

#[test]
fn the_service_unit_passes_systemd_analyze() {
    let dir = std::env::temp_dir().join(format!("oae-unit-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a directory for the unit");
    let unit = dir.join("oaed@test.service");
    let oaed = binary("oaed");
    std::fs::write(
        &unit,
        UNIT.replace("/usr/local/bin/oaed", oaed.to_str().expect("utf-8 path")),
    )
    .expect("write the unit");
    let out = run(Command::new("systemd-analyze")
        .args(["verify", "--man=no"])
        .arg(&unit));
    std::fs::remove_dir_all(&dir).expect("remove the unit");
    assert!(out.success() && out.stderr.trim().is_empty(), "{out}");
}

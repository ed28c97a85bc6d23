//! One side of a swap-ring exchange, run as its own process so tests and
//! benchmarks exercise a real shared mapping between two processes.
//!
//! usage: oae-swapring-peer SCENARIO REGION_PATH COUNT [QUIET_LIMIT] [DEADLINE_SECS]
//! SCENARIO: fito-host | fito-agent | bilateral-host | bilateral-agent |
//!           verbs-host | verbs-device
//! Prints the driver's report on stdout. Exit status: 0 all done, 1 a
//! promise was broken, 2 usage or attach error, 3 peer gone, 4 deadline.

#[cfg(loom)]
fn main() {}

#[cfg(not(loom))]
fn main() {
    use oae_swapring::drive::{self, Bounds};
    use oae_swapring::liveness::DEFAULT_QUIET_LIMIT;
    use oae_swapring::region::Region;
    use std::process::exit;
    use std::time::Duration;

    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() < 3 {
        eprintln!(
            "usage: oae-swapring-peer SCENARIO REGION_PATH COUNT [QUIET_LIMIT] [DEADLINE_SECS]"
        );
        exit(2);
    }
    let number = |i: usize, default: u64| -> u64 {
        args.get(i).map_or(default, |s| {
            s.parse().unwrap_or_else(|_| {
                eprintln!("argument {} ({s:?}) is not a number", i + 1);
                exit(2)
            })
        })
    };
    let bounds = Bounds {
        count: number(2, 0),
        quiet_limit: number(3, DEFAULT_QUIET_LIMIT),
        deadline: Duration::from_secs(number(4, 60)),
    };
    let region = match Region::open_when_ready(&args[1], 5000) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("{e}");
            exit(2);
        }
    };
    let report = match args[0].as_str() {
        "fito-host" => drive::fito_host(&region, bounds),
        "fito-agent" => drive::fito_agent(&region, bounds),
        "bilateral-host" => drive::bilateral_host(&region, bounds),
        "bilateral-agent" => drive::bilateral_agent(&region, bounds),
        "verbs-host" => drive::verbs_host(&region, bounds),
        "verbs-device" => drive::verbs_device(&region, bounds),
        other => {
            eprintln!("unknown scenario {other:?}");
            exit(2);
        }
    };
    println!("{}", report.line());
    exit(if report.violation.is_some() {
        1
    } else if report.done == bounds.count {
        0
    } else if report.peer_gone {
        3
    } else {
        4
    })
}

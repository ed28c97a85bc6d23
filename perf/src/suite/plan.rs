//! What each experiment runs: one item per subject and setting.

use std::collections::BTreeMap;

use oae_client::host::HostMode;
use oae_swapring::wave::{Variant, Workload};

use super::choice::{DriverChoice, Placement, PollChoice};
use super::demo::DemoTrial;
use super::fabric::{FabricKind, FabricTrial};
use super::fi_pingpong::{PROVIDERS, SIZES};
use super::ipu::{HOST_RING_WINDOWS, host_ring_subject};
use super::redis::RedisTrial;
use super::trial::Trial;
use super::{Experiment, Options};
use crate::sweep::SweepVerb;

/// One subject under one setting, run once per repetition.
#[derive(Clone, Debug)]
pub struct PlanItem {
    pub experiment: Experiment,
    pub subject: String,
    pub params: BTreeMap<String, String>,
    pub trial: Trial,
}

impl PlanItem {
    fn new(experiment: Experiment, subject: &str, params: &[(&str, String)], trial: Trial) -> Self {
        PlanItem {
            experiment,
            subject: subject.to_string(),
            params: params
                .iter()
                .map(|(k, v)| (k.to_string(), v.clone()))
                .collect(),
            trial,
        }
    }

    /// For progress lines.
    pub fn describe(&self) -> String {
        let params: Vec<String> = self
            .params
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        format!(
            "{} {} {}",
            self.experiment.name(),
            self.subject,
            params.join(" ")
        )
    }

    /// For file names.
    pub fn slug(&self) -> String {
        self.describe()
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
            .collect::<String>()
            .split('-')
            .filter(|s| !s.is_empty())
            .collect::<Vec<_>>()
            .join("-")
    }
}

/// The failure matrix's conditions: (name, loss ppm, corruption ppm,
/// flaps, lanes if not the experiment's). The one-lane run shows what a
/// loss costs when no later request follows it (RC's NAK cannot reveal it,
/// nor TCP's duplicate ACKs).
pub const CONDITIONS: [(&str, u32, u32, u32, Option<u32>); 8] = [
    ("none", 0, 0, 0, None),
    ("none, 1 lane", 0, 0, 0, Some(1)),
    ("loss 0.1%", 1_000, 0, 0, None),
    ("loss 1%", 10_000, 0, 0, None),
    ("loss 5%", 50_000, 0, 0, None),
    ("corruption 0.1%", 0, 1_000, 0, None),
    ("3 link flaps", 0, 0, 3, None),
    ("loss 1%, 1 lane", 10_000, 0, 0, Some(1)),
];

/// Slots of the per-driver comparison: 64 (the deployments' default) if
/// the sweep has it, else the sweep's widest.
pub fn driver_slots(opts: &Options) -> u16 {
    if opts.slots.contains(&64) {
        64
    } else {
        opts.slots.iter().copied().max().unwrap_or(64)
    }
}

pub fn plan(opts: &Options, experiments: &[Experiment]) -> Vec<PlanItem> {
    let mut items = Vec::new();
    for &e in experiments {
        match e {
            Experiment::LineRate => line_rate(opts, &mut items),
            Experiment::Latency => latency(&mut items),
            Experiment::Failure => failure(opts, &mut items),
            Experiment::Ipu => ipu(&mut items),
            Experiment::Scale => scale(opts, &mut items),
            Experiment::Fabric => fabric(opts, &mut items),
            Experiment::Libfabric => libfabric(&mut items),
            Experiment::Sizes => sizes(&mut items),
        }
    }
    items
}

/// The polling choices of the line-rate experiment, each measured on its
/// own against the default (adaptive kicks, no busy polling), CAS at the
/// per-driver slot count over AF_XDP.
pub const LINE_RATE_POLLING: [PollChoice; 2] = [
    PollChoice {
        idle: None,
        kicks: Some("immediate"),
        busy_poll: false,
    },
    PollChoice {
        idle: None,
        kicks: None,
        busy_poll: true,
    },
];

fn line_rate(opts: &Options, items: &mut Vec<PlanItem>) {
    let e = Experiment::LineRate;
    let default = PollChoice::default().name();
    for verb in ["write", "cas"] {
        for &slots in &opts.slots {
            items.push(PlanItem::new(
                e,
                "oae",
                &[
                    ("verb", verb.into()),
                    ("slots", slots.to_string()),
                    ("driver", DriverChoice::AfXdp.name().into()),
                    ("poll", default.clone()),
                ],
                Trial::Demo(DemoTrial::line(DriverChoice::AfXdp, verb, slots)),
            ));
        }
    }
    let slots = driver_slots(opts);
    for poll in LINE_RATE_POLLING {
        items.push(PlanItem::new(
            e,
            "oae",
            &[
                ("verb", "cas".into()),
                ("slots", slots.to_string()),
                ("driver", DriverChoice::AfXdp.name().into()),
                ("poll", poll.name()),
            ],
            Trial::Demo(DemoTrial::line(DriverChoice::AfXdp, "cas", slots).polling(poll)),
        ));
    }
    for driver in [DriverChoice::DpdkAfXdp, DriverChoice::DpdkMemif] {
        items.push(PlanItem::new(
            e,
            "oae",
            &[
                ("verb", "cas".into()),
                ("slots", slots.to_string()),
                ("driver", driver.name().into()),
            ],
            Trial::Demo(DemoTrial::line(driver, "cas", slots)),
        ));
    }
    items.push(PlanItem::new(
        e,
        "raw-af-xdp",
        &[("role", "reflector".into())],
        Trial::RawFlood,
    ));
    items.push(PlanItem::new(
        e,
        "testpmd",
        &[("role", "macswap".into())],
        Trial::Testpmd,
    ));
    // Without a kernel: OAE over net_memif with one verb in flight too
    // (the per-driver row above has `slots`), and two testpmd bouncing as
    // many frames over net_memif, on the same cores.
    if slots != 1 {
        items.push(PlanItem::new(
            e,
            "oae",
            &[
                ("verb", "cas".into()),
                ("slots", "1".into()),
                ("driver", DriverChoice::DpdkMemif.name().into()),
            ],
            Trial::Demo(DemoTrial::line(DriverChoice::DpdkMemif, "cas", 1)),
        ));
    }
    let in_flights = if slots == 1 { vec![1] } else { vec![slots, 1] };
    for in_flight in in_flights {
        items.push(PlanItem::new(
            e,
            "testpmd-pair",
            &[
                ("driver", "net_memif".into()),
                ("in_flight", in_flight.to_string()),
            ],
            Trial::TestpmdPair { in_flight },
        ));
    }
}

/// fi_pingpong over each provider and size, one run a repetition.
fn sizes(items: &mut Vec<PlanItem>) {
    for verb in [SweepVerb::Write, SweepVerb::Read] {
        for bytes in crate::sweep::SIZES {
            items.push(PlanItem::new(
                Experiment::Sizes,
                "oae",
                &[("verb", verb.name().into()), ("bytes", bytes.to_string())],
                Trial::Sweep { verb, bytes },
            ));
        }
    }
}

fn libfabric(items: &mut Vec<PlanItem>) {
    for bytes in SIZES {
        for provider in PROVIDERS {
            items.push(PlanItem::new(
                Experiment::Libfabric,
                "fi-pingpong",
                &[("provider", provider.into()), ("bytes", bytes.to_string())],
                Trial::FiPingpong { provider, bytes },
            ));
        }
    }
}

fn latency(items: &mut Vec<PlanItem>) {
    let e = Experiment::Latency;
    for placement in [Placement::CrossCore, Placement::SameCore] {
        let at = ("placement", placement.name().to_string());
        for verb in ["cas", "read"] {
            items.push(PlanItem::new(
                e,
                "oae",
                &[
                    ("verb", verb.into()),
                    at.clone(),
                    ("poll", PollChoice::default().name()),
                ],
                Trial::Demo(DemoTrial::latency(verb, placement)),
            ));
        }
        items.push(PlanItem::new(
            e,
            "oae",
            &[
                ("verb", "cas".into()),
                at.clone(),
                ("poll", PollChoice::SLEEP.name()),
            ],
            Trial::Demo(DemoTrial::latency("cas", placement).polling(PollChoice::SLEEP)),
        ));
        items.push(PlanItem::new(
            e,
            "raw-af-xdp",
            &[("role", "ping-pong".into()), at.clone()],
            Trial::RawPingPong(placement),
        ));
        items.push(PlanItem::new(
            e,
            "sockperf",
            &[("role", "udp ping-pong".into()), at],
            Trial::Sockperf(placement),
        ));
    }
}

/// Every condition on OAE, on the RC model, and on the TCP baseline: Redis
/// INCR over the kernel's TCP with one request in flight per connection,
/// as many connections as lanes.
fn failure(opts: &Options, items: &mut Vec<PlanItem>) {
    for (name, loss, corrupt, flaps, lanes) in CONDITIONS {
        let lanes = lanes.unwrap_or(opts.failure_lanes);
        for transport in ["oae", "rc-model"] {
            items.push(PlanItem::new(
                Experiment::Failure,
                transport,
                &[("condition", name.into())],
                Trial::Demo(DemoTrial::failure(transport, lanes, [loss, corrupt, flaps])),
            ));
        }
        items.push(PlanItem::new(
            Experiment::Failure,
            "redis",
            &[
                ("condition", name.into()),
                ("connections", lanes.to_string()),
            ],
            Trial::Redis(RedisTrial {
                connections: lanes,
                faults: [loss, corrupt, flaps],
            }),
        ));
    }
}

/// Queues per dataplane in the scale experiment; each queue carries one
/// link, so links per dataplane are the same.
pub const SCALE_QUEUES: [u32; 2] = [1, 2];

fn scale(opts: &Options, items: &mut Vec<PlanItem>) {
    let slots = driver_slots(opts);
    for driver in [DriverChoice::AfXdp, DriverChoice::DpdkMemif] {
        for queues in SCALE_QUEUES {
            items.push(PlanItem::new(
                Experiment::Scale,
                "oae",
                &[
                    ("driver", driver.name().into()),
                    ("queues", queues.to_string()),
                    ("links", queues.to_string()),
                ],
                Trial::Demo(DemoTrial::scale(driver, queues, slots)),
            ));
        }
    }
}

/// Through a link cut: a ring of four running the fabric, its link 0-1 cut
/// for good a third of the way in; a pair whose one link goes down once in
/// the middle third for 1 s, over OAE and over the RC model. And an incast:
/// seven leaves of a star writing to an eighth through the hub.
fn fabric(opts: &Options, items: &mut Vec<PlanItem>) {
    items.push(PlanItem::new(
        Experiment::Fabric,
        "oae",
        &[("topology", "ring:4".into())],
        Trial::Fabric(FabricTrial {
            topology: "ring:4",
            kind: FabricKind::Cut,
        }),
    ));
    for lanes in INCAST_LANES {
        items.push(PlanItem::new(
            Experiment::Fabric,
            "oae",
            &[("topology", "star:9".into()), ("lanes", lanes.to_string())],
            Trial::Fabric(FabricTrial {
                topology: "star:9",
                kind: FabricKind::Incast { target: 8, lanes },
            }),
        ));
    }
    for transport in ["oae", "rc-model"] {
        items.push(PlanItem::new(
            Experiment::Fabric,
            transport,
            &[("topology", "pair".into())],
            Trial::Demo(DemoTrial::outage(transport, opts.failure_lanes)),
        ));
    }
}

/// Verbs each sender of the incast keeps in flight: the demo's default,
/// and enough that the seven together hold more than a relay queue of the
/// old default (64).
pub const INCAST_LANES: [u32; 2] = [4, 16];

/// Emulated non-posted read costs of the IPU experiment, ns.
pub const IPU_READ_NS: [u64; 2] = [0, 750];

fn ipu(items: &mut Vec<PlanItem>) {
    for mode in [HostMode::Fito, HostMode::Bilateral] {
        for window in HOST_RING_WINDOWS {
            items.push(PlanItem::new(
                Experiment::Ipu,
                host_ring_subject(mode),
                &[("window", window.to_string())],
                Trial::HostRing { mode, window },
            ));
        }
    }
    for workload in [Workload::Sched, Workload::KeyValue] {
        for read_ns in IPU_READ_NS {
            for (name, variant) in Variant::all() {
                items.push(PlanItem::new(
                    Experiment::Ipu,
                    name,
                    &[
                        ("workload", workload_name(workload).into()),
                        ("read_ns", read_ns.to_string()),
                    ],
                    Trial::Offload {
                        workload,
                        variant,
                        read_ns,
                    },
                ));
            }
        }
    }
}

pub fn workload_name(w: Workload) -> &'static str {
    match w {
        Workload::Sched => "sched",
        Workload::KeyValue => "kv",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    #[test]
    fn every_experiment_plans_its_subjects() {
        let o = Options::quick(PathBuf::from("/bin/sh"), PathBuf::from("/tmp"));
        let items = plan(&o, &Experiment::ALL);
        let count = |e: Experiment, subject: &str| {
            items
                .iter()
                .filter(|i| i.experiment == e && i.subject == subject)
                .count()
        };
        // Two verbs over the sweep, the polling choices, the two DPDK
        // drivers, and one in flight over net_memif.
        assert_eq!(
            count(Experiment::LineRate, "oae"),
            2 * o.slots.len() + LINE_RATE_POLLING.len() + 3
        );
        assert_eq!(count(Experiment::LineRate, "testpmd-pair"), 2);
        assert_eq!(count(Experiment::Latency, "oae"), 2 * 3);
        assert_eq!(count(Experiment::LineRate, "testpmd"), 1);
        assert_eq!(count(Experiment::Latency, "sockperf"), 2);
        assert_eq!(count(Experiment::Failure, "rc-model"), CONDITIONS.len());
        assert_eq!(count(Experiment::Failure, "redis"), CONDITIONS.len());
        let one_lane = items
            .iter()
            .find(|i| {
                i.subject == "redis"
                    && i.params.get("condition").map(String::as_str) == Some("loss 1%, 1 lane")
            })
            .expect("the one-lane Redis run");
        assert!(matches!(
            &one_lane.trial,
            Trial::Redis(RedisTrial {
                connections: 1,
                faults: [10_000, 0, 0]
            })
        ));
        assert_eq!(count(Experiment::Ipu, "bilateral"), 2 * IPU_READ_NS.len());
        assert_eq!(
            count(Experiment::Ipu, "bilateral-batched"),
            2 * IPU_READ_NS.len()
        );
        assert_eq!(
            count(Experiment::Ipu, "host-ring-bilateral"),
            HOST_RING_WINDOWS.len()
        );
        assert_eq!(count(Experiment::Scale, "oae"), 2 * SCALE_QUEUES.len());
        assert_eq!(count(Experiment::Fabric, "oae"), 2 + INCAST_LANES.len());
        assert_eq!(count(Experiment::Fabric, "rc-model"), 1);
        let slugs: std::collections::HashSet<String> = items.iter().map(PlanItem::slug).collect();
        assert_eq!(slugs.len(), items.len(), "log file names must not collide");
    }
}

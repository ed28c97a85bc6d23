//! Dataplanes that list no peer and find their neighbours (docs/PROTOCOL.md,
//! "Discovery") and make their own node ids ("Addresses") on a live veth
//! pair, over real AF_XDP sockets behind the XDP program: found, keyed by
//! identity and carrying a workload with exact ledgers; found by a
//! neighbour that lists its peer; an untrusted neighbour refused, let go
//! and found again; and two that ask for one address, of which the higher
//! node id comes back at another.

use std::time::Duration;

use oae_client::stats::PipelineCounters;
use oae_common::mac::format_mac;
use oae_proto::address::{address_of, is_made};
use oae_tests::dataplanes::{Dataplanes, MACS, Options};

fn pipeline(d: &Dataplanes, i: usize) -> PipelineCounters {
    d.stats(i).queues[0].pipeline
}

/// Each end's one link runs to the other's MAC.
fn assert_found_each_other(d: &Dataplanes) {
    for i in 0..2 {
        let status = d.status(i);
        let peers: Vec<_> = status.links().map(|(_, l)| l.peer_mac.clone()).collect();
        assert_eq!(peers, [format_mac(MACS[1 - i])], "{status:?}");
    }
}

#[test]
fn a_pair_that_lists_no_peer_finds_itself_agrees_keys_and_runs_an_exact_workload() {
    if !oae_tests::require_root("a_pair_that_lists_no_peer_finds_itself") {
        return;
    }
    let options = Options {
        discover_on: [true, true],
        identities: true,
        made_ids: true,
        ..Options::default()
    };
    let d = Dataplanes::start("disc", &options);
    assert_found_each_other(&d);
    let ids = [d.status(0).node_id, d.status(1).node_id];
    assert!(ids.iter().all(|&id| is_made(id)), "{ids:x?}");
    assert_ne!(address_of(ids[0]), address_of(ids[1]));
    for (i, id) in ids.into_iter().enumerate() {
        let line = format!("address {} (node id {id:#x})", address_of(id));
        assert!(d.log(i).contains(&line), "{}", d.log(i));
        assert_eq!(d.link(1 - i).peer_node, Some(id));
    }
    for i in 0..2 {
        let c = pipeline(&d, i);
        assert_eq!(c.neighbours_found, 1, "{c:?}");
        assert!(c.tx_announcements >= 1, "{c:?}");
        assert!(
            d.log(i).contains(&format!(
                "neighbour {} found on {}: link 0",
                format_mac(MACS[1 - i]),
                d.pair.ifname[i]
            )),
            "{}",
            d.log(i)
        );
        assert!(d.link_counters(i).get("handshakes_completed") >= 1);
    }
    d.start_workload(8, 1.0, 11);
    let r = d.finished_workload(Duration::from_secs(30));
    d.assert_workload_exact(&r);
}

#[test]
fn a_dataplane_that_lists_its_peer_is_found_by_one_that_does_not() {
    if !oae_tests::require_root("a_dataplane_that_lists_its_peer_is_found") {
        return;
    }
    let options = Options {
        discover_on: [false, true],
        ..Options::default()
    };
    let mut d = Dataplanes::start("disc1", &options);
    assert_found_each_other(&d);
    // b's announcements reach a's link to b never: it stays up through
    // a restart of b, which b's new incarnation finds again.
    d.stop(1);
    d.launch(1);
    d.wait_up(Duration::from_secs(20));
    assert_found_each_other(&d);
    let a = pipeline(&d, 0);
    assert!(a.rx_announcements >= 2, "{a:?}");
    assert_eq!(a.rx_foreign, 0, "{a:?}");
    assert_eq!(d.link_counters(0).get("peer_restarts"), 1);
}

#[test]
fn an_untrusted_neighbour_is_refused_let_go_and_found_again() {
    if !oae_tests::require_root("an_untrusted_neighbour_is_refused_let_go") {
        return;
    }
    let options = Options {
        discover_on: [true, true],
        identities: true,
        distrust: Some(1),
        discovery: Some("announce_every_ms = 50\nforget_after_ms = 200"),
        ..Options::default()
    };
    let mut d = Dataplanes::start_alone("disc2", &options);
    d.launch(1);
    d.wait_for(
        Duration::from_secs(20),
        "a to let b go and find it again",
        |d| {
            let c = pipeline(d, 0);
            c.neighbours_forgotten >= 1 && c.neighbours_found >= 2
        },
    );
    let log = d.log(0);
    assert!(log.contains("which is not in the trust list"), "{log}");
    assert!(
        log.contains(&format!("neighbour {} let go", format_mac(MACS[1]))),
        "{log}"
    );
    // Whatever link b holds now, it is not up, and it is the only one.
    let status = d.status(0);
    assert!(status.links().count() <= 1, "{status:?}");
    assert!(status.links().all(|(_, l)| !l.state.up), "{status:?}");
}

#[test]
fn of_two_dataplanes_asking_for_one_address_the_higher_node_id_comes_back_at_another() {
    if !oae_tests::require_root("of_two_dataplanes_asking_for_one_address") {
        return;
    }
    let options = Options {
        discover_on: [true, true],
        made_ids: true,
        fabric: true,
        stored_address: Some(5),
        ..Options::default()
    };
    let d = Dataplanes::start("disc3", &options);
    d.wait_for(
        Duration::from_secs(30),
        "one of the two to take another address",
        |d| {
            (0..2).all(|i| d.client(i).status().is_ok_and(|s| s.all_up()))
                && address_of(d.status(0).node_id) != address_of(d.status(1).node_id)
        },
    );
    let statuses = [d.status(0), d.status(1)];
    let keeper = (0..2)
        .find(|&i| address_of(statuses[i].node_id) == 5)
        .expect("the lower node id keeps address 5");
    let yielder = 1 - keeper;
    assert!(statuses[keeper].node_id >> 16 < statuses[yielder].node_id >> 16);
    let log = d.log(yielder);
    assert!(
        log.contains("gives the address up and comes back at address")
            && log.contains("WARN stopping to come back at address"),
        "{log}"
    );
    // The same process, a new incarnation; the address it took is stored.
    assert_eq!(statuses[keeper].epoch, 1);
    assert_eq!(statuses[yielder].epoch, 2);
    d.wait_for(Duration::from_secs(30), "the views agreed", |d| {
        (0..2).all(|i| {
            d.status(i).queues[0]
                .fabric
                .as_ref()
                .is_some_and(|f| f.agreed && f.members.len() == 2)
        })
    });
}

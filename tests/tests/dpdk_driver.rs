//! The DPDK driver against the real EAL of Debian's DPDK 22.11, on a
//! `net_ring` vdev, whose transmit queue feeds its own receive queue. One
//! EAL per process, so every test here starts it with the same arguments.

use oae_pmd::dpdk::{Dpdk, DpdkConfig, init_eal};
use oae_pmd::{Burst, Driver};

fn eal() {
    let args: Vec<String> = [
        "--no-pci",
        "--no-huge",
        "-m",
        "256",
        "--no-shconf",
        "--log-level=error",
        "-l",
        "0",
        "--vdev=net_ring0",
        "--vdev=net_ring1",
    ]
    .iter()
    .map(|s| s.to_string())
    .chain([format!(
        "--file-prefix=oae-dpdk-test-{}",
        std::process::id()
    )])
    .collect();
    init_eal(&args).expect("EAL starts");
}

/// Polls until `want` frames are in `rx` (net_ring hands them back at
/// once; the bound only keeps a broken ring from hanging the test).
fn receive(d: &mut Dpdk, rx: &mut Burst<oae_pmd::dpdk::Mbuf>, want: usize) {
    for _ in 0..1000 {
        d.rx_burst(rx);
        if rx.len() == want {
            break;
        }
    }
    assert_eq!(rx.len(), want, "every frame came back");
}

/// A polling thread the EAL did not start becomes one of its lcores the
/// first time it polls, so the pool caches its mbufs.
#[test]
fn a_polling_thread_becomes_an_lcore() {
    eal();
    let polled = std::thread::spawn(|| {
        let mut d = Dpdk::new(&DpdkConfig::new("net_ring1")).expect("open net_ring1");
        let mut rx: Burst<_> = Burst::new();
        d.rx_burst(&mut rx);
        oae_pmd::dpdk::polling_thread_is_lcore()
    })
    .join()
    .expect("the polling thread ran");
    assert!(polled, "see stderr for why the thread is no lcore");
}

#[test]
fn frames_loop_back_intact_and_the_pool_is_bounded() {
    eal();
    let mut d = Dpdk::new(&DpdkConfig::new("net_ring0")).expect("open net_ring0");
    let mut tx: Burst<_> = Burst::new();
    assert_eq!(d.alloc(&mut tx, 32), 32);
    for (i, buf) in tx.iter_mut().enumerate() {
        let len = 60 + i;
        let frame = d.frame_mut(buf, len);
        for (k, b) in frame.iter_mut().enumerate() {
            *b = (i * 7 + k) as u8;
        }
    }
    assert_eq!(d.outstanding(), 32);
    assert_eq!(d.tx_burst(&mut tx), 32);
    assert!(tx.is_empty());
    let mut rx: Burst<_> = Burst::new();
    receive(&mut d, &mut rx, 32);
    for (i, buf) in rx.iter().enumerate() {
        let frame = d.frame(buf);
        assert_eq!(frame.len(), 60 + i);
        assert!(
            frame
                .iter()
                .enumerate()
                .all(|(k, &b)| b == (i * 7 + k) as u8)
        );
    }
    d.release(&mut rx);
    assert_eq!(d.outstanding(), 0);
    let stats = d.stats();
    assert_eq!((stats.rx_packets, stats.tx_packets), (32, 32));
    // The received buffers carry the next frames sent, at any length up
    // to the largest frame, with nothing of the frames they held before.
    let mut again: Burst<_> = Burst::new();
    assert_eq!(d.alloc(&mut again, 32), 32);
    assert_eq!(d.stats().buffers_reused, 32, "{:?}", d.stats());
    for (i, buf) in again.iter_mut().enumerate() {
        let len = if i == 0 {
            d.frame_capacity().min(1600)
        } else {
            90 - i
        };
        d.frame_mut(buf, len).fill(0xa0 + i as u8);
    }
    assert_eq!(d.tx_burst(&mut again), 32);
    receive(&mut d, &mut rx, 32);
    for (i, buf) in rx.iter().enumerate() {
        let frame = d.frame(buf);
        let len = if i == 0 {
            d.frame_capacity().min(1600)
        } else {
            90 - i
        };
        assert_eq!(frame.len(), len, "frame {i}");
        assert!(frame.iter().all(|&b| b == 0xa0 + i as u8), "frame {i}");
    }
    d.release(&mut rx);
    assert_eq!(d.outstanding(), 0);
    // The pool is bounded: asking for more than it holds fails, counted.
    let mut held = Vec::new();
    loop {
        let mut b: Burst<_> = Burst::new();
        if d.alloc(&mut b, 64) == 0 {
            break;
        }
        held.push(b);
        assert!(held.len() < 1000, "the pool never ran out");
    }
    assert!(d.stats().alloc_failed > 0);
    for mut b in held {
        d.release(&mut b);
    }
    assert_eq!(d.outstanding(), 0);
}

#[test]
fn errors_name_the_device_and_the_fix() {
    eal();
    let e = Dpdk::new(&DpdkConfig::new("net_nonesuch0")).unwrap_err();
    assert!(e.to_string().contains("--vdev=net_nonesuch0"), "{e}");
    let e = init_eal(&["--no-huge".to_string()]).unwrap_err();
    assert!(e.to_string().contains("starts once"), "{e}");
}

/// net_af_xdp on 4 KiB pages loses most frames in the kernel: refused
/// before the EAL starts, with the fix.
#[test]
fn net_af_xdp_without_hugepages_is_refused() {
    let e = init_eal(&[
        "--no-pci".to_string(),
        "--no-huge".to_string(),
        "--vdev=net_af_xdp0,iface=lo".to_string(),
    ])
    .unwrap_err()
    .to_string();
    assert!(e.contains("net_af_xdp needs hugepage memory"), "{e}");
    assert!(e.contains("nr_hugepages"), "{e}");
    // The vdev as a separate argument too.
    let e = init_eal(&[
        "--no-huge".to_string(),
        "--vdev".to_string(),
        "net_af_xdp0,iface=lo".to_string(),
    ])
    .unwrap_err()
    .to_string();
    assert!(e.contains("hugepage"), "{e}");
}

//! A hostile host program against the dataplane's end of the host ring.
//!
//! Each input makes a fresh ring (FITO or bilateral, by its first byte)
//! and then runs operations, each a tag byte and its bytes: write a u64
//! into any word of the shared region (header, indexes, records, slots,
//! claims), or have the dataplane serve the ring once (`HostPort::take`,
//! then complete what it took with an error, then `flush`). The oracle:
//! nothing panics or hangs, a serve hands on at most what it was asked
//! for, and every verb or receive it hands on is one the codec decoded.

#![no_main]

use libfuzzer_sys::fuzz_target;
use oae_client::api::{AppError, Completion, NotSubmitted, Received};
use oae_client::host::HostMode;
use oae_client::host::codec::HostRequest;
use oae_config::HostRing;
use oae_dataplane::host::{HostOrigin, HostPort};
use oae_swapring::cost::CostModel;
use oae_swapring::region::{Region, unique_shm_path};

const TAKE: usize = 16;

fuzz_target!(|data: &[u8]| {
    let Some((&mode, mut ops)) = data.split_first() else {
        return;
    };
    let ring = HostRing {
        path: unique_shm_path("oae-fuzz-host-ring"),
        capacity: 16,
        cost: CostModel::zero(),
        mode: if mode & 1 == 0 {
            HostMode::Fito
        } else {
            HostMode::Bilateral
        },
        processes: 2,
        batch: 4,
    };
    let mut port = HostPort::create(&ring).expect("a fresh ring");
    let host = Region::open(&ring.path).expect("the ring just made");
    let words = host.words();
    while let Some((&tag, rest)) = ops.split_first() {
        if tag & 1 == 0 {
            let Some(op) = rest.get(..10) else { break };
            let at = usize::from(u16::from_le_bytes([op[0], op[1]])) % words.len();
            let value = u64::from_le_bytes(op[2..10].try_into().expect("8 bytes"));
            words[at].store(value, std::sync::atomic::Ordering::Release);
            ops = &rest[10..];
        } else {
            let mut taken: Vec<(HostOrigin, HostRequest)> = Vec::new();
            port.take(TAKE, |origin, r| {
                taken.push((origin, r));
                Ok(())
            });
            assert!(taken.len() <= TAKE * 4, "{} taken", taken.len());
            for (origin, r) in taken {
                match r {
                    HostRequest::Verb(_) | HostRequest::FromLocal(_) => {
                        let refused = Completion {
                            id: r.id(),
                            result: Err(AppError::NotSubmitted(NotSubmitted::QueueFull)),
                            latency_ns: 0,
                        };
                        port.complete(origin, refused);
                    }
                    HostRequest::Receive(p) => {
                        let refused = Received {
                            id: p.id,
                            result: Err(NotSubmitted::QueueFull),
                        };
                        port.complete_receive(origin, &refused);
                    }
                }
            }
            port.flush();
            ops = rest;
        }
    }
    drop(host);
    drop(port);
});

//! Two nodes joined by a perfect wire: every verb end to end.

use oae_proto::wire::MAX_FRAME;
use oae_proto::*;

const R: RegionRef = RegionRef { id: 1, key: 42 };

fn pair() -> [Node; 2] {
    let mut nodes = [Node::new(0xA, 1), Node::new(0xB, 1)];
    for n in &mut nodes {
        n.add_link(LinkConfig::default()).unwrap();
        n.register(RegionSpec {
            id: 1,
            key: 42,
            len: 256,
            permissions: Permissions::ALL,
        })
        .unwrap();
    }
    nodes
}

/// Moves frames both ways until neither side has anything to say.
fn pump(nodes: &mut [Node; 2], now: Nanos) {
    let mut buf = [0u8; MAX_FRAME];
    loop {
        let mut moved = false;
        for from in 0..2 {
            while let Some(len) = nodes[from].poll_transmit(0, now, &mut buf) {
                nodes[1 - from].handle_frame(0, &buf[..len], now);
                moved = true;
            }
        }
        if !moved {
            break;
        }
    }
}

fn run(nodes: &mut [Node; 2], verb: Verb) -> Result<Output, VerbError> {
    nodes[0].submit(0, VerbId(7), verb).unwrap();
    pump(nodes, 10);
    loop {
        match nodes[0].poll_event() {
            Some(Event::Completed { id, result, .. }) => {
                assert_eq!(id, VerbId(7));
                return result;
            }
            Some(_) => continue,
            None => panic!("no completion"),
        }
    }
}

#[test]
fn bring_up_then_every_verb() {
    let mut n = pair();
    pump(&mut n, 0);
    assert!(n[0].link_status(0).unwrap().up && n[1].link_status(0).unwrap().up);
    let cas = Verb::CompareAndSwap {
        target: R,
        offset: 8,
        expected: 0,
        new: 5,
    };
    assert_eq!(
        run(&mut n, cas),
        Ok(Output::CompareAndSwap {
            old: 0,
            swapped: true
        })
    );
    assert_eq!(
        run(&mut n, cas),
        Ok(Output::CompareAndSwap {
            old: 5,
            swapped: false
        })
    );
    let faa = Verb::FetchAdd {
        target: R,
        offset: 8,
        add: 3,
    };
    assert_eq!(run(&mut n, faa), Ok(Output::FetchAdd { old: 5 }));
    let swap = Verb::Swap {
        target: R,
        offset: 8,
        new: 1,
    };
    assert_eq!(run(&mut n, swap), Ok(Output::Swap { old: 8 }));
    let write = Verb::Write {
        target: R,
        offset: 100,
        data: Block::new(b"hello").unwrap(),
    };
    assert_eq!(run(&mut n, write), Ok(Output::Write));
    let read = Verb::Read {
        target: R,
        offset: 100,
        len: 5,
    };
    assert_eq!(
        run(&mut n, read),
        Ok(Output::Read(Block::new(b"hello").unwrap()))
    );
    let words = [
        McasWord {
            offset: 16,
            expected: 0,
            new: 1,
        },
        McasWord {
            offset: 24,
            expected: 0,
            new: 2,
        },
        McasWord {
            offset: 32,
            expected: 0,
            new: 3,
        },
        McasWord {
            offset: 40,
            expected: 0,
            new: 4,
        },
    ];
    let mcas = Verb::multi_word_commit(R, &words).unwrap();
    match run(&mut n, mcas) {
        Ok(Output::MultiWordCommit {
            committed: true,
            count: 4,
            ..
        }) => {}
        other => panic!("{other:?}"),
    }
    let bswap = Verb::BilateralSwap {
        target: R,
        offset: 100,
        local_region: 1,
        local_offset: 0,
        len: 8,
    };
    match run(&mut n, bswap) {
        Ok(Output::BilateralSwap(b)) => assert_eq!(&b.as_slice()[..5], b"hello"),
        other => panic!("{other:?}"),
    }
    assert_eq!(&n[0].memory().bytes(1).unwrap()[..5], b"hello");
    assert_eq!(
        n[1].memory().bytes(1).unwrap()[100],
        0,
        "target got the initiator's zeros"
    );
    let bad = Verb::FetchAdd {
        target: RegionRef { id: 1, key: 1 },
        offset: 0,
        add: 1,
    };
    assert_eq!(run(&mut n, bad), Err(VerbError::Refused(Refusal::BadKey)));
    pump(&mut n, 20);
    assert!(n[0].is_quiescent() && n[1].is_quiescent());
    assert_eq!(n[1].memory().locked_words(), 0);
}

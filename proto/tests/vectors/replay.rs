//! The replayer's side: reads a vector file as another implementation
//! would and plays it against the core, line by line.

use oae_proto::wire::MAX_FRAME;
use oae_proto::{Event, Nanos, PostedReceive, VerbId};

use super::iut::Setup;
use super::text::{counter, hex, parse_verb, received_text, result_text, unhex};

/// Plays `text` (the file `name`) against a fresh node; panics at the
/// first line the node does not do, naming the file and the line.
pub fn replay(name: &str, text: &str) -> usize {
    let mut lines = text.lines().enumerate().filter(|(_, l)| {
        let l = l.trim();
        !l.is_empty() && !l.starts_with('#')
    });
    let mut header = |word: &str| {
        let (_, line) = lines
            .next()
            .unwrap_or_else(|| panic!("{name}: no {word} line"));
        assert!(
            line.starts_with(word),
            "{name}: expected '{word}', got '{line}'"
        );
        line.to_string()
    };
    assert_eq!(header("oae-vector"), "oae-vector 1", "{name}");
    header("title");
    header("clause");
    let setup = Setup::parse(&header("iut"));
    let mut iut = setup.node();
    let mut now: Nanos = 0;
    let mut verbs = 0;
    let mut buf = [0u8; MAX_FRAME];
    let mut steps = 0;
    for (i, line) in lines {
        let at = format!("{name}:{}: {line}", i + 1);
        let (word, rest) = line.split_once(' ').unwrap_or((line, ""));
        match word {
            "recv" => iut.handle_frame(0, &unhex(rest), now),
            "send" => {
                let len = iut
                    .poll_transmit(0, now, &mut buf)
                    .unwrap_or_else(|| panic!("{at}: the node sent nothing"));
                assert_eq!(hex(&buf[..len]), rest, "{at}: the node sent another frame");
            }
            "idle" => {
                if let Some(len) = iut.poll_transmit(0, now, &mut buf) {
                    panic!("{at}: the node sent {}", hex(&buf[..len]));
                }
            }
            "at" => {
                now = rest.parse().unwrap_or_else(|_| panic!("{at}: not a time"));
                iut.handle_timeout(now);
            }
            "submit" => {
                verbs += 1;
                iut.submit(0, VerbId(verbs), &parse_verb(rest))
                    .unwrap_or_else(|e| panic!("{at}: refused: {e}"));
            }
            "done" => {
                let result = loop {
                    match iut.poll_event() {
                        Some(Event::Completed { result, .. }) => break result,
                        Some(Event::Link { .. }) => continue,
                        other => panic!("{at}: no completion but {other:?}"),
                    }
                };
                assert_eq!(result_text(&result), rest, "{at}");
            }
            "receive" => {
                let mut n = rest.split_whitespace().map(|w| {
                    w.parse::<u64>()
                        .unwrap_or_else(|_| panic!("{at}: not a number"))
                });
                let mut next = || n.next().unwrap_or_else(|| panic!("{at}: ID OFFSET LEN"));
                let receive = PostedReceive {
                    id: next(),
                    region: 1,
                    offset: next() as u32,
                    len: next() as u16,
                };
                iut.post_receive(0, receive)
                    .unwrap_or_else(|e| panic!("{at}: refused: {e}"));
            }
            "received" => {
                let got = loop {
                    match iut.poll_event() {
                        Some(Event::Received { id, len, imm, .. }) => break (id, len, imm),
                        Some(Event::Link { .. }) => continue,
                        other => panic!("{at}: no filled receive but {other:?}"),
                    }
                };
                assert_eq!(received_text(got), rest, "{at}");
            }
            "count" => {
                let (counter_name, value) = rest.split_once(' ').expect("name and value");
                let stats = iut.link_stats(0).unwrap();
                assert_eq!(counter(stats, counter_name).to_string(), value, "{at}");
            }
            "memory" => {
                let (offset, bytes) = rest.split_once(' ').expect("offset and bytes");
                let offset: usize = offset.parse().expect("an offset");
                let want = unhex(bytes);
                let have = &iut.memory().bytes(1).unwrap()[offset..offset + want.len()];
                assert_eq!(hex(have), bytes, "{at}");
            }
            other => panic!("{at}: unknown step '{other}'"),
        }
        steps += 1;
    }
    steps
}

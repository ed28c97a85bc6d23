use super::*;

fn cfg(secret: u8, trusted: &[u8]) -> KeyAgreementConfig {
    KeyAgreementConfig {
        identity: Arc::new(IdentitySecret::from_bytes([secret; 32])),
        trust: Arc::new(Trust::of(
            trusted
                .iter()
                .map(|&s| IdentitySecret::from_bytes([s; 32]).public()),
        )),
        seed: [secret.wrapping_mul(7); 32],
        retry_interval: 1_000,
        retry_limit: 8_000,
        rekey_after: KeyAgreementConfig::DEFAULT_REKEY_AFTER,
    }
}

const A_TO_B: LinkIdentity = LinkIdentity {
    local_mac: [2, 0, 0, 0, 0, 1],
    peer_mac: [2, 0, 0, 0, 0, 2],
    channel: 0,
};

fn pair(trust_a: &[u8], trust_b: &[u8]) -> (KeyAgreement, KeyAgreement) {
    (
        KeyAgreement::new(cfg(1, trust_a), A_TO_B, (10, 1)),
        KeyAgreement::new(cfg(2, trust_b), A_TO_B.reversed(), (20, 2)),
    )
}

/// Delivers whatever `from` has due to `to`; the outcome, if a frame went.
fn deliver(from: &mut KeyAgreement, to: &mut KeyAgreement, now: Nanos) -> Option<Outcome> {
    let mut buf = [0u8; 256];
    let len = from.poll_transmit(now, &mut buf)?;
    Some(to.handle(&Frame::parse(&buf[..len]).unwrap(), now))
}

fn keyed(o: Option<Outcome>) -> LinkKey {
    match o {
        Some(Outcome::Keyed(k)) => k,
        other => panic!("expected a key, got {other:?}"),
    }
}

#[test]
fn three_messages_key_both_ends_alike() {
    let (mut a, mut b) = pair(&[2], &[1]);
    assert_eq!(deliver(&mut a, &mut b, 0), Some(Outcome::Nothing)); // 1
    let at_a = keyed(deliver(&mut b, &mut a, 0)); // 2: a keys
    let at_b = keyed(deliver(&mut a, &mut b, 0)); // 3: b keys
    assert_eq!(at_a, at_b);
    assert_eq!(a.peer().unwrap().identity, b.identity());
    assert_eq!(
        (a.peer().unwrap().epoch, a.peer().unwrap().node_id),
        (20, 2)
    );
    assert_eq!(
        (b.peer().unwrap().epoch, b.peer().unwrap().node_id),
        (10, 1)
    );
    // Message 3 repeats until a's key is confirmed, then stops.
    a.handle_timeout(1_000);
    assert!(deliver(&mut a, &mut b, 1_000).is_some());
    a.confirm();
    a.handle_timeout(100_000);
    assert_eq!(deliver(&mut a, &mut b, 100_000), None);
    assert_eq!(a.poll_timeout(), None);
}

#[test]
fn an_untrusted_peer_is_refused_at_either_end() {
    // b does not trust a: a keys (it trusts b), b refuses message 3.
    let (mut a, mut b) = pair(&[2], &[]);
    deliver(&mut a, &mut b, 0);
    keyed(deliver(&mut b, &mut a, 0));
    assert_eq!(
        deliver(&mut a, &mut b, 0),
        Some(Outcome::Untrusted(a.identity()))
    );
    assert!(!b.keyed());
    assert_eq!(b.stats().untrusted, 1);
    // a does not trust b: a refuses message 2 and sends no message 3.
    let (mut a, mut b) = pair(&[], &[1]);
    deliver(&mut a, &mut b, 0);
    assert_eq!(
        deliver(&mut b, &mut a, 0),
        Some(Outcome::Untrusted(b.identity()))
    );
    assert_eq!(deliver(&mut a, &mut b, 0), None);
    assert!(!a.keyed() && !b.keyed());
}

#[test]
fn crossing_first_messages_leave_one_handshake() {
    let (mut a, mut b) = pair(&[2], &[1]);
    let mut m1a = [0u8; 256];
    let mut m1b = [0u8; 256];
    let la = a.poll_transmit(0, &mut m1a).unwrap();
    let lb = b.poll_transmit(0, &mut m1b).unwrap();
    // a has the lower MAC: it stays the initiator and ignores b's.
    assert_eq!(
        a.handle(&Frame::parse(&m1b[..lb]).unwrap(), 0),
        Outcome::Nothing
    );
    assert_eq!(
        b.handle(&Frame::parse(&m1a[..la]).unwrap(), 0),
        Outcome::Nothing
    );
    assert_eq!((a.stats().crossed, b.stats().crossed), (1, 1));
    let k = keyed(deliver(&mut b, &mut a, 0));
    assert_eq!(keyed(deliver(&mut a, &mut b, 0)), k);
}

#[test]
fn replayed_and_forged_messages_change_nothing() {
    let (mut a, mut b) = pair(&[2], &[1]);
    let mut frames = Vec::new();
    for (from_a, now) in [(true, 0), (false, 0), (true, 0)] {
        let mut buf = [0u8; 256];
        let (from, to) = if from_a {
            (&mut a, &mut b)
        } else {
            (&mut b, &mut a)
        };
        let len = from.poll_transmit(now, &mut buf).unwrap();
        to.handle(&Frame::parse(&buf[..len]).unwrap(), now);
        frames.push(buf[..len].to_vec());
    }
    let key = b.peer().copied();
    // A fresh pair of ends (new incarnations) replayed the old messages.
    let (mut a2, mut b2) = pair(&[2], &[1]);
    let mut buf = [0u8; 256];
    b2.poll_transmit(0, &mut buf); // b2 starts its own handshake
    assert_eq!(
        b2.handle(&Frame::parse(&frames[2]).unwrap(), 0),
        Outcome::Nothing
    );
    assert_eq!(
        a2.handle(&Frame::parse(&frames[1]).unwrap(), 0),
        Outcome::Nothing
    );
    assert!(!a2.keyed() && !b2.keyed());
    // Old message 3 at b, which now answers a new message 1 of a's.
    // (A new incarnation draws a new seed.)
    let fresh = KeyAgreementConfig {
        seed: [99; 32],
        ..cfg(1, &[2])
    };
    let mut a3 = KeyAgreement::new(fresh, A_TO_B, (11, 1));
    deliver(&mut a3, &mut b, 10_000);
    assert_eq!(
        b.handle(&Frame::parse(&frames[2]).unwrap(), 10_000),
        Outcome::Nothing
    );
    assert_eq!(b.peer().copied(), key, "the key in force stays");
    // A flipped bit in message 3 is rejected; the genuine one still keys.
    let mut buf = [0u8; 256];
    let len = a3.poll_transmit(10_000, &mut buf);
    assert_eq!(len, None, "a3 waits for message 2");
    let mut m2 = [0u8; 256];
    let l2 = b.poll_transmit(10_000, &mut m2).unwrap();
    keyed(Some(a3.handle(&Frame::parse(&m2[..l2]).unwrap(), 10_000)));
    let mut m3 = [0u8; 256];
    let l3 = a3.poll_transmit(10_000, &mut m3).unwrap();
    let mut forged = m3;
    forged[60] ^= 1;
    wire::seal(&mut forged[..l3]);
    assert_eq!(
        b.handle(&Frame::parse(&forged[..l3]).unwrap(), 10_000),
        Outcome::Nothing
    );
    keyed(Some(b.handle(&Frame::parse(&m3[..l3]).unwrap(), 10_000)));
    assert_eq!(b.peer().unwrap().epoch, 11);
}

#[test]
fn lost_messages_are_sent_again_with_backoff() {
    let (mut a, mut b) = pair(&[2], &[1]);
    let mut buf = [0u8; 256];
    a.poll_transmit(0, &mut buf).unwrap(); // lost
    assert_eq!(a.poll_timeout(), Some(1_000));
    a.handle_timeout(1_000);
    deliver(&mut a, &mut b, 1_000);
    assert_eq!(a.poll_timeout(), Some(3_000));
    b.poll_transmit(1_000, &mut buf).unwrap(); // message 2 lost
    a.handle_timeout(3_000);
    deliver(&mut a, &mut b, 3_000); // message 1 again: b sends message 2 again
    keyed(deliver(&mut b, &mut a, 3_000));
    a.poll_transmit(3_000, &mut buf).unwrap(); // message 3 lost
    a.handle_timeout(4_000);
    keyed(deliver(&mut a, &mut b, 4_000));
    assert_eq!(a.stats().retransmitted, 3);
}

#[test]
fn a_message_3_never_answered_starts_the_handshake_again() {
    let (mut a, mut b) = pair(&[2], &[1]);
    deliver(&mut a, &mut b, 0);
    keyed(deliver(&mut b, &mut a, 0));
    let mut buf = [0u8; 256];
    let mut now = 0;
    a.poll_transmit(now, &mut buf).unwrap();
    for _ in 0..CONFIRM_TRIES {
        now = a.poll_timeout().unwrap();
        a.handle_timeout(now);
        a.poll_transmit(now, &mut buf).unwrap();
    }
    assert_eq!(a.stats().initiated, 2);
    assert!(a.keyed(), "the old key stays until a new one is agreed");
}

#[test]
fn a_replayed_message_1_answered_is_given_up_and_the_keyless_end_starts_its_own() {
    let (mut a, mut b) = pair(&[2], &[1]);
    // An old message 1 of a's, recorded and replayed to b after b (the
    // higher MAC) sent its own: b answers it and drops its own (K2).
    let mut old = [0u8; 256];
    let len = KeyAgreement::new(cfg(1, &[2]), A_TO_B, (9, 1))
        .poll_transmit(0, &mut old)
        .unwrap();
    let mut buf = [0u8; 256];
    b.poll_transmit(0, &mut buf).unwrap();
    b.handle(&Frame::parse(&old[..len]).unwrap(), 0);
    assert_eq!(b.stats().crossed, 1);
    b.poll_transmit(0, &mut buf).unwrap(); // message 2, to nobody
    // Message 3 never comes: b gives up and starts its own handshake.
    let give_up = b.poll_timeout().unwrap();
    assert_eq!(give_up, RESPOND_PATIENCE * 1_000);
    b.handle_timeout(give_up);
    assert_eq!(b.stats().abandoned, 1);
    assert_eq!(deliver(&mut b, &mut a, give_up), Some(Outcome::Nothing));
    let k = keyed(deliver(&mut a, &mut b, give_up));
    assert_eq!(keyed(deliver(&mut b, &mut a, give_up)), k);
}

//! Host transfers longer than a frame: a WRITE from, or a READ into, a
//! block of the dataplane's memory of up to `MAX_TRANSFER` bytes, split
//! into verbs of a frame each and completed once, when every part has:
//! `Ok` if every part took effect, else the first failure (each other part
//! took effect or not, whole; docs/SEMANTICS.md, "Transfers").

use oae_client::api::{AppError, Completion, NotSubmitted};
use oae_proto::verb::{MAX_BLOCK, Output, VerbError};
use oae_proto::{Nanos, Opcode};

use crate::host::HostOrigin;

struct Transfer {
    origin: HostOrigin,
    host_id: u64,
    kind: Opcode,
    len: u32,
    begun: Nanos,
    /// Parts submitted and not completed yet.
    in_flight: u32,
    /// No more parts will be submitted.
    all_submitted: bool,
    failed: Option<AppError>,
}

/// Transfers in flight, by index (a part's origin names it).
#[derive(Default)]
pub(super) struct Transfers {
    table: Vec<Option<Transfer>>,
    free: Vec<u32>,
}

/// A finished transfer's completion, for the host process that asked.
pub(super) type Finished = (HostOrigin, Completion);

/// The parts of a transfer of `len` bytes: (offset, length), a frame each.
pub(super) fn parts(len: u32) -> impl Iterator<Item = (u32, u32)> {
    let frame = MAX_BLOCK as u32;
    (0..len.div_ceil(frame)).map(move |k| (k * frame, frame.min(len - k * frame)))
}

impl Transfers {
    pub fn begin(
        &mut self,
        (origin, host_id): (HostOrigin, u64),
        kind: Opcode,
        len: u32,
        now: Nanos,
    ) -> u32 {
        let t = Transfer {
            origin,
            host_id,
            kind,
            len,
            begun: now,
            in_flight: 0,
            all_submitted: false,
            failed: None,
        };
        match self.free.pop() {
            Some(i) => {
                self.table[i as usize] = Some(t);
                i
            }
            None => {
                self.table.push(Some(t));
                (self.table.len() - 1) as u32
            }
        }
    }

    pub fn part_submitted(&mut self, index: u32) {
        if let Some(t) = self.get(index) {
            t.in_flight += 1;
        }
    }

    /// A transfer none of whose parts went: forgotten (its refusal is the
    /// request's).
    pub fn abandon(&mut self, index: u32) {
        if let Some(slot) = self.table.get_mut(index as usize)
            && slot.take().is_some()
        {
            self.free.push(index);
        }
    }

    /// Its remaining parts are not submitted, for `why`; it completes once
    /// those in flight have.
    pub fn give_up(&mut self, index: u32, why: NotSubmitted, now: Nanos) -> Option<Finished> {
        let t = self.get(index)?;
        t.failed.get_or_insert(AppError::NotSubmitted(why));
        t.all_submitted = true;
        self.finish_if_done(index, now)
    }

    pub fn all_submitted(&mut self, index: u32, now: Nanos) -> Option<Finished> {
        self.get(index)?.all_submitted = true;
        self.finish_if_done(index, now)
    }

    /// One of its parts completed with `result`.
    pub fn part_done(
        &mut self,
        index: u32,
        result: &Result<Output, VerbError>,
        now: Nanos,
    ) -> Option<Finished> {
        let t = self.get(index)?;
        t.in_flight = t.in_flight.saturating_sub(1);
        if let Err(e) = result {
            t.failed.get_or_insert(AppError::Verb(*e));
        }
        self.finish_if_done(index, now)
    }

    fn get(&mut self, index: u32) -> Option<&mut Transfer> {
        self.table.get_mut(index as usize)?.as_mut()
    }

    fn finish_if_done(&mut self, index: u32, now: Nanos) -> Option<Finished> {
        let t = self.get(index)?;
        if !t.all_submitted || t.in_flight > 0 {
            return None;
        }
        let t = self.table[index as usize].take()?;
        self.free.push(index);
        let result = match t.failed {
            Some(why) => Err(why),
            None if t.kind == Opcode::Read => Ok(Output::Read {
                // At most MAX_TRANSFER (61,440) bytes.
                len: t.len as u16,
            }),
            None => Ok(Output::Write),
        };
        Some((
            t.origin,
            Completion {
                id: t.host_id,
                result,
                latency_ns: now.saturating_sub(t.begun),
            },
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use oae_proto::verb::Refusal;

    const HOST: HostOrigin = HostOrigin {
        slot: 0,
        generation: 1,
    };

    #[test]
    fn parts_cover_the_transfer_a_frame_at_a_time() {
        let p: Vec<_> = parts(2000).collect();
        assert_eq!(p, [(0, 960), (960, 960), (1920, 80)]);
        assert_eq!(parts(960).count(), 1);
        assert_eq!(parts(0).count(), 0);
    }

    #[test]
    fn a_transfer_completes_once_after_its_last_part_with_its_first_failure() {
        let mut t = Transfers::default();
        let i = t.begin((HOST, 9), Opcode::Write, 2000, 100);
        for _ in 0..3 {
            t.part_submitted(i);
        }
        assert!(t.all_submitted(i, 150).is_none(), "parts in flight");
        assert!(t.part_done(i, &Ok(Output::Write), 200).is_none());
        let refused = Err(VerbError::Refused(Refusal::OutOfBounds));
        assert!(t.part_done(i, &refused, 210).is_none());
        let locked = Err(VerbError::Refused(Refusal::Locked));
        let (origin, c) = t.part_done(i, &locked, 300).expect("the last part");
        assert_eq!((origin, c.id, c.latency_ns), (HOST, 9, 200));
        assert!(matches!(
            c.result,
            Err(AppError::Verb(VerbError::Refused(Refusal::OutOfBounds)))
        ));
        assert!(t.part_done(i, &Ok(Output::Write), 400).is_none(), "once");
        // Its index is free for the next, which succeeds whole.
        let j = t.begin((HOST, 10), Opcode::Read, 1000, 500);
        assert_eq!(j, i);
        t.part_submitted(j);
        t.part_submitted(j);
        assert!(t.all_submitted(j, 500).is_none());
        assert!(
            t.part_done(j, &Ok(Output::Read { len: 960 }), 600)
                .is_none()
        );
        let (_, c) = t.part_done(j, &Ok(Output::Read { len: 40 }), 700).unwrap();
        assert!(matches!(c.result, Ok(Output::Read { len: 1000 })));
    }

    #[test]
    fn parts_given_up_complete_the_transfer_once_those_in_flight_have() {
        let mut t = Transfers::default();
        let i = t.begin((HOST, 1), Opcode::Write, 5000, 0);
        t.part_submitted(i);
        assert!(t.give_up(i, NotSubmitted::QueueFull, 1).is_none());
        let (_, c) = t.part_done(i, &Ok(Output::Write), 2).unwrap();
        assert!(matches!(
            c.result,
            Err(AppError::NotSubmitted(NotSubmitted::QueueFull))
        ));
    }
}

//! A generic carrier for host verbs: fixed 64-byte request and response
//! records, each with an id the host chooses, over the two verb rings.
//! It knows nothing of what the bytes mean, so the dataplane's submissions
//! and completions can ride on it later without this crate depending on it.
//!
//! Placement: requests in IPU memory (the host publishes them with a posted
//! write per batch); responses DMA-written by the IPU into host memory (as
//! NIC completion queues are), so the host reads them locally.

use crate::cost::CostModel;
use crate::liveness::{STAT_RECEIVED, STAT_REFUSED_FULL, STAT_SENT, SideBlock};
use crate::ring::{Consumer, Producer, RECORD_WORDS, Record, RingFull};

/// Payload bytes per record.
pub const VERB_PAYLOAD_BYTES: usize = 48;

/// One request or response.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VerbRecord {
    pub id: u64,
    /// Free for the user: an opcode, a status.
    pub tag: u32,
    len: u16,
    bytes: [u8; VERB_PAYLOAD_BYTES],
}

/// The payload does not fit a record.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("verb payload of {len} bytes exceeds the {VERB_PAYLOAD_BYTES}-byte record")]
pub struct PayloadTooLong {
    pub len: usize,
}

impl VerbRecord {
    pub fn new(id: u64, tag: u32, data: &[u8]) -> Result<Self, PayloadTooLong> {
        if data.len() > VERB_PAYLOAD_BYTES {
            return Err(PayloadTooLong { len: data.len() });
        }
        let mut bytes = [0; VERB_PAYLOAD_BYTES];
        bytes[..data.len()].copy_from_slice(data);
        Ok(VerbRecord {
            id,
            tag,
            len: data.len() as u16,
            bytes,
        })
    }

    pub fn data(&self) -> &[u8] {
        &self.bytes[..usize::from(self.len)]
    }

    pub fn encode(&self) -> Record {
        let mut r = [0; RECORD_WORDS];
        r[0] = self.id;
        r[1] = u64::from(self.len) | (u64::from(self.tag) << 32);
        for (word, chunk) in r[2..].iter_mut().zip(self.bytes.chunks_exact(8)) {
            *word = u64::from_le_bytes(chunk.try_into().expect("8-byte chunk"));
        }
        r
    }

    /// `None` when the length field is larger than a record holds.
    pub fn decode(r: &Record) -> Option<Self> {
        let len = (r[1] & 0xffff) as u16;
        if usize::from(len) > VERB_PAYLOAD_BYTES {
            return None;
        }
        let mut bytes = [0; VERB_PAYLOAD_BYTES];
        for (chunk, word) in bytes.chunks_exact_mut(8).zip(&r[2..]) {
            chunk.copy_from_slice(&word.to_le_bytes());
        }
        Some(VerbRecord {
            id: r[0],
            tag: (r[1] >> 32) as u32,
            len,
            bytes,
        })
    }
}

/// The host's end: submit requests, poll responses.
pub struct VerbsHost<'a> {
    requests: Producer<'a>,
    responses: Consumer<'a>,
    cost: CostModel,
    side: SideBlock<'a>,
}

impl<'a> VerbsHost<'a> {
    pub fn new(
        requests: Producer<'a>,
        responses: Consumer<'a>,
        cost: CostModel,
        side: SideBlock<'a>,
    ) -> Self {
        VerbsHost {
            requests,
            responses,
            cost,
            side,
        }
    }

    /// Stages a request; it is sent at the next [`VerbsHost::flush`].
    /// A full ring refuses it: the caller still owns it.
    pub fn submit(&mut self, request: &VerbRecord) -> Result<(), RingFull> {
        self.requests
            .stage(&request.encode())
            .inspect_err(|_| self.side.add_stat(STAT_REFUSED_FULL, 1))
    }

    /// Stages a message of several records, all or none: they are
    /// published together, so the device never sees part of one.
    pub fn submit_all(&mut self, message: &[VerbRecord]) -> Result<(), RingFull> {
        if self.requests.room() < message.len() as u64 {
            self.side.add_stat(STAT_REFUSED_FULL, 1);
            return Err(RingFull {
                capacity: self.requests.view().capacity(),
            });
        }
        for r in message {
            self.requests.stage(&r.encode())?;
        }
        Ok(())
    }

    /// Sends every staged request with one posted write and doorbell.
    pub fn flush(&mut self) {
        let n = self.requests.publish();
        if n > 0 {
            self.cost.posted_write();
            self.side.add_stat(STAT_SENT, n);
        }
    }

    /// The next response, if any. A record whose length field is corrupt is
    /// returned as `Some(Err(record))`.
    /// Gives the response ring the space of every completion taken so far
    /// (the next poll that finds nothing ready does it too); for callers
    /// that drop this handle between polls.
    pub fn release(&mut self) {
        self.responses.release();
    }

    pub fn poll_completion(&mut self) -> Option<Result<VerbRecord, Record>> {
        self.side.bump();
        if self.responses.ready() == 0 {
            self.responses.release();
            if self.responses.refresh() == 0 {
                return None;
            }
        }
        let mut r = [0; RECORD_WORDS];
        if !self.responses.take(&mut r) {
            return None;
        }
        self.side.add_stat(STAT_RECEIVED, 1);
        Some(VerbRecord::decode(&r).ok_or(r))
    }

    pub fn side(&mut self) -> &mut SideBlock<'a> {
        &mut self.side
    }
}

/// The IPU's end: poll requests, send responses.
pub struct VerbsDevice<'a> {
    requests: Consumer<'a>,
    responses: Producer<'a>,
    cost: CostModel,
    side: SideBlock<'a>,
}

impl<'a> VerbsDevice<'a> {
    pub fn new(
        requests: Consumer<'a>,
        responses: Producer<'a>,
        cost: CostModel,
        side: SideBlock<'a>,
    ) -> Self {
        VerbsDevice {
            requests,
            responses,
            cost,
            side,
        }
    }

    /// Gives the request ring the space of every request taken so far (the
    /// next poll that finds nothing ready does it too); for callers that
    /// drop this handle between polls.
    pub fn release(&mut self) {
        self.requests.release();
    }

    pub fn poll_request(&mut self) -> Option<Result<VerbRecord, Record>> {
        self.side.bump();
        if self.requests.ready() == 0 {
            self.requests.release();
            if self.requests.refresh() == 0 {
                return None;
            }
        }
        let mut r = [0; RECORD_WORDS];
        if !self.requests.take(&mut r) {
            return None;
        }
        self.side.add_stat(STAT_RECEIVED, 1);
        Some(VerbRecord::decode(&r).ok_or(r))
    }

    /// Polls that found the host's request tail out of bounds (see
    /// [`Consumer::refresh`]): nothing was taken.
    pub fn bad_tails(&self) -> u64 {
        self.requests.bad_tails()
    }

    /// Stages a response; sent at the next [`VerbsDevice::flush`].
    pub fn complete(&mut self, response: &VerbRecord) -> Result<(), RingFull> {
        self.responses
            .stage(&response.encode())
            .inspect_err(|_| self.side.add_stat(STAT_REFUSED_FULL, 1))
    }

    /// Stages a response of several records, all or none.
    pub fn complete_all(&mut self, message: &[VerbRecord]) -> Result<(), RingFull> {
        if self.responses.room() < message.len() as u64 {
            self.side.add_stat(STAT_REFUSED_FULL, 1);
            return Err(RingFull {
                capacity: self.responses.view().capacity(),
            });
        }
        for r in message {
            self.responses.stage(&r.encode())?;
        }
        Ok(())
    }

    /// DMA-writes staged responses into host memory: one posted write.
    pub fn flush(&mut self) {
        let n = self.responses.publish();
        if n > 0 {
            self.cost.posted_write();
            self.side.add_stat(STAT_SENT, n);
        }
    }

    pub fn side(&mut self) -> &mut SideBlock<'a> {
        &mut self.side
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn record_round_trips_and_bounds_payload() {
        let r = VerbRecord::new(0xdead_beef, 7, b"hello verbs").unwrap();
        let back = VerbRecord::decode(&r.encode()).unwrap();
        assert_eq!(back, r);
        assert_eq!(back.data(), b"hello verbs");
        assert_eq!(
            VerbRecord::new(1, 0, &[0; 49]),
            Err(PayloadTooLong { len: 49 })
        );
        let mut bad = r.encode();
        bad[1] = 49;
        assert_eq!(VerbRecord::decode(&bad), None);
    }
}

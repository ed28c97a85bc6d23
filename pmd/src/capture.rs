//! Frames as a driver moves them, in pcapng: the one writer `oaectl
//! capture` and the [`Capture`] wrapper share, and the wrapper itself,
//! which records every frame any driver receives and sends (as smoltcp's
//! `PcapWriter` wraps a `phy::Device`), for tests and for looking at an
//! in-memory pipeline in Wireshark.

use std::borrow::Cow;
use std::io::Write;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use pcap_file::DataLink;
use pcap_file::pcapng::PcapNgWriter;
use pcap_file::pcapng::blocks::enhanced_packet::{EnhancedPacketBlock, EnhancedPacketOption};
use pcap_file::pcapng::blocks::interface_description::{
    InterfaceDescriptionBlock, InterfaceDescriptionOption,
};

use crate::{Burst, Driver};

/// pcapng's epb_flags direction bits.
const INBOUND: u32 = 0b01;
const OUTBOUND: u32 = 0b10;

/// A pcapng stream of Ethernet frames on named interfaces, timestamps in
/// nanoseconds.
pub struct Pcapng<W: Write> {
    writer: PcapNgWriter<W>,
    interfaces: u32,
}

/// One frame to write.
pub struct PcapFrame<'a> {
    /// Index of the interface, in the order [`Pcapng::interface`] added
    /// them.
    pub interface: u32,
    /// Nanoseconds since the Unix epoch.
    pub t_ns: u64,
    pub outbound: bool,
    /// Its length on the wire; `data` may hold less of it.
    pub original_len: u32,
    pub data: &'a [u8],
}

impl<W: Write> Pcapng<W> {
    pub fn new(out: W) -> Result<Pcapng<W>, String> {
        Ok(Pcapng {
            writer: PcapNgWriter::new(out).map_err(|e| e.to_string())?,
            interfaces: 0,
        })
    }

    /// Adds an interface; frames name it by the index returned.
    pub fn interface(&mut self, name: &str) -> Result<u32, String> {
        let block = InterfaceDescriptionBlock {
            linktype: DataLink::ETHERNET,
            snaplen: 0,
            options: vec![
                InterfaceDescriptionOption::IfName(Cow::Owned(name.to_string())),
                // pcap-file writes timestamps in nanoseconds.
                InterfaceDescriptionOption::IfTsResol(9),
            ],
        };
        self.writer
            .write_pcapng_block(block)
            .map_err(|e| e.to_string())?;
        self.interfaces += 1;
        Ok(self.interfaces - 1)
    }

    pub fn frame(&mut self, f: &PcapFrame<'_>) -> Result<(), String> {
        let packet = EnhancedPacketBlock {
            interface_id: f.interface,
            timestamp: Duration::from_nanos(f.t_ns),
            original_len: f.original_len,
            data: Cow::Borrowed(f.data),
            options: vec![EnhancedPacketOption::Flags(if f.outbound {
                OUTBOUND
            } else {
                INBOUND
            })],
        };
        self.writer
            .write_pcapng_block(packet)
            .map(drop)
            .map_err(|e| e.to_string())
    }

    pub fn into_inner(self) -> W {
        self.writer.into_inner()
    }
}

/// `inner`, every frame it receives and every frame it accepts to send
/// written to `out` as one pcapng interface. A frame the transmit ring
/// turns away is not recorded (it was not sent). A write that fails is
/// counted and the frame still moves: capture never changes the traffic.
pub struct Capture<D: Driver, W: Write> {
    inner: D,
    out: Pcapng<W>,
    interface: u32,
    write_failures: u64,
    /// The frames of a transmit burst, copied before the driver takes
    /// them, and where each ends; kept between bursts.
    sending: Vec<u8>,
    ends: Vec<usize>,
}

impl<D: Driver, W: Write> Capture<D, W> {
    /// Records `inner`'s frames into `out` under the interface `name`.
    pub fn new(inner: D, out: W, name: &str) -> Result<Capture<D, W>, String> {
        let mut out = Pcapng::new(out)?;
        let interface = out.interface(name)?;
        Ok(Capture {
            inner,
            out,
            interface,
            write_failures: 0,
            sending: Vec::new(),
            ends: Vec::new(),
        })
    }

    /// Frames that could not be written.
    pub fn write_failures(&self) -> u64 {
        self.write_failures
    }

    pub fn inner(&self) -> &D {
        &self.inner
    }

    pub fn inner_mut(&mut self) -> &mut D {
        &mut self.inner
    }

    /// The pcapng stream so far (a `Vec<u8>` to read back, a file to
    /// close).
    pub fn into_output(self) -> W {
        self.out.into_inner()
    }

    fn record(out: &mut Pcapng<W>, interface: u32, outbound: bool, data: &[u8]) -> bool {
        let t_ns = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        out.frame(&PcapFrame {
            interface,
            t_ns,
            outbound,
            original_len: data.len() as u32,
            data,
        })
        .is_ok()
    }
}

impl<D: Driver, W: Write> Driver for Capture<D, W> {
    type Buf = D::Buf;

    fn rx_burst(&mut self, out: &mut Burst<D::Buf>) -> usize {
        let first = out.len();
        let n = self.inner.rx_burst(out);
        for buf in &out[first..] {
            let data = self.inner.frame(buf);
            if !Self::record(&mut self.out, self.interface, false, data) {
                self.write_failures += 1;
            }
        }
        n
    }

    fn tx_burst(&mut self, bufs: &mut Burst<D::Buf>) -> usize {
        // Copied before they go: the driver takes the buffers it accepts,
        // and only then says how many (those it turns away are the tail).
        self.sending.clear();
        self.ends.clear();
        for buf in bufs.iter() {
            self.sending.extend_from_slice(self.inner.frame(buf));
            self.ends.push(self.sending.len());
        }
        let accepted = self.inner.tx_burst(bufs);
        let mut start = 0;
        for &end in &self.ends[..accepted] {
            let data = &self.sending[start..end];
            if !Self::record(&mut self.out, self.interface, true, data) {
                self.write_failures += 1;
            }
            start = end;
        }
        accepted
    }

    forward_to_inner!();
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mem::{MemConfig, mem_pair};
    use pcap_file::pcapng::{Block, PcapNgReader};

    #[test]
    fn every_frame_received_and_sent_is_written_in_order() {
        let (a, b) = mem_pair(
            MemConfig::new([2, 0, 0, 0, 0, 1]),
            MemConfig::new([2, 0, 0, 0, 0, 2]),
        );
        let mut a = Capture::new(a, Vec::new(), "mem0").expect("a pcapng header");
        let mut b = b;
        // a sends three frames; b sends one back.
        let mut burst = Burst::new();
        assert_eq!(a.alloc(&mut burst, 3), 3);
        for (k, buf) in burst.iter_mut().enumerate() {
            a.frame_mut(buf, 60).fill(k as u8 + 1);
        }
        assert_eq!(a.tx_burst(&mut burst), 3);
        a.kick();
        let mut got = Burst::new();
        assert_eq!(b.rx_burst(&mut got), 3);
        b.release(&mut got);
        assert_eq!(b.alloc(&mut got, 1), 1);
        b.frame_mut(&mut got[0], 64).fill(9);
        assert_eq!(b.tx_burst(&mut got), 1);
        b.kick();
        assert_eq!(a.rx_burst(&mut got), 1);
        a.release(&mut got);
        assert_eq!(a.write_failures(), 0);
        let bytes = a.into_output();
        let mut reader = PcapNgReader::new(&bytes[..]).expect("a pcapng stream");
        let mut seen = Vec::new();
        while let Some(block) = reader.next_block() {
            if let Block::EnhancedPacket(p) = block.expect("a block") {
                let outbound = p
                    .options
                    .iter()
                    .any(|o| matches!(o, EnhancedPacketOption::Flags(f) if f & OUTBOUND != 0));
                seen.push((outbound, p.data[0], p.data.len()));
            }
        }
        assert_eq!(
            seen,
            [(true, 1, 60), (true, 2, 60), (true, 3, 60), (false, 9, 64)]
        );
    }
}

#!/usr/bin/env python3
"""Writes OAE frames built from docs/PROTOCOL.md, independently of the Rust
codec, to the pcap file named by argv[1]: what the dissector test decodes."""
import os
import struct
import sys

from scapy.all import Ether, Raw, wrpcap

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scapy"))
from oae_wire import context, crc32c, frame, reflect, slot  # noqa: E402

A, B = "02:00:00:00:00:0a", "02:00:00:00:00:0b"
ETHERTYPE = 0x88B5

hello = frame(context(0, 0, False, 1, 1, 0), (7, 0), (0, 0),
              struct.pack(">QHHB", 0xA, 4, 3, 4))
cas_ctx = context(0, 2, False, 2, 1, slot(1, 5))
cas = frame(cas_ctx, (7, 9), (3, 2),
            struct.pack(">BBHI", 3, 0, 1, 0x1001) + struct.pack(">IQQ", 8, 0, 7))
echo = frame(context(0, 2, True, 2, 2, slot(1, 5)), (9, 7), (3, 3),
             reflect(cas_ctx) + struct.pack(">Q", 42))
never_sent = context(0, 2, False, 2, 1, slot(2, 9))
refuse = frame(context(0, 2, True, 2, 5, slot(2, 9), reverse=True), (9, 7), (4, 3),
               reflect(never_sent) + bytes([7]))
bad_crc = cas[:-1] + bytes([cas[-1] ^ 0xFF])
inner = frame(context(0, 2, False, 2, 1, slot(0, 1)), (5, 6), (1, 1),
              struct.pack(">BBHI", 4, 0, 1, 0x1001) + struct.pack(">IQ", 16, 3))
forward = frame(context(1, 2, False, 3, 2, 0), (7, 9), (5, 4),
                struct.pack(">QQBBH", 0xC, 0xA, 15, 1, len(inner)) + inner)
mcas_ctx = context(1, 2, False, 2, 1, slot(3, 1), prev=True)
words = [(0, 1, 2), (8, 3, 4)]
mcas = frame(mcas_ctx, (7, 9), (6, 5),
             struct.pack(">BBHI", 6, len(words), 1, 0x1001)
             + b"".join(struct.pack(">IQQ", *w) for w in words))
mcas_echo = frame(context(1, 2, True, 2, 2, slot(3, 1)), (9, 7), (6, 6),
                  reflect(mcas_ctx) + struct.pack(">BBQQ", 1, 2, 1, 3))

# A request whose CRC is broken is dropped by its receiver: an echo that
# reflects it answers nothing.
lost_ctx = context(0, 2, False, 2, 1, slot(4, 1))
lost = frame(lost_ctx, (7, 9), (7, 6), struct.pack(">BBHI", 4, 0, 1, 0x1001) + struct.pack(">IQ", 0, 1))
lost = lost[:-1] + bytes([lost[-1] ^ 1])
lost_echo = frame(context(0, 2, True, 2, 2, slot(4, 1)), (9, 7), (7, 7),
                  reflect(lost_ctx) + struct.pack(">Q", 5))
# Malformed: a WRITE claiming more data than the frame holds, a version-1
# frame, and one shorter than any class.
long_write = frame(context(0, 2, False, 2, 1, slot(5, 1)), (7, 9), (8, 7),
                   struct.pack(">BBHI", 2, 0, 1, 0x1001) + struct.pack(">IH", 0, 5000))
version1 = bytes([0x10]) + hello[1:-4]
version1 = version1 + struct.pack(">I", crc32c(version1))
short = hello[:40]
# An authenticated link's HELLO: key 1, accepting keys 0 and 1, packet
# number 0x0102_0304_0506, a tag the dissector shows but cannot check.
authenticated = hello + bytes([1, 3, 1, 2, 3, 4, 5, 6]) + bytes(range(16))

# An ADVERT page: view 5, node ids 0 to 0x0F, two entries (the sender at 0
# hops; node 0x0C, routed 1 hop away, reached the same, its route poisoned
# back to the receiver at 64).
entries = [(0xA, 7, 0, 0), (0xC, 2, 64, 1)]
advert = frame(context(1, 2, False, 3, 1, 0), (7, 9), (9, 8),
               struct.pack(">QQBQQ", 5, 0x1234, len(entries), 0, 0x0F)
               + b"".join(struct.pack(">QIBB", *e) for e in entries))

frames = [(A, B, hello), (A, B, cas), (B, A, echo), (B, A, refuse), (A, B, bad_crc),
          (A, B, forward), (A, B, mcas), (B, A, mcas_echo), (A, B, lost), (B, A, lost_echo),
          (A, B, long_write), (A, B, version1), (A, B, short), (A, B, authenticated),
          (A, B, advert)]
wrpcap(sys.argv[1], [Ether(src=s, dst=d, type=ETHERTYPE) / Raw(f) for s, d, f in frames])

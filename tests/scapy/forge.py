#!/usr/bin/env python3
"""Puts frames on a dataplane's wire from outside it, with scapy:

  forge.py hello IFACE SRC DST NODE_ID EPOCH [plain|junk-tag]
      a HELLO built from docs/PROTOCOL.md claiming to be SRC (node NODE_ID,
      sender epoch EPOCH), without a trailer (plain) or with a 24-byte
      trailer whose tag is made up (junk-tag)
  forge.py raw IFACE HEX...
      whole Ethernet frames as given (a capture's frames, replayed)

Prints how many frames it sent."""
import os
import sys

from scapy.all import Ether, Raw, sendp

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from oae_wire import ETHERTYPE, hello  # noqa: E402


def main(argv):
    kind, iface = argv[1], argv[2]
    if kind == "hello":
        src, dst, node_id, epoch, how = argv[3], argv[4], int(argv[5]), int(argv[6]), argv[7]
        body = hello(node_id, epoch)
        if how == "junk-tag":
            # key number 0, accepting key 0, packet number 1, a made-up tag
            body += bytes([0, 1, 0, 0, 0, 0, 0, 1]) + bytes(range(16))
        frames = [Ether(src=src, dst=dst, type=ETHERTYPE) / Raw(body)]
    elif kind == "raw":
        frames = [Raw(bytes.fromhex(h)) for h in argv[3:]]
    else:
        raise SystemExit(f"unknown kind {kind}")
    sendp(frames, iface=iface, verbose=False)
    print(len(frames))


if __name__ == "__main__":
    main(sys.argv)

"""OAE frames as docs/PROTOCOL.md describes them, built independently of the
Rust codec: for the dissector's frames and the scapy tests that forge and
replay frames against live dataplanes."""
import struct

ETHERTYPE = 0x88B5


def crc32c(data):
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
    return crc ^ 0xFFFFFFFF


def context(cls, level, bob, state, code, field, reverse=False, prev=False):
    transition = code | (0x80 if reverse else 0) | (0x40 if prev else 0)
    return struct.pack(">BBBBI", 0x20 | cls, level | (4 if bob else 0), state, transition, field)


def frame(ctx, epochs, order, payload):
    size = 64 << (ctx[0] & 0x0F)
    body = ctx + struct.pack(">IIII", epochs[0], epochs[1], order[0], order[1]) + payload
    body = body.ljust(size - 4, b"\0")
    return body + struct.pack(">I", crc32c(body))


def reflect(ctx):
    return ctx[4:] + ctx[:4]


def slot(s, q):
    return (s << 16) | q


def hello(node_id, sender_epoch, receiver_epoch=0, slots=32, credits=32, max_class=4, level=0):
    """A HELLO as a dataplane sends it (class 0, order slice zero)."""
    return frame(context(0, level, False, 1, 1, 0), (sender_epoch, receiver_epoch), (0, 0),
                 struct.pack(">QHHB", node_id, slots, credits, max_class))

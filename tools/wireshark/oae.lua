-- Wireshark dissector for Open Atomic Ethernet frames (EtherType 0x88B5),
-- wire protocol version 2 as docs/PROTOCOL.md describes it: the context
-- slice, epochs, order and seen, every transition's payload, the verbs and
-- their results, the fabric's ADVERT and FORWARD (a relayed frame is
-- dissected in place), and the CRC32C.
--
-- An answer's reflected context slice is checked against the frames of the
-- capture: "answers" names the frame whose slice it reflects, and an ECHO's
-- result is decoded by that request's verb.
--
-- Install: mkdir -p ~/.local/lib/wireshark/plugins &&
--          cp tools/wireshark/oae.lua ~/.local/lib/wireshark/plugins/
-- or once: tshark -X lua_script:tools/wireshark/oae.lua -r capture.pcapng

local bit = bit32 or bit

local oae = Proto("oae", "Open Atomic Ethernet")

local STATES = { [1] = "link", [2] = "slot", [3] = "fabric" }
local TRANSITIONS = {
    [1] = { [1] = "HELLO", [2] = "TICK", [3] = "TOCK", [4] = "HANDSHAKE" },
    [2] = {
        [1] = "REQUEST", [2] = "ECHO", [3] = "COMMIT", [4] = "COMMIT_ACK",
        [5] = "REFUSE", [6] = "REVERSE", [7] = "REVERSE_ACK",
    },
    [3] = { [1] = "ADVERT", [2] = "FORWARD" },
}
-- Transitions whose payload opens with the reflected context slice.
local REFLECTS = {
    TOCK = true, ECHO = true, COMMIT_ACK = true, REFUSE = true, REVERSE_ACK = true,
}
local LEVELS = { [0] = "has not heard the peer", [1] = "knows the peer", [2] = "knows the peer knows it" }
local ROLES = { [0] = "Alice", [1] = "Bob" }
local OPCODES = {
    [1] = "READ", [2] = "WRITE", [3] = "CAS", [4] = "FETCH_ADD", [5] = "SWAP",
    [6] = "MULTI_WORD_COMMIT", [7] = "BILATERAL_SWAP",
}
local REFUSALS = {
    [1] = "NoCredit", [2] = "UnknownRegion", [3] = "BadKey", [4] = "OutOfBounds",
    [5] = "Malformed", [6] = "Forbidden", [7] = "Locked", [8] = "Misaligned",
}
local FORWARD_KINDS = { [1] = "path frame", [2] = "RESOLVE", [3] = "RESOLVED" }
local OUTCOMES = { [1] = "settled", [2] = "target restarted" }

local f = oae.fields
local add_handshake
f.version = ProtoField.uint8("oae.version", "Version", base.DEC, nil, 0xF0)
f.class = ProtoField.uint8("oae.class", "Class", base.DEC, nil, 0x0F)
f.frame_len = ProtoField.uint16("oae.frame_len", "Frame length (64 << class)")
f.level = ProtoField.uint8("oae.liveness.level", "Knowledge level", base.DEC, LEVELS, 0x03)
f.role = ProtoField.uint8("oae.liveness.role", "Role", base.DEC, ROLES, 0x04)
f.state = ProtoField.uint8("oae.state", "State machine", base.DEC, STATES)
f.code = ProtoField.uint8("oae.transition.code", "Transition code", base.DEC, nil, 0x1F)
f.prev_committed = ProtoField.bool("oae.prev_committed", "Previous transfer committed", 8, nil, 0x40)
f.reverse = ProtoField.bool("oae.reverse", "Reverse direction", 8, nil, 0x80)
f.transition = ProtoField.string("oae.transition", "Transition")
f.slot = ProtoField.uint16("oae.slot", "Slot")
f.seq = ProtoField.uint16("oae.seq", "Sequence")
f.tick = ProtoField.uint32("oae.tick", "Tick number")
f.field = ProtoField.uint32("oae.field", "Field", base.HEX)
f.sender_epoch = ProtoField.uint32("oae.sender_epoch", "Sender epoch")
f.receiver_epoch = ProtoField.uint32("oae.receiver_epoch", "Receiver epoch (as the sender knows it)")
f.order = ProtoField.uint32("oae.order", "Order")
f.seen = ProtoField.uint32("oae.seen", "Seen")
f.reflected = ProtoField.bytes("oae.reflected", "Reflected context slice")
f.reflected_ok = ProtoField.bool("oae.reflected.match", "Reflects a frame of this capture")
f.answers = ProtoField.framenum("oae.answers", "Answers frame", base.NONE, frametype.REQUEST)
f.hello_node = ProtoField.uint64("oae.hello.node_id", "Node id", base.HEX)
f.hello_slots = ProtoField.uint16("oae.hello.slots", "Slots")
f.hello_credits = ProtoField.uint16("oae.hello.credits", "Receive credits")
f.hello_max_class = ProtoField.uint8("oae.hello.max_class", "Largest class")
f.announcement = ProtoField.bool("oae.announcement", "Announcement (a HELLO to every neighbour, PROTOCOL.md D1)")
f.handshake_message = ProtoField.uint32("oae.handshake.message", "Handshake message (Noise XX)")
f.handshake_len = ProtoField.uint16("oae.handshake.len", "Noise message length")
f.handshake_ephemeral = ProtoField.bytes("oae.handshake.ephemeral", "Ephemeral public key (e)")
f.handshake_sealed = ProtoField.bytes("oae.handshake.sealed", "Sealed (static key and payload)")
f.handshake_epoch = ProtoField.uint32("oae.handshake.epoch", "Initiator epoch (in clear)")
f.handshake_node = ProtoField.uint64("oae.handshake.node", "Initiator node id (in clear)", base.HEX)
f.round_ns = ProtoField.uint64("oae.tick.round_ns", "Sender's round (ns)")
f.opcode = ProtoField.uint8("oae.verb.opcode", "Verb", base.DEC, OPCODES)
f.words = ProtoField.uint8("oae.verb.count", "Words")
f.region = ProtoField.uint16("oae.verb.region", "Region id")
f.key = ProtoField.uint32("oae.verb.key", "Region key", base.HEX)
f.offset = ProtoField.uint32("oae.verb.offset", "Offset")
f.len = ProtoField.uint16("oae.verb.len", "Length")
f.data = ProtoField.bytes("oae.verb.data", "Data")
f.expected = ProtoField.uint64("oae.verb.expected", "Expected")
f.new = ProtoField.uint64("oae.verb.new", "New")
f.add = ProtoField.uint64("oae.verb.add", "Add")
f.old = ProtoField.uint64("oae.result.old", "Old value")
f.committed = ProtoField.bool("oae.result.committed", "Committed")
f.result_count = ProtoField.uint8("oae.result.count", "Words")
f.result_len = ProtoField.uint16("oae.result.len", "Length")
f.result_data = ProtoField.bytes("oae.result.data", "Data")
f.reason = ProtoField.uint8("oae.refuse.reason", "Reason", base.DEC, REFUSALS)
f.view = ProtoField.uint64("oae.advert.view", "View number")
f.digest = ProtoField.uint64("oae.advert.digest", "View digest", base.HEX)
f.entries = ProtoField.uint8("oae.advert.count", "Entries")
f.page_first = ProtoField.uint64("oae.advert.first", "Page from node", base.HEX)
f.page_last = ProtoField.uint64("oae.advert.last", "Page to node", base.HEX)
f.entry_node = ProtoField.uint64("oae.advert.node_id", "Node id", base.HEX)
f.entry_epoch = ProtoField.uint32("oae.advert.epoch", "Epoch")
f.entry_route = ProtoField.uint8("oae.advert.route_hops", "Route hops")
f.entry_reach = ProtoField.uint8("oae.advert.reach_hops", "Reach hops")
f.fwd_dst = ProtoField.uint64("oae.forward.dst", "Destination node", base.HEX)
f.fwd_src = ProtoField.uint64("oae.forward.src", "Source node", base.HEX)
f.fwd_hops = ProtoField.uint8("oae.forward.hops_left", "Hops left")
f.fwd_kind = ProtoField.uint8("oae.forward.kind", "Kind", base.DEC, FORWARD_KINDS)
f.fwd_len = ProtoField.uint16("oae.forward.body_len", "Body length")
f.auth = ProtoField.bytes("oae.auth", "Authentication trailer")
f.auth_key = ProtoField.uint8("oae.auth.key_number", "Key number")
f.auth_accepts = ProtoField.uint8("oae.auth.accepts", "Keys accepted", base.HEX)
f.auth_pn = ProtoField.uint64("oae.auth.packet_number", "Packet number")
f.auth_tag = ProtoField.bytes("oae.auth.tag", "AES-128-GMAC tag (not checked: needs the key)")
f.init_epoch = ProtoField.uint32("oae.resolve.initiator_epoch", "Initiator epoch")
f.target_epoch = ProtoField.uint32("oae.resolve.target_epoch", "Target epoch")
f.decision = ProtoField.bytes("oae.resolve.decision", "Decision context slice")
f.outcome = ProtoField.uint8("oae.resolve.outcome", "Outcome", base.DEC, OUTCOMES)
f.malformed = ProtoField.string("oae.malformed", "Malformed")
f.crc = ProtoField.uint32("oae.crc", "CRC32C", base.HEX)
f.crc_ok = ProtoField.bool("oae.crc.good", "CRC32C good")

local e_bad_crc = ProtoExpert.new("oae.crc.bad", "CRC32C does not match", expert.group.CHECKSUM, expert.severity.ERROR)
local e_length = ProtoExpert.new("oae.length.bad", "Length differs from the class's size", expert.group.MALFORMED, expert.severity.ERROR)
local e_unknown = ProtoExpert.new("oae.transition.unknown", "Unknown state or transition", expert.group.MALFORMED, expert.severity.ERROR)
local e_unmatched = ProtoExpert.new("oae.reflected.unmatched", "Reflects no frame of this capture", expert.group.SEQUENCE, expert.severity.NOTE)
local e_malformed = ProtoExpert.new("oae.malformed.expert", "A receiver refuses this frame", expert.group.MALFORMED, expert.severity.ERROR)
oae.experts = { e_bad_crc, e_length, e_unknown, e_unmatched, e_malformed }

-- Every read of a length the frame itself gives goes through this: past
-- the payload area (which ends at the CRC) the payload does not decode.
local limit = 0
local function need(at, len)
    if at + len > limit then
        error("needs bytes " .. at .. ".." .. (at + len) .. " of a payload ending at " .. limit, 0)
    end
end

-- CRC32C (Castagnoli, reflected polynomial 0x82F63B78), table driven.
local CRC_TABLE = {}
for i = 0, 255 do
    local c = i
    for _ = 1, 8 do
        if bit.band(c, 1) ~= 0 then
            c = bit.bxor(bit.rshift(c, 1), 0x82F63B78)
        else
            c = bit.rshift(c, 1)
        end
    end
    CRC_TABLE[i] = c
end

local function crc32c(tvb, offset, len)
    -- One ByteArray for the whole frame, not a range object per byte.
    local bytes = tvb:range(offset, len):bytes()
    local crc = 0xFFFFFFFF
    for i = 0, len - 1 do
        local b = bytes:get_index(i)
        crc = bit.bxor(bit.rshift(crc, 8), CRC_TABLE[bit.band(bit.bxor(crc, b), 0xFF)])
    end
    return bit.bxor(crc, 0xFFFFFFFF)
end

-- Context slices sent, by sender, receiver and slice bytes: the latest
-- frame number. Answers are matched on the first pass and remembered.
local sent = {}
local answered = {}
local opcode_of = {}

oae.init = function()
    sent = {}
    answered = {}
    opcode_of = {}
end

local function hex(tvb, offset, len)
    return tostring(tvb:range(offset, len):bytes())
end

local function add_verb(tvb, p, tree)
    local op = tvb(p, 1):uint()
    tree:add(f.opcode, tvb(p, 1))
    tree:add(f.words, tvb(p + 1, 1))
    tree:add(f.region, tvb(p + 2, 2))
    tree:add(f.key, tvb(p + 4, 4))
    local name = OPCODES[op] or ("opcode " .. op)
    local q = p + 8
    if op == 6 then
        local count = tvb(p + 1, 1):uint()
        need(q, 20 * count)
        for i = 0, count - 1 do
            local w = tree:add(oae, tvb(q + 20 * i, 20), "Word " .. i)
            w:add(f.offset, tvb(q + 20 * i, 4))
            w:add(f.expected, tvb(q + 20 * i + 4, 8))
            w:add(f.new, tvb(q + 20 * i + 12, 8))
        end
        return op, name .. " of " .. count .. " words"
    end
    tree:add(f.offset, tvb(q, 4))
    local at = " @" .. tvb(q, 4):uint()
    if op == 1 then
        tree:add(f.len, tvb(q + 4, 2))
        return op, name .. at .. " len " .. tvb(q + 4, 2):uint()
    elseif op == 2 or op == 7 then
        local len = tvb(q + 4, 2):uint()
        need(q + 6, len)
        tree:add(f.len, tvb(q + 4, 2))
        if len > 0 then
            tree:add(f.data, tvb(q + 6, len))
        end
        return op, name .. at .. " len " .. len
    elseif op == 3 then
        tree:add(f.expected, tvb(q + 4, 8))
        tree:add(f.new, tvb(q + 12, 8))
    elseif op == 4 then
        tree:add(f.add, tvb(q + 4, 8))
    elseif op == 5 then
        tree:add(f.new, tvb(q + 4, 8))
    end
    return op, name .. at
end

local function add_result(tvb, p, tree, op)
    if op == nil then
        return "result (request not in this capture)"
    end
    if op == 1 or op == 7 then
        local len = tvb(p, 2):uint()
        need(p + 2, len)
        tree:add(f.result_len, tvb(p, 2))
        if len > 0 then
            tree:add(f.result_data, tvb(p + 2, len))
        end
        return "len " .. len
    elseif op == 3 or op == 4 or op == 5 then
        tree:add(f.old, tvb(p, 8))
        return "old " .. tostring(tvb(p, 8):uint64())
    elseif op == 6 then
        local count = tvb(p + 1, 1):uint()
        need(p + 2, 8 * count)
        tree:add(f.committed, tvb(p, 1))
        tree:add(f.result_count, tvb(p + 1, 1))
        for i = 0, count - 1 do
            tree:add(f.old, tvb(p + 2 + 8 * i, 8))
        end
        return (tvb(p, 1):uint() == 1) and "committed" or "not committed"
    end
    return "written"
end

local function add_advert(tvb, p, tree)
    tree:add(f.view, tvb(p, 8))
    tree:add(f.digest, tvb(p + 8, 8))
    tree:add(f.entries, tvb(p + 16, 1))
    tree:add(f.page_first, tvb(p + 17, 8))
    tree:add(f.page_last, tvb(p + 25, 8))
    local count = tvb(p + 16, 1):uint()
    need(p + 33, 14 * count)
    for i = 0, count - 1 do
        local at = p + 33 + 14 * i
        local e = tree:add(oae, tvb(at, 14), "Entry " .. i)
        e:add(f.entry_node, tvb(at, 8))
        e:add(f.entry_epoch, tvb(at + 8, 4))
        e:add(f.entry_route, tvb(at + 12, 1))
        e:add(f.entry_reach, tvb(at + 13, 1))
    end
    return count .. " entries"
end

local dissect_frame

local function add_forward(tvb, p, tree, pinfo)
    tree:add(f.fwd_dst, tvb(p, 8))
    tree:add(f.fwd_src, tvb(p + 8, 8))
    tree:add(f.fwd_hops, tvb(p + 16, 1))
    tree:add(f.fwd_kind, tvb(p + 17, 1))
    tree:add(f.fwd_len, tvb(p + 18, 2))
    local kind = tvb(p + 17, 1):uint()
    local len = tvb(p + 18, 2):uint()
    local body = p + 20
    need(body, len)
    if kind == 1 and len >= 64 then
        local outer = limit
        local inner = dissect_frame(tvb(body, len):tvb(), pinfo, tree, nil, nil)
        limit = outer
        return "path frame: " .. inner
    elseif kind == 2 or kind == 3 then
        tree:add(f.init_epoch, tvb(body, 4))
        tree:add(f.target_epoch, tvb(body + 4, 4))
        tree:add(f.decision, tvb(body + 8, 8))
        if kind == 3 then
            tree:add(f.outcome, tvb(body + 16, 1))
        end
    end
    return FORWARD_KINDS[kind] or ("kind " .. kind)
end

-- Dissects one OAE frame at the start of `tvb`; `src` and `dst` name the
-- link's ends (nil for a frame relayed inside a FORWARD, which is not
-- matched). Returns a one-line summary.
-- Bytes an authenticated link's frames carry after the OAE frame.
local AUTH_TRAILER = 24

dissect_frame = function(tvb, pinfo, parent, src, dst)
    local len = tvb:len()
    local class = bit.band(tvb(0, 1):uint(), 0x0F)
    local size = bit.lshift(64, class)
    local tree = parent:add(oae, tvb(0, math.min(len, size)))
    tree:add(f.version, tvb(0, 1))
    tree:add(f.class, tvb(0, 1))
    tree:add(f.frame_len, tvb(0, 1), size)
    local problems = {}
    local function refuse(why)
        problems[#problems + 1] = why
    end
    if bit.rshift(tvb(0, 1):uint(), 4) ~= 2 then
        refuse("unknown version " .. bit.rshift(tvb(0, 1):uint(), 4))
    end
    if class > 4 then
        refuse("class " .. class .. " above 4")
    end
    if len < size then
        tree:add_proto_expert_info(e_length, "frame of " .. len .. " bytes, class " .. class .. " is " .. size)
        tree:add(f.malformed, tvb(0, len), "truncated")
        return "truncated"
    end
    if len == size + AUTH_TRAILER then
        -- An authenticated link's frame (docs/PROTOCOL.md).
        local a = tree:add(f.auth, tvb(size, AUTH_TRAILER))
        a:add(f.auth_key, tvb(size, 1))
        a:add(f.auth_accepts, tvb(size + 1, 1))
        a:add(f.auth_pn, tvb(size + 2, 6), UInt64(tvb(size + 4, 4):uint(), tvb(size + 2, 2):uint()))
        a:add(f.auth_tag, tvb(size + 8, 16))
    elseif len > size then
        tree:add_proto_expert_info(e_length, "frame of " .. len .. " bytes, class " .. class .. " is " .. size)
        refuse("longer than its class")
    end
    limit = size - 4
    tree:add(f.level, tvb(1, 1))
    tree:add(f.role, tvb(1, 1))
    if bit.band(tvb(1, 1):uint(), 0xF8) ~= 0 or bit.band(tvb(1, 1):uint(), 3) == 3 then
        refuse("reserved liveness bits set")
    end
    tree:add(f.state, tvb(2, 1))
    tree:add(f.code, tvb(3, 1))
    tree:add(f.prev_committed, tvb(3, 1))
    tree:add(f.reverse, tvb(3, 1))
    local state = tvb(2, 1):uint()
    local name = (TRANSITIONS[state] or {})[bit.band(tvb(3, 1):uint(), 0x1F)]
    tree:add(f.transition, tvb(2, 2), name or "unknown")
    if name == nil then
        tree:add_proto_expert_info(e_unknown)
        refuse("unknown transition")
    end
    local reverse = bit.band(tvb(3, 1):uint(), 0x80) ~= 0
    local reverse_names = { REFUSE = true, REVERSE = true, REVERSE_ACK = true }
    if name ~= nil and reverse ~= (reverse_names[name] == true) then
        refuse("direction bit disagrees with " .. name)
    end
    if bit.band(tvb(3, 1):uint(), 0x20) ~= 0 then
        refuse("reserved transition bit set")
    end
    if tvb(8, 4):uint() == 0 then
        refuse("zero sender epoch")
    end
    if state == 2 then
        tree:add(f.slot, tvb(4, 2))
        tree:add(f.seq, tvb(6, 2))
    elseif name == "TICK" or name == "TOCK" then
        tree:add(f.tick, tvb(4, 4))
    elseif name == "HANDSHAKE" then
        tree:add(f.handshake_message, tvb(4, 4))
    else
        tree:add(f.field, tvb(4, 4))
    end
    tree:add(f.sender_epoch, tvb(8, 4))
    tree:add(f.receiver_epoch, tvb(12, 4))
    tree:add(f.order, tvb(16, 4))
    tree:add(f.seen, tvb(20, 4))
    local crc = tvb(size - 4, 4):uint()
    tree:add(f.crc, tvb(size - 4, 4))
    local good = crc32c(tvb, 0, size - 4) == crc
    tree:add(f.crc_ok, tvb(size - 4, 4), good)
    if not good then
        tree:add_proto_expert_info(e_bad_crc)
    end

    local n = pinfo.number
    -- A receiver drops a frame with a bad CRC: nothing can answer it.
    if src ~= nil and good and not pinfo.visited then
        sent[src .. ">" .. dst .. ">" .. hex(tvb, 0, 8)] = n
    end
    local p = 24
    local summary = name or "unknown"
    if state == 2 then
        summary = summary .. " slot " .. tvb(4, 2):uint() .. " seq " .. tvb(6, 2):uint()
    end
    local request = nil
    if name ~= nil and REFLECTS[name] then
        tree:add(f.reflected, tvb(p, 8))
        if src ~= nil then
            if not pinfo.visited then
                -- The reflection is the answered slice with halves swapped.
                local original = hex(tvb, p + 4, 4) .. hex(tvb, p, 4)
                answered[n] = sent[dst .. ">" .. src .. ">" .. original]
            end
            request = answered[n]
            tree:add(f.reflected_ok, tvb(p, 8), request ~= nil)
            if request ~= nil then
                tree:add(f.answers, tvb(p, 8), request)
            else
                tree:add_proto_expert_info(e_unmatched)
            end
        end
        p = p + 8
    end

    local decoded, failure = pcall(function()
    if name == "HELLO" then
        -- Announcements go to a multicast MAC (D2): the first octet's low bit.
        if dst ~= nil and tonumber(string.sub(dst, 1, 2), 16) % 2 == 1 then
            tree:add(f.announcement, true)
            summary = summary .. " announcement"
        end
        tree:add(f.hello_node, tvb(p, 8))
        tree:add(f.hello_slots, tvb(p + 8, 2))
        tree:add(f.hello_credits, tvb(p + 10, 2))
        tree:add(f.hello_max_class, tvb(p + 12, 1))
        summary = summary .. " level " .. bit.band(tvb(1, 1):uint(), 3) .. " epochs "
            .. tvb(8, 4):uint() .. "/" .. tvb(12, 4):uint()
    elseif name == "TICK" then
        tree:add(f.round_ns, tvb(p, 8))
    elseif name == "HANDSHAKE" then
        summary = summary .. " " .. add_handshake(tvb, p, tree)
    elseif name == "REQUEST" then
        local op, what = add_verb(tvb, p, tree)
        if src ~= nil then
            opcode_of[n] = op
        end
        summary = summary .. " " .. what
    elseif name == "ECHO" then
        summary = summary .. " " .. add_result(tvb, p, tree, request and opcode_of[request])
    elseif name == "REFUSE" then
        tree:add(f.reason, tvb(p, 1))
        summary = summary .. " " .. (REFUSALS[tvb(p, 1):uint()] or "reason " .. tvb(p, 1):uint())
    elseif name == "ADVERT" then
        summary = summary .. " " .. add_advert(tvb, p, tree)
    elseif name == "FORWARD" then
        summary = summary .. " " .. add_forward(tvb, p, tree, pinfo)
    end
    end)
    if not decoded then
        refuse("payload does not decode: " .. tostring(failure))
    end
    if #problems > 0 then
        local why = table.concat(problems, "; ")
        tree:add(f.malformed, tvb(0, size), why)
        tree:add_proto_expert_info(e_malformed, why)
        summary = summary .. " [malformed: " .. why .. "]"
    end
    if not good then
        summary = summary .. " [bad CRC]"
    end
    tree:append_text(": " .. summary)
    return summary
end

-- A HANDSHAKE's Noise message (PROTOCOL.md, "Key agreement"): message 1
-- is e and the initiator's payload in clear; 2 and 3 are sealed.
add_handshake = function(tvb, p, tree)
    local message = tvb(4, 4):uint()
    local len = tvb(p, 2):uint()
    tree:add(f.handshake_len, tvb(p, 2))
    if message < 1 or message > 3 then
        error("message number " .. message .. " is not 1, 2 or 3")
    end
    if len > 108 or p + 2 + len > tvb:len() - 4 then
        error("Noise message of " .. len .. " bytes is longer than 108")
    end
    local m = p + 2
    if message == 1 then
        tree:add(f.handshake_ephemeral, tvb(m, 32))
        if len >= 44 then
            tree:add(f.handshake_epoch, tvb(m + 32, 4))
            tree:add(f.handshake_node, tvb(m + 36, 8))
        end
    elseif message == 2 then
        tree:add(f.handshake_ephemeral, tvb(m, 32))
        tree:add(f.handshake_sealed, tvb(m + 32, len - 32))
    else
        tree:add(f.handshake_sealed, tvb(m, len))
    end
    return "message " .. message .. " (" .. len .. " bytes)"
end

function oae.dissector(tvb, pinfo, tree)
    pinfo.cols.protocol = "OAE"
    if tvb:len() < 64 then
        local t = tree:add(oae, tvb())
        t:add_proto_expert_info(e_length, "shorter than the smallest frame (64 bytes)")
        t:add(f.malformed, tvb(), "shorter than 64 bytes")
        pinfo.cols.info = "short OAE frame"
        return tvb:len()
    end
    local summary = dissect_frame(tvb, pinfo, tree, tostring(pinfo.dl_src), tostring(pinfo.dl_dst))
    pinfo.cols.info = summary
    return tvb:len()
end

DissectorTable.get("ethertype"):add(0x88B5, oae)

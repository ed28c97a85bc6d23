//! Whether a TCP port has a listener in this network namespace: how a
//! parent knows a server child (libfabric's `fi_pingpong`, whose readiness
//! is only its listening socket) is ready for its client.

/// True when a socket listens on TCP `port` (any address, IPv4 or IPv6) in
/// the calling thread's network namespace, from `/proc/net/tcp{,6}`.
pub fn listening(port: u16) -> bool {
    listening_at("/proc/net", port)
}

/// [`listening`] in the network namespace of process `pid` (a server
/// started in a namespace of its own).
pub fn listening_seen_by(pid: u32, port: u16) -> bool {
    listening_at(&format!("/proc/{pid}/net"), port)
}

fn listening_at(dir: &str, port: u16) -> bool {
    ["tcp", "tcp6"].iter().any(|table| {
        std::fs::read_to_string(format!("{dir}/{table}")).is_ok_and(|text| listens_in(&text, port))
    })
}

/// `listening` over one table's text.
fn listens_in(table: &str, port: u16) -> bool {
    // Rows: "sl local_address rem_address st ...", the address as
    // HEXADDR:HEXPORT and the state 0A for LISTEN.
    let port = format!(":{port:04X}");
    table.lines().skip(1).any(|row| {
        let mut fields = row.split_whitespace();
        let local = fields.nth(1);
        let state = fields.nth(1);
        local.is_some_and(|l| l.ends_with(&port)) && state == Some("0A")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_listening_row_is_found_and_a_connected_one_is_not() {
        let table = "  sl  local_address rem_address   st tx_queue rx_queue\n\
                     0: 00000000:B9E8 00000000:0000 0A 00000000:00000000\n\
                     1: 0100007F:1F90 0100007F:C350 01 00000000:00000000\n";
        assert!(listens_in(table, 0xB9E8));
        assert!(!listens_in(table, 0x1F90), "established, not listening");
        assert!(!listens_in(table, 0x9E8));
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        assert!(listening(port));
        assert!(listening_seen_by(std::process::id(), port));
    }
}

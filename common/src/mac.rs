//! Ethernet addresses as text (`aa:bb:cc:dd:ee:ff`), as configurations,
//! `ip link` and the tests write them.

use std::format;
use std::string::String;

/// Formats `aa:bb:cc:dd:ee:ff`.
pub fn format_mac(m: [u8; 6]) -> String {
    format!(
        "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
        m[0], m[1], m[2], m[3], m[4], m[5]
    )
}

/// Parses `aa:bb:cc:dd:ee:ff`: six two-digit hex bytes, nothing else.
pub fn parse_mac(s: &str) -> Option<[u8; 6]> {
    let mut mac = [0u8; 6];
    let mut parts = s.split(':');
    for byte in &mut mac {
        let part = parts.next()?;
        if part.len() != 2 || !part.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        *byte = u8::from_str_radix(part, 16).ok()?;
    }
    parts.next().is_none().then_some(mac)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_macs() {
        assert_eq!(
            parse_mac("02:00:0a:ff:10:01"),
            Some([2, 0, 0x0a, 0xff, 0x10, 1])
        );
        assert_eq!(parse_mac("02:00:0a:ff:10"), None);
        assert_eq!(parse_mac("02:00:0a:ff:10:01:07"), None);
        assert_eq!(parse_mac("zz:00:0a:ff:10:01"), None);
        assert_eq!(parse_mac("2:0:a:ff:10:1"), None);
        assert_eq!(parse_mac("+2:00:0a:ff:10:01"), None);
        assert_eq!(parse_mac("02:00:0a:ff:10:é"), None);
    }

    #[test]
    fn formats_what_it_parses() {
        let mac = [0x02, 0x0a, 0xf0, 0, 1, 0xff];
        assert_eq!(format_mac(mac), "02:0a:f0:00:01:ff");
        assert_eq!(parse_mac(&format_mac(mac)), Some(mac));
    }
}

//! An AF_PACKET socket on one interface, for OAE's EtherType only: how the
//! tester puts frames on the IUT's link and takes the IUT's off it.

use std::io;
use std::time::Duration;

use crate::frame::ETHERTYPE;

pub struct RawSocket {
    fd: libc::c_int,
    pub mac: [u8; 6],
}

impl RawSocket {
    pub fn open(iface: &str) -> io::Result<RawSocket> {
        let name = std::ffi::CString::new(iface).map_err(|_| io::ErrorKind::InvalidInput)?;
        // SAFETY: a plain C string, valid for the call.
        #[allow(unsafe_code)]
        let index = unsafe { libc::if_nametoindex(name.as_ptr()) };
        if index == 0 {
            return Err(io::Error::other(format!("no interface {iface}")));
        }
        let protocol = ETHERTYPE.to_be() as libc::c_int;
        // SAFETY: creates a descriptor; no memory is passed.
        #[allow(unsafe_code)]
        let fd = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW, protocol) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        let socket = RawSocket {
            fd,
            mac: read_mac(iface)?,
        };
        // SAFETY: sockaddr_ll is plain data; zeroed is a valid value.
        #[allow(unsafe_code)]
        let mut addr: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        addr.sll_family = libc::AF_PACKET as u16;
        addr.sll_protocol = ETHERTYPE.to_be();
        addr.sll_ifindex = index as i32;
        // SAFETY: `addr` outlives the call and its size is passed with it.
        #[allow(unsafe_code)]
        let bound = unsafe {
            libc::bind(
                fd,
                (&addr as *const libc::sockaddr_ll).cast(),
                std::mem::size_of::<libc::sockaddr_ll>() as u32,
            )
        };
        if bound < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(socket)
    }

    /// Sends `oae` to `to` in an Ethernet II frame.
    pub fn send(&self, to: [u8; 6], oae: &[u8]) -> io::Result<()> {
        let mut frame = Vec::with_capacity(14 + oae.len());
        frame.extend(to);
        frame.extend(self.mac);
        frame.extend(ETHERTYPE.to_be_bytes());
        frame.extend(oae);
        // SAFETY: `frame` is valid for its length during the call.
        #[allow(unsafe_code)]
        let sent = unsafe { libc::send(self.fd, frame.as_ptr().cast(), frame.len(), 0) };
        if sent < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// The next OAE frame addressed to this interface (source MAC and OAE
    /// bytes), waiting at most `limit`.
    pub fn recv(&self, limit: Duration) -> io::Result<Option<([u8; 6], Vec<u8>)>> {
        let mut pfd = libc::pollfd {
            fd: self.fd,
            events: libc::POLLIN,
            revents: 0,
        };
        let ms = limit.as_millis().min(i32::MAX as u128) as i32;
        // SAFETY: one pollfd, valid during the call.
        #[allow(unsafe_code)]
        let ready = unsafe { libc::poll(&mut pfd, 1, ms) };
        if ready < 0 {
            let e = io::Error::last_os_error();
            return if e.kind() == io::ErrorKind::Interrupted {
                Ok(None)
            } else {
                Err(e)
            };
        }
        if ready == 0 {
            return Ok(None);
        }
        let mut buf = [0u8; 2048];
        // SAFETY: `buf` is valid for its length during the call.
        #[allow(unsafe_code)]
        let n = unsafe { libc::recv(self.fd, buf.as_mut_ptr().cast(), buf.len(), 0) };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        let n = n as usize;
        if n < 14 || buf[..6] != self.mac {
            return Ok(None);
        }
        let from: [u8; 6] = buf[6..12].try_into().unwrap();
        Ok(Some((from, buf[14..n].to_vec())))
    }
}

impl Drop for RawSocket {
    fn drop(&mut self) {
        // SAFETY: the descriptor is ours and closed once.
        #[allow(unsafe_code)]
        unsafe {
            libc::close(self.fd);
        }
    }
}

fn read_mac(iface: &str) -> io::Result<[u8; 6]> {
    let text = std::fs::read_to_string(format!("/sys/class/net/{iface}/address"))?;
    parse_mac(text.trim()).ok_or_else(|| io::Error::other(format!("MAC of {iface}: {text}")))
}

pub fn parse_mac(s: &str) -> Option<[u8; 6]> {
    let bytes: Vec<u8> = s
        .split(':')
        .map(|p| u8::from_str_radix(p, 16))
        .collect::<Result<_, _>>()
        .ok()?;
    bytes.try_into().ok()
}

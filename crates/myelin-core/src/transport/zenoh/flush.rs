//! Let what zenoh still sends reach its peers before the session closes.
//!
//! zenoh 1.x closes a link by cancelling the task that writes its queued
//! batches and then writing what is left; a batch half written when the
//! task is cancelled is cut, and the peer drops what follows. A talker
//! that publishes a large message and exits at once (`myelin topic pub`
//! of a 120 KB string on a 1 Mbit/s link) lost the message this way, with
//! no error anywhere. So before the session closes, the context waits
//! until the TCP connections of its session's links (zenoh tells their
//! addresses) have nothing left that the peers have not acknowledged
//! (the kernel's `tx_queue` in `/proc/net/tcp{,6}`): zenoh's writer feeds
//! a socket as soon as it has room, so a connection that stays empty
//! means zenoh's queues are empty too. Other contexts' connections in the
//! same process do not count.
//!
//! The wait is bounded: it gives up when the unacknowledged bytes stop
//! going down for [`STALLED`] (a peer that stopped reading, a link that is
//! gone) or after [`LIMIT`] in all, and then says how many bytes may be
//! lost, in a warning: late, never silent. Where it cannot look (not
//! Linux, no `/proc`) it does not wait.

use std::collections::HashSet;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::{Duration, Instant};

/// A TCP connection: (local, remote).
pub(crate) type Connection = (SocketAddr, SocketAddr);

/// The longest a closing context waits for its peers to take what it sent.
pub(crate) const LIMIT: Duration = Duration::from_secs(10);

/// How long the bytes in flight may stay as they are before the wait
/// gives up on them.
pub(crate) const STALLED: Duration = Duration::from_secs(2);

/// How often the sockets are looked at.
const POLL: Duration = Duration::from_millis(2);

/// Wait until the TCP connections `conns` hold nothing unacknowledged
/// (seen twice, [`POLL`] apart: zenoh's writer may be about to feed one),
/// the bytes stall, or [`LIMIT`] passes. Returns the bytes still
/// unacknowledged when it gave up (0: everything was taken).
pub(crate) fn wait_until_sent(conns: &HashSet<Connection>) -> u64 {
    if conns.is_empty() {
        return 0;
    }
    let start = Instant::now();
    let (mut last, mut moved) = (u64::MAX, start);
    let mut empty = 0;
    loop {
        let Some(now_held) = unacknowledged(conns) else {
            return 0;
        };
        if now_held == 0 {
            empty += 1;
            if empty == 2 {
                return 0;
            }
        } else {
            empty = 0;
        }
        let now = Instant::now();
        if now_held < last {
            moved = now;
        }
        last = now_held;
        if now_held > 0 && (now - moved >= STALLED || now - start >= LIMIT) {
            return now_held;
        }
        std::thread::sleep(POLL);
    }
}

/// A link's end as a socket address: `tcp/127.0.0.1:7447` (metadata after
/// `?` or `#` ignored); `None` for other protocols.
pub(crate) fn tcp_address(locator: &str) -> Option<SocketAddr> {
    let rest = locator.strip_prefix("tcp/")?;
    let end = rest.find(['?', '#']).unwrap_or(rest.len());
    rest[..end].parse().ok()
}

/// Bytes written on `conns` that their peers have not acknowledged yet
/// (`tx_queue` of `/proc/net/tcp{,6}`); `None` where neither table can be
/// read.
fn unacknowledged(conns: &HashSet<Connection>) -> Option<u64> {
    let mut read_any = false;
    let mut held = 0u64;
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let Ok(text) = std::fs::read_to_string(table) else {
            continue;
        };
        read_any = true;
        held = held.saturating_add(held_by(&text, conns));
    }
    read_any.then_some(held)
}

/// The `tx_queue` bytes of the connections `conns` in one `/proc/net/tcp`
/// table (columns: sl, local, remote, state, tx_queue:rx_queue, ...).
fn held_by(table: &str, conns: &HashSet<Connection>) -> u64 {
    table
        .lines()
        .skip(1)
        .filter_map(|line| {
            let cols: Vec<&str> = line.split_whitespace().collect();
            let conn = (proc_address(cols.get(1)?)?, proc_address(cols.get(2)?)?);
            if !conns.contains(&conn) {
                return None;
            }
            let tx = cols.get(4)?.split(':').next()?;
            u64::from_str_radix(tx, 16).ok()
        })
        .fold(0, u64::saturating_add)
}

/// An address as `/proc/net/tcp{,6}` prints it: the IP's 32-bit words in
/// hex as the machine stores them (network byte order in memory), a colon,
/// the port in hex.
fn proc_address(text: &str) -> Option<SocketAddr> {
    let (ip, port) = text.split_once(':')?;
    let port = u16::from_str_radix(port, 16).ok()?;
    let mut bytes = Vec::with_capacity(16);
    for word in ip.as_bytes().chunks(8) {
        let word = u32::from_str_radix(std::str::from_utf8(word).ok()?, 16).ok()?;
        bytes.extend_from_slice(&word.to_ne_bytes());
    }
    let ip = match bytes.len() {
        4 => IpAddr::V4(Ipv4Addr::from(<[u8; 4]>::try_from(bytes).ok()?)),
        16 => {
            let v6 = Ipv6Addr::from(<[u8; 16]>::try_from(bytes).ok()?);
            // A v4 peer on a v6 socket: as zenoh writes it.
            v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4)
        }
        _ => return None,
    };
    Some(SocketAddr::new(ip, port))
}

#[cfg(test)]
mod tests {
    use super::*;

    // A listener, a connection to 127.0.0.1:7451 holding 0x1D4C0 bytes,
    // another process's connection to the same port, a line that is not
    // a socket's (on a little-endian machine, as Linux prints them).
    const TABLE: &str = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:1D1B 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 4242 1 0000000000000000 100 0 0 10 0
   1: 0100007F:9C40 0100007F:1D1B 01 0001D4C0:00000000 01:00000014 00000000     0        0 4243 1 0000000000000000 20 4 30 10 -1
   2: 0100007F:9C41 0100007F:1D1B 01 00000010:00000000 01:00000014 00000000     0        0 9999 1 0000000000000000 20 4 30 10 -1
   3: garbage
";

    fn conn(local: &str, remote: &str) -> Connection {
        (local.parse().unwrap(), remote.parse().unwrap())
    }

    /// Only the session's connections count, each by its `tx_queue` (hex);
    /// a line that is not a socket's is skipped.
    #[cfg(target_endian = "little")]
    #[test]
    fn the_bytes_held_are_the_sessions_connections_tx_queue() {
        let ours: HashSet<Connection> = [conn("127.0.0.1:40000", "127.0.0.1:7451")].into();
        assert_eq!(held_by(TABLE, &ours), 0x1D4C0);
        assert_eq!(held_by(TABLE, &HashSet::new()), 0);
        let theirs: HashSet<Connection> = [conn("127.0.0.1:40001", "127.0.0.1:7451")].into();
        assert_eq!(held_by(TABLE, &theirs), 0x10);
    }

    /// IPv6 words, and a v4 peer on a v6 socket, as Linux prints them.
    #[cfg(target_endian = "little")]
    #[test]
    fn proc_addresses_read_as_socket_addresses() {
        assert_eq!(
            proc_address("00000000000000000000000001000000:1D1B"),
            Some("[::1]:7451".parse().unwrap())
        );
        assert_eq!(
            proc_address("0000000000000000FFFF00000100007F:1D1B"),
            Some("127.0.0.1:7451".parse().unwrap())
        );
        assert_eq!(proc_address("zz:1"), None);
    }

    #[test]
    fn tcp_locators_are_socket_addresses_and_others_are_not() {
        assert_eq!(
            tcp_address("tcp/127.0.0.1:7447"),
            Some("127.0.0.1:7447".parse().unwrap())
        );
        assert_eq!(
            tcp_address("tcp/[::1]:7447#iface=lo"),
            Some("[::1]:7447".parse().unwrap())
        );
        assert_eq!(tcp_address("udp/127.0.0.1:7447"), None);
        assert_eq!(tcp_address("unixsock-stream/tmp/s"), None);
    }

    /// A session without TCP links does not wait; nor do connections the
    /// kernel does not know.
    #[test]
    fn nothing_in_flight_returns_at_once() {
        assert_eq!(wait_until_sent(&HashSet::new()), 0);
        let unknown: HashSet<Connection> = [conn("127.0.0.1:1", "127.0.0.1:2")].into();
        assert_eq!(wait_until_sent(&unknown), 0);
    }
}

//! What a connection speaks, recognised from the first bytes one side sent or
//! received (up to 16 are read by the sampler; see `linux::evidence`). Pure and
//! best effort: a signature that matches is strong evidence, no match means unknown.
//!
//! Signatures (NOTES-waits): HTTP/1.x request methods and the `HTTP/1.` status line;
//! the HTTP/2 preface `PRI * HTTP/2.0`; a TLS handshake record carrying a ClientHello
//! (`16 03 0x`, length, `01`) or ServerHello (`02`); PostgreSQL's SSLRequest and
//! GSSENCRequest, its StartupMessage (protocol 3.0), a simple Query (`'Q'`) or an
//! extended-protocol Parse (`'P'`) with a plausible length; a MySQL server greeting
//! (3-byte length, sequence 0, protocol 10); a Redis RESP array (`*<n>\r\n`); a MongoDB
//! message header with opcode OP_MSG (2013) or OP_QUERY (2004).
//!
//! `Direction` only weighs in for the MySQL greeting, which only a server sends (a
//! client receives it first, a server sends it first).

use crate::profile::Protocol;

/// Which way the bytes went, seen from the profiled process.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Direction {
    Send,
    Recv,
}

const HTTP_METHODS: [&[u8]; 9] = [
    b"GET ",
    b"POST ",
    b"PUT ",
    b"HEAD ",
    b"DELETE ",
    b"PATCH ",
    b"OPTIONS ",
    b"CONNECT ",
    b"TRACE ",
];

/// The protocol these first bytes belong to, when one signature matches.
pub fn recognise(first: &[u8], dir: Direction) -> Option<Protocol> {
    if first.starts_with(b"PRI * HTTP/2") {
        return Some(Protocol::Http2);
    }
    if first.starts_with(b"HTTP/1.") || HTTP_METHODS.iter().any(|m| first.starts_with(m)) {
        return Some(Protocol::Http);
    }
    if is_tls(first) {
        return Some(Protocol::Tls);
    }
    if is_postgres(first) {
        return Some(Protocol::Postgres);
    }
    if is_redis(first) {
        return Some(Protocol::Redis);
    }
    if is_mongodb(first) {
        return Some(Protocol::Mongodb);
    }
    if is_mysql_greeting(first, dir) {
        return Some(Protocol::Mysql);
    }
    None
}

fn be32(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_be_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

fn le32(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

/// A handshake record (22), TLS 1.0–1.3 record version, a Client/ServerHello.
fn is_tls(b: &[u8]) -> bool {
    matches!(b, [0x16, 0x03, 0x00..=0x04, _, _, 0x01 | 0x02, ..])
}

fn is_postgres(b: &[u8]) -> bool {
    // SSLRequest / GSSENCRequest: length 8, code 80877103 / 80877104.
    if be32(b, 0) == Some(8) && matches!(be32(b, 4), Some(80_877_103 | 80_877_104)) {
        return true;
    }
    // StartupMessage: a plausible length, protocol 3.0.
    if let (Some(len), Some(0x0003_0000)) = (be32(b, 0), be32(b, 4))
        && (9..=10_000).contains(&len)
    {
        return true;
    }
    // Query 'Q' or Parse 'P': a length that fits a message, then SQL text (a Parse may
    // start with an empty statement name, a NUL).
    let (Some(&tag), Some(len)) = (b.first(), be32(b, 1)) else {
        return false;
    };
    let text_follows = match b.get(5) {
        Some(&c) => c.is_ascii_graphic() || c == b' ' || (tag == b'P' && c == 0),
        None => false,
    };
    matches!(tag, b'Q' | b'P') && (5..1 << 26).contains(&len) && text_follows
}

/// `*<digits>\r\n`: a RESP array, how every Redis command is sent.
fn is_redis(b: &[u8]) -> bool {
    let Some(rest) = b.strip_prefix(b"*") else {
        return false;
    };
    let digits = rest.iter().take_while(|c| c.is_ascii_digit()).count();
    (1..=6).contains(&digits) && rest.get(digits..digits + 2) == Some(b"\r\n")
}

/// A 16-byte MongoDB header: messageLength, requestID, responseTo, opCode.
fn is_mongodb(b: &[u8]) -> bool {
    let (Some(len), Some(op)) = (le32(b, 0), le32(b, 12)) else {
        return false;
    };
    (16..=48_000_000).contains(&len) && matches!(op, 2013 | 2004)
}

/// Initial handshake packet: 3-byte length, sequence 0, protocol version 10, then the
/// server version string (a digit).
fn is_mysql_greeting(b: &[u8], dir: Direction) -> bool {
    let _ = dir; // either side may be profiled: a client receives it, a server sends it
    matches!(b, [l0, l1, 0, 0, 0x0a, v, ..] if (u32::from(*l0) | u32::from(*l1) << 8) >= 20 && v.is_ascii_digit())
}

#[cfg(test)]
mod tests {
    use super::*;
    use Direction::{Recv, Send};

    #[test]
    fn http_requests_and_responses() {
        assert_eq!(
            recognise(b"GET / HTTP/1.1\r\nHo", Send),
            Some(Protocol::Http)
        );
        assert_eq!(recognise(b"POST /api HTTP/1", Send), Some(Protocol::Http));
        assert_eq!(
            recognise(b"HTTP/1.0 200 OK\r\n", Recv),
            Some(Protocol::Http)
        );
        assert_eq!(
            recognise(b"PRI * HTTP/2.0\r\n", Send),
            Some(Protocol::Http2)
        );
        assert_eq!(recognise(b"GETX", Send), None);
    }

    #[test]
    fn tls_hello() {
        assert_eq!(
            recognise(&[0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00], Send),
            Some(Protocol::Tls)
        );
        assert_eq!(recognise(&[0x16, 0x03, 0x07, 0, 0, 1], Send), None);
        assert_eq!(recognise(&[0x17, 0x03, 0x03, 0, 0, 1], Send), None);
    }

    #[test]
    fn postgres_messages() {
        let ssl = [0, 0, 0, 8, 0x04, 0xd2, 0x16, 0x2f];
        assert_eq!(recognise(&ssl, Send), Some(Protocol::Postgres));
        let startup = [0, 0, 0, 0x54, 0, 3, 0, 0, b'u', b's'];
        assert_eq!(recognise(&startup, Send), Some(Protocol::Postgres));
        let query = b"Q\0\0\0\x0dSELECT 1\0";
        assert_eq!(recognise(query, Recv), Some(Protocol::Postgres));
        let parse = b"P\0\0\0\x20\0SELECT $1";
        assert_eq!(recognise(parse, Send), Some(Protocol::Postgres));
        assert_eq!(recognise(b"Q\xff\xff\xff\xffSEL", Send), None);
        assert_eq!(recognise(b"Quit now", Send), None);
    }

    #[test]
    fn redis_mongodb_mysql() {
        assert_eq!(
            recognise(b"*3\r\n$3\r\nSET\r\n", Send),
            Some(Protocol::Redis)
        );
        assert_eq!(recognise(b"*\r\n", Send), None);
        assert_eq!(recognise(b"*12x", Send), None);
        let mut mongo = [0u8; 16];
        mongo[0..4].copy_from_slice(&100u32.to_le_bytes());
        mongo[12..16].copy_from_slice(&2013u32.to_le_bytes());
        assert_eq!(recognise(&mongo, Send), Some(Protocol::Mongodb));
        mongo[12..16].copy_from_slice(&1u32.to_le_bytes());
        assert_eq!(recognise(&mongo, Send), None);
        let greeting = [0x4a, 0, 0, 0, 0x0a, b'8', b'.', b'0'];
        assert_eq!(recognise(&greeting, Recv), Some(Protocol::Mysql));
        assert_eq!(recognise(&[0x4a, 0, 0, 1, 0x0a, b'8'], Recv), None);
    }

    #[test]
    fn short_or_unknown_bytes_are_none() {
        assert_eq!(recognise(b"", Send), None);
        assert_eq!(recognise(b"ping", Send), None);
        assert_eq!(recognise(b"pong", Recv), None);
        assert_eq!(recognise(&[0xff; 16], Recv), None);
    }
}

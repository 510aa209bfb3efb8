//! The traffic of each socket of the tree, from the `sock:sock_send_length` /
//! `sock_recv_length` events (ret > 0, MSG_PEEK excluded: the caller filters) and
//! `sock:inet_sock_set_state` SYN_SENT. A pure state machine: events in time order in,
//! [`SocketTraffic`] rows out.
//!
//! # One row per connection
//!
//! A socket is known by (pid, `sk`: the kernel's socket address) and the descriptor
//! its first call used (DI). A new row starts when a (pid, sk) is first seen, when the
//! event's descriptor differs from the row's (the sk was freed and reused by another
//! socket), or after a SYN_SENT on that sk (the tree connected a new socket that got
//! a freed sk). Rows are never merged back.
//!
//! # Round trips
//!
//! The first call's direction is the socket's role: a client writes first, a server
//! reads first. Each change from the first direction to the other is one round trip
//! (a request and its reply), and its [`Turn`] is the thread and time of the first call
//! in the new direction: for a client, the first read of the reply; for a server, the
//! first write of its answer. Pipelined or multiplexed protocols count fewer turns
//! than requests (a lower bound).

use std::collections::{HashMap, HashSet};

use crate::profile::{MAX_TURNS_PER_SOCKET, Protocol, SocketTraffic, Turn};
use crate::sample::protocol::Direction;

/// One call that moved data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SockCall {
    pub pid: i32,
    pub tid: i32,
    /// The descriptor (DI), or -1 when the register did not hold one.
    pub fd: i32,
    pub sk: u64,
    pub dir: Direction,
    pub bytes: u64,
    /// CLOCK_MONOTONIC ns.
    pub time: u64,
}

/// What the caller should look up for a call: the row's index, whether the row is new
/// (resolve its descriptor) and whether this is its first call in this direction (read
/// its first bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Seen {
    pub row: usize,
    pub new: bool,
    pub first_in_direction: bool,
}

#[derive(Debug)]
struct Row {
    t: SocketTraffic,
    last: Direction,
}

/// The per-run socket state.
#[derive(Debug, Default)]
pub(crate) struct SockIo {
    active: HashMap<(i32, u64), usize>,
    /// sks the tree sent a SYN from, not yet used by a call.
    connecting: HashSet<u64>,
    rows: Vec<Row>,
}

impl SockIo {
    /// `inet_sock_set_state` to SYN_SENT in a task of the tree: a connection it opens.
    pub(crate) fn connecting(&mut self, sk: u64) {
        self.connecting.insert(sk);
        self.active.retain(|&(_, s), _| s != sk);
    }

    /// `inet_sock_set_state` to CLOSE in a task of the tree: no more traffic on this
    /// sk; a socket that later gets it is a new one (and a failed connect is forgotten).
    pub(crate) fn closed(&mut self, sk: u64) {
        self.connecting.remove(&sk);
        self.active.retain(|&(_, s), _| s != sk);
    }

    /// A call that moved data; events must come in time order.
    pub(crate) fn call(&mut self, c: SockCall) -> Seen {
        let key = (c.pid, c.sk);
        let current = self.active.get(&key).copied().filter(|&i| {
            let row = &self.rows[i].t;
            c.fd < 0 || row.fd < 0 || row.fd == c.fd
        });
        let fresh = self.connecting.remove(&c.sk);
        let (row, new) = match current {
            Some(i) if !fresh => (i, false),
            _ => {
                let i = self.rows.len();
                self.rows.push(Row {
                    t: empty(&c, fresh),
                    last: c.dir,
                });
                self.active.insert(key, i);
                (i, true)
            }
        };
        let first_in_direction = self.account(row, &c);
        Seen {
            row,
            new,
            first_in_direction,
        }
    }

    /// Count the call on its row; true when it is the row's first in its direction.
    fn account(&mut self, row: usize, c: &SockCall) -> bool {
        let r = &mut self.rows[row];
        let t = &mut r.t;
        let first = match c.dir {
            Direction::Send => t.sends == 0,
            Direction::Recv => t.recvs == 0,
        };
        match c.dir {
            Direction::Send => {
                t.sends += 1;
                t.bytes_sent = t.bytes_sent.saturating_add(c.bytes);
            }
            Direction::Recv => {
                t.recvs += 1;
                t.bytes_received = t.bytes_received.saturating_add(c.bytes);
            }
        }
        let role = if t.sent_first {
            Direction::Send
        } else {
            Direction::Recv
        };
        if c.dir != r.last && c.dir != role {
            t.round_trips += 1;
            if t.turns.len() < MAX_TURNS_PER_SOCKET {
                t.turns.push(Turn {
                    tid: c.tid,
                    time_ns: c.time,
                });
            }
        }
        r.last = c.dir;
        t.first_ns = t.first_ns.min(c.time);
        t.last_ns = t.last_ns.max(c.time);
        first
    }

    pub(crate) fn set_resource(&mut self, row: usize, resource: Option<u32>) {
        if let Some(r) = self.rows.get_mut(row) {
            r.t.resource = resource;
        }
    }

    /// The row's protocol, unless one is already known.
    pub(crate) fn set_protocol(&mut self, row: usize, p: Protocol) {
        if let Some(r) = self.rows.get_mut(row) {
            r.t.protocol.get_or_insert(p);
        }
    }

    pub(crate) fn has_protocol(&self, row: usize) -> bool {
        self.rows.get(row).is_some_and(|r| r.t.protocol.is_some())
    }

    /// The rows, times made relative to `t0` (earlier ones clamp to 0).
    pub(crate) fn finish(self, t0: u64) -> Vec<SocketTraffic> {
        self.rows
            .into_iter()
            .map(|r| {
                let mut t = r.t;
                t.first_ns = t.first_ns.saturating_sub(t0);
                t.last_ns = t.last_ns.saturating_sub(t0);
                for turn in &mut t.turns {
                    turn.time_ns = turn.time_ns.saturating_sub(t0);
                }
                t
            })
            .collect()
    }
}

fn empty(c: &SockCall, connected: bool) -> SocketTraffic {
    SocketTraffic {
        pid: c.pid,
        fd: c.fd,
        resource: None,
        sends: 0,
        recvs: 0,
        bytes_sent: 0,
        bytes_received: 0,
        round_trips: 0,
        connected,
        sent_first: c.dir == Direction::Send,
        first_ns: c.time,
        last_ns: c.time,
        protocol: None,
        turns: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Direction::{Recv, Send};

    fn call(fd: i32, sk: u64, dir: Direction, time: u64) -> SockCall {
        SockCall {
            pid: 10,
            tid: 11,
            fd,
            sk,
            dir,
            bytes: 4,
            time,
        }
    }

    #[test]
    fn a_client_counts_one_round_trip_per_request_and_reply() {
        let mut s = SockIo::default();
        s.connecting(0xa0);
        let mut t = 100;
        for _ in 0..25 {
            // A request in two writes, a reply in two reads.
            for dir in [Send, Send, Recv, Recv] {
                s.call(call(3, 0xa0, dir, t));
                t += 10;
            }
        }
        let rows = s.finish(50);
        assert_eq!(rows.len(), 1);
        let r = &rows[0];
        assert_eq!((r.round_trips, r.sends, r.recvs), (25, 50, 50));
        assert!(r.connected && r.sent_first);
        assert_eq!((r.bytes_sent, r.bytes_received), (200, 200));
        assert_eq!(r.turns.len(), 25);
        assert_eq!(r.turns[0].time_ns, 120 - 50, "the reply's first read");
        assert_eq!((r.first_ns, r.last_ns), (50, t - 10 - 50));
    }

    #[test]
    fn a_server_reads_first_and_its_turns_are_its_answers() {
        let mut s = SockIo::default();
        for (i, dir) in [Recv, Send, Recv, Send, Send, Recv].into_iter().enumerate() {
            s.call(call(4, 0xb0, dir, i as u64));
        }
        let r = &s.finish(0)[0];
        assert!(!r.sent_first && !r.connected);
        assert_eq!(r.round_trips, 2);
        assert_eq!(
            r.turns.iter().map(|t| t.time_ns).collect::<Vec<_>>(),
            [1, 3]
        );
    }

    #[test]
    fn first_calls_are_flagged_per_direction() {
        let mut s = SockIo::default();
        let a = s.call(call(3, 1, Send, 1));
        let b = s.call(call(3, 1, Send, 2));
        let c = s.call(call(3, 1, Recv, 3));
        assert!(a.new && a.first_in_direction);
        assert!(!b.new && !b.first_in_direction);
        assert!(!c.new && c.first_in_direction);
        s.set_protocol(a.row, Protocol::Http);
        s.set_protocol(a.row, Protocol::Redis);
        assert!(s.has_protocol(a.row));
        assert_eq!(s.finish(0)[0].protocol, Some(Protocol::Http));
    }

    #[test]
    fn reuse_of_an_fd_or_an_sk_starts_a_new_row() {
        let mut s = SockIo::default();
        s.call(call(3, 1, Send, 1));
        // fd 3 now names another socket (another sk): a new row.
        assert!(s.call(call(3, 2, Send, 2)).new);
        // sk 1 freed and reused by a socket on fd 5: a new row.
        assert!(s.call(call(5, 1, Recv, 3)).new);
        // A reconnect that got the same sk and fd: SYN_SENT splits it.
        s.connecting(1);
        let again = s.call(call(5, 1, Send, 4));
        assert!(again.new);
        // An event whose DI held no descriptor stays on the row.
        assert!(!s.call(call(-1, 1, Recv, 5)).new);
        // A failed connect leaves no mark on the socket that next gets its sk.
        s.connecting(9);
        s.closed(9);
        assert!(s.call(call(6, 9, Recv, 6)).new);
        let rows = s.finish(0);
        assert_eq!(rows.len(), 5);
        assert!(rows[3].connected && !rows[2].connected && !rows[4].connected);
        assert_eq!(rows[3].round_trips, 1);
    }

    #[test]
    fn turns_are_capped_but_counted() {
        let mut s = SockIo::default();
        let n = MAX_TURNS_PER_SOCKET as u64 + 10;
        for i in 0..n {
            s.call(call(3, 1, Send, 2 * i));
            s.call(call(3, 1, Recv, 2 * i + 1));
        }
        let r = &s.finish(0)[0];
        assert_eq!(r.round_trips, n);
        assert_eq!(r.turns.len(), MAX_TURNS_PER_SOCKET);
    }
}

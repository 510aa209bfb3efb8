//! What each off-CPU sample waited on, and the wait category that makes it.
//!
//! A blocked `read`/`recv`/`fsync`... names its descriptor (the recording's `waits`
//! table). An event-loop wait (`epoll_wait`, `poll`, `select`) names a set, not the
//! descriptor that ended it: that one is found from what the thread did on a socket
//! right after it woke (within [`READ_AFTER_WAKE_NS`]), from the socket tracepoints'
//! records (`sample::linux::sockio`):
//!
//! - it read the first bytes of a reply on a connection it is the client of (a
//!   request→response turn of a socket the tree sent first on): the wait is on that
//!   socket — a client waiting in epoll for its database waits on the database;
//! - it took work from a client of its own (a connection the tree did not open and
//!   read first on): it read the first request of a connection it had just accepted,
//!   or answered a request (the turn of a connection it serves): the wait was for a
//!   client, `idle`, on no resource — not network time on the connection it then
//!   served. A listening wait ends in an accept, which no tracepoint but a syscall one
//!   reports (those put every syscall of the tree on the slow path, +4–7% on
//!   syscall-heavy targets, NOTES-waits); the accepted connection's first read, by the
//!   same process right after the wake, stands for it — or after the thread waited
//!   again (for the request's bytes) within the window, having done nothing on a
//!   socket in between. The thread's own evidence comes first; an accepted
//!   connection's first read (whose thread is not recorded) counts only when the
//!   thread did nothing else on a socket in the window.
//!
//! The first of these after the wake decides. A connection the tree opened but where
//! the peer speaks first (a MySQL greeting) has its turns at the tree's requests, not
//! at the replies: it gives no evidence. The reading end of a socketpair (asyncio's
//! self-pipe) looks like a served connection: the one wait its first read follows is
//! idle (and still followed to its writer by the critical path when that is in the
//! tree).
//!
//! Pipes and eventfds have no tracepoint of their own (only syscall ones, at the cost
//! above): a wait their readiness ended is followed to their writer by the critical
//! path when the writer is in the tree (the wake-up names it), and is otherwise
//! unattributed.
//!
//! An event-loop wait that nothing in the run ended (no waker in the tree) and after
//! which the thread read no reply was woken by a timer or a client from outside the
//! run, or the run ended first: `idle` — when socket traffic and wake-ups were both
//! recorded; without them it stays `poll` (unknown).

use std::collections::HashMap;

use super::FastMap;

use crate::profile::{
    FrameKind, Protocol, ResourceKind, SampleKind, SampledProfile, SocketTraffic, WaitState,
};

use super::classify::{Categories, WaitCategory};
use super::resources::ResourceRole;
use super::roles;
use crate::packed::Sparse;

/// How soon after waking a thread must read a reply for the wait to be on that reply.
pub const READ_AFTER_WAKE_NS: u64 = 2_000_000;

/// Each resource's role and recognised protocol, by resource index; and which
/// event-loop waits a client of the tree's own ended.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Roles {
    pub role: Vec<ResourceRole>,
    pub protocol: Vec<Option<Protocol>>,
    /// By sample index: after this off-CPU sample the thread took a client's work on
    /// a connection it serves (see the module doc). Empty when the tree serves none.
    pub woken_by_client: Vec<bool>,
}

impl Roles {
    pub fn of(p: &SampledProfile) -> Roles {
        let mut protocol: Vec<Option<Protocol>> = vec![None; p.resources.len()];
        for s in &p.sockets {
            if let (Some(r), Some(proto)) = (s.resource, s.protocol)
                && let Some(slot) = protocol.get_mut(r as usize)
            {
                slot.get_or_insert(proto);
            }
        }
        let role = p
            .resources
            .iter()
            .zip(&protocol)
            .map(|(r, proto)| roles::role_of(r, *proto))
            .collect();
        Roles {
            role,
            protocol,
            woken_by_client: woken_by_client(p),
        }
    }

    pub fn role(&self, resource: Option<u32>) -> Option<ResourceRole> {
        self.role.get(resource? as usize).copied()
    }
}

/// What samples waited on (index into `resources`), for the samples that waited on a
/// known one, by sample index: a side table, as most samples (on-CPU ticks) wait on
/// nothing. A bit per sample finds a sample's entry; the entries are bit-packed.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SampleResources(Sparse<1>);

impl SampleResources {
    /// Sample `i`'s resource, if it waited on a known one.
    pub fn get(&self, i: usize) -> Option<u32> {
        self.0.get(i).map(|[r]| r as u32)
    }

    /// How many samples have a resource.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// (sample index, resource) for every sample with one, ascending.
    pub fn iter(&self) -> impl Iterator<Item = (usize, u32)> + '_ {
        self.0.iter().map(|(i, [r])| (i, r as u32))
    }

    /// Sample by sample, for the first `n` samples (tests read it so).
    #[cfg(test)]
    pub fn dense(&self, n: usize) -> Vec<Option<u32>> {
        (0..n).map(|i| self.get(i)).collect()
    }

    /// The table of (sample, resource) pairs ascending by sample; of two for one
    /// sample the later counts.
    fn of(pairs: impl Iterator<Item = (u32, u32)> + Clone) -> SampleResources {
        let mut out = Sparse::default();
        if pairs
            .clone()
            .all(|(i, r)| out.push(i as usize, [u64::from(r)]))
        {
            out.shrink_to_fit();
            return SampleResources(out);
        }
        // Out of order (a profile not read from a file, which `validate` would have
        // refused): sorted, stably, so that the later of two counts.
        let mut v: Vec<(u32, u32)> = pairs.collect();
        v.sort_by_key(|e| e.0);
        let mut out = Sparse::default();
        for (k, &(i, r)) in v.iter().enumerate() {
            if v.get(k + 1).is_none_or(|next| next.0 != i) {
                out.push(i as usize, [u64::from(r)]);
            }
        }
        out.shrink_to_fit();
        SampleResources(out)
    }
}

/// Critical-path time of the samples that waited on a resource, summed per (resource,
/// the sample's deepest call-tree node): what the per-resource and per-step tables read,
/// held per distinct pair instead of per sample.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ResourceCrit(FastMap<(u32, Option<u32>), u64>);

impl ResourceCrit {
    /// Add `ns` to resource `r` at node `leaf` (`None`: the sample has no node).
    pub fn add(&mut self, r: u32, leaf: Option<usize>, ns: u64) {
        let leaf = leaf.and_then(|l| u32::try_from(l).ok());
        let e = self.0.entry((r, leaf)).or_default();
        *e = e.saturating_add(ns);
    }

    /// (resource, node, ns) for every pair, in no order.
    pub fn iter(&self) -> impl Iterator<Item = (u32, Option<usize>, u64)> + '_ {
        (self.0.iter()).map(|(&(r, leaf), &ns)| (r, leaf.map(|l| l as usize), ns))
    }
}

/// Each sample's resource (index into `resources`), from the waits table, with
/// event-loop waits attributed to the reply read right after them.
pub fn sample_resources(p: &SampledProfile, cats: &Categories) -> SampleResources {
    let valid = |i: u32, r: u32| (i as usize) < p.samples.len() && (r as usize) < p.resources.len();
    let named = SampleResources::of(
        (p.waits.iter())
            .filter_map(|w| w.resource.get().map(|r| (w.sample, r)))
            .filter(move |&(i, r)| valid(i, r)),
    );
    let after = AfterWake::of(p);
    if after.is_empty() {
        return named;
    }
    let mut out = Sparse::default();
    let mut from_waits = named.iter().peekable();
    let mut at_exit: HashMap<u32, bool> = HashMap::new();
    for (i, s) in p.samples.iter().enumerate() {
        let known = from_waits.next_if(|e| e.0 == i).map(|e| e.1);
        let mut r = known;
        let handed = known.is_none()
            && s.kind
                == (SampleKind::OffCpu {
                    state: WaitState::Preempted,
                })
            && s.stack.get().is_some_and(|leaf| {
                *at_exit
                    .entry(leaf)
                    .or_insert_with(|| at_syscall_exit(p, leaf))
            });
        if handed || is_event_loop_wait(p, s.kind, cats.get(i), known) {
            let end = s.time_ns.saturating_add(s.weight_ns);
            if let Some(Woke::Reply(reply)) = after.next(s.pid, s.tid, end) {
                r = Some(reply);
            }
        }
        if let Some(r) = r {
            out.push(i, [u64::from(r)]);
        }
    }
    out.shrink_to_fit();
    SampleResources(out)
}

/// Whether stack `leaf` was switched out on its way back from a syscall (the kernel's
/// `exit_to_user_mode_loop` under the syscall entry, not an interrupt's exit): a task
/// the syscall woke took the CPU. A client preempted so right after sending a request
/// to a server on this host, which then reads the reply at once, waited for the server
/// (psql's 401 statements to a local PostgreSQL on 2 CPUs: 43 ms of such preemptions in
/// `send`, 34% of the run, against 20 ms blocked in `recv`): see [`sample_resources`].
fn at_syscall_exit(p: &SampledProfile, leaf: u32) -> bool {
    const EXITS: [&str; 3] = [
        "exit_to_user_mode_loop",
        "exit_to_usermode_loop",
        "syscall_exit_to_user_mode",
    ];
    let frames = p.stack_frames(leaf);
    // The kernel's frames: the innermost ones.
    let kernel: Vec<&str> = (frames.iter().rev())
        .take_while(|f| f.kind == FrameKind::Kernel)
        .map(|f| f.function.as_str())
        .collect();
    let interrupt = (kernel.iter()).any(|n| n.starts_with("irqentry_") || n.starts_with("asm_"));
    let exit = kernel.iter().any(|n| EXITS.contains(n));
    let syscall = (kernel.iter()).any(|n| *n == "do_syscall_64" || n.starts_with("entry_SYSCALL"));
    exit && syscall && !interrupt
}

/// By sample index, the off-CPU samples after which the thread took a client's work:
/// right after them, or after waiting again within the window with nothing done on a
/// socket in between (an accept, then a wait for the request's bytes).
fn woken_by_client(p: &SampledProfile) -> Vec<bool> {
    if !p.sockets.iter().any(served) {
        return Vec::new();
    }
    let after = AfterWake::of(p);
    let mut by_tid: HashMap<i32, Vec<usize>> = HashMap::new();
    for (i, s) in p.samples.iter().enumerate() {
        if matches!(s.kind, SampleKind::OffCpu { .. }) {
            by_tid.entry(s.tid).or_default().push(i);
        }
    }
    let mut out = vec![false; p.samples.len()];
    for waits in by_tid.values_mut() {
        waits.sort_unstable_by_key(|&i| p.samples.time_ns(i));
        // From the last wait back: the start of the next one, when it was for a client.
        let mut next_for_client: Option<u64> = None;
        for &i in waits.iter().rev() {
            let s = &p.samples.at(i);
            let end = s.time_ns.saturating_add(s.weight_ns);
            let mark = match after.next(s.pid, s.tid, end) {
                Some(w) => w == Woke::Client,
                None => next_for_client.is_some_and(|t| t >= end && t - end <= READ_AFTER_WAKE_NS),
            };
            out[i] = mark;
            next_for_client = mark.then_some(s.time_ns);
        }
    }
    out
}

/// An off-CPU event-loop wait whose own resource (if any) is a set, not a socket.
fn is_event_loop_wait(
    p: &SampledProfile,
    kind: SampleKind,
    cat: Option<WaitCategory>,
    resource: Option<u32>,
) -> bool {
    let off = matches!(kind, SampleKind::OffCpu { .. });
    let set = resource
        .and_then(|r| p.resources.get(r as usize))
        .is_none_or(|r| matches!(r.kind, ResourceKind::Epoll | ResourceKind::Eventfd));
    off && set && matches!(cat, Some(WaitCategory::Poll | WaitCategory::Other))
}

/// A connection the tree serves: it did not open it and read first on it (an accepted
/// one). Its turns are the tree's answers.
fn served(t: &SocketTraffic) -> bool {
    !t.connected && !t.sent_first
}

/// What a thread did on a socket right after a wake.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Woke {
    /// Read a reply on a connection it is the client of (resource index).
    Reply(u32),
    /// Took a client's work: answered on, or first read from, a connection it serves.
    Client,
}

/// The socket evidence of what ended a wait (see the module doc).
#[derive(Debug, Default)]
struct AfterWake {
    /// Per thread, in time order: reply reads and answers.
    by_tid: HashMap<i32, Vec<(u64, Woke)>>,
    /// Per process, in time order: first reads of the connections it serves.
    accepted: HashMap<i32, Vec<u64>>,
}

impl AfterWake {
    fn of(p: &SampledProfile) -> AfterWake {
        let mut a = AfterWake::default();
        for s in &p.sockets {
            let woke = if s.sent_first {
                match s.resource.filter(|&r| (r as usize) < p.resources.len()) {
                    Some(r) => Woke::Reply(r),
                    None => continue,
                }
            } else if served(s) {
                a.accepted.entry(s.pid).or_default().push(s.first_ns);
                Woke::Client
            } else {
                // Opened by the tree, the peer spoke first: turns are requests.
                continue;
            };
            for t in &s.turns {
                a.by_tid.entry(t.tid).or_default().push((t.time_ns, woke));
            }
        }
        for v in a.by_tid.values_mut() {
            v.sort_unstable_by_key(|&(t, _)| t);
        }
        for v in a.accepted.values_mut() {
            v.sort_unstable();
        }
        a
    }

    fn is_empty(&self) -> bool {
        self.by_tid.is_empty() && self.accepted.is_empty()
    }

    /// The first evidence on thread `tid` of process `pid` within the window after
    /// `end`: its own first, else a connection its process accepted.
    fn next(&self, pid: i32, tid: i32, end: u64) -> Option<Woke> {
        let own = self.by_tid.get(&tid).and_then(|v| {
            let &(t, w) = v.get(v.partition_point(|&(t, _)| t < end))?;
            (t - end <= READ_AFTER_WAKE_NS).then_some(w)
        });
        own.or_else(|| {
            let v = self.accepted.get(&pid)?;
            let &t = v.get(v.partition_point(|&t| t < end))?;
            (t - end <= READ_AFTER_WAKE_NS).then_some(Woke::Client)
        })
    }
}

/// The category of sample `i`: its own, refined by what it waited on; an event-loop
/// wait for a client of the tree's, or on nothing the run did, is `idle` (the latter
/// when that can be known; see the module doc).
pub fn category(
    p: &SampledProfile,
    i: usize,
    cat: WaitCategory,
    resource: Option<u32>,
    roles: &Roles,
) -> WaitCategory {
    let Some(s) = p.samples.get(i) else {
        return roles::refine(cat, roles.role(resource));
    };
    let for_client = roles.woken_by_client.get(i).copied().unwrap_or(false)
        && is_event_loop_wait(p, s.kind, Some(cat), resource);
    if for_client {
        return WaitCategory::Idle;
    }
    let refined = roles::refine(cat, roles.role(resource));
    let unexplained_poll = refined == WaitCategory::Poll
        && p.sockets_recorded
        && p.wakers_recorded
        && p.samples.waker(i).is_none();
    if unexplained_poll {
        WaitCategory::Idle
    } else {
        refined
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::{Resource, SocketTraffic, ThreadSample, Turn, WaitState};

    const MS: u64 = 1_000_000;

    fn poll_wait(tid: i32, at_ms: u64, dur_ms: u64) -> ThreadSample {
        ThreadSample {
            pid: 1,
            tid,
            time_ns: at_ms * MS,
            stack: None.into(),
            weight_ns: dur_ms * MS,
            kind: SampleKind::OffCpu {
                state: WaitState::Sleeping,
            },
        }
    }

    fn db() -> Resource {
        Resource {
            kind: ResourceKind::SocketTcp,
            name: "127.0.0.1:5432".into(),
            local: None,
            peer: Some("127.0.0.1:5432".into()),
            pid: 1,
            service: Some("postgres:5432".into()),
            peer_local: Some(true),
        }
    }

    fn traffic(turns: Vec<Turn>) -> SocketTraffic {
        SocketTraffic {
            pid: 1,
            fd: 5,
            resource: Some(0),
            sends: turns.len() as u64,
            recvs: turns.len() as u64,
            bytes_sent: 100,
            bytes_received: 100,
            round_trips: turns.len() as u64,
            connected: true,
            sent_first: true,
            first_ns: 0,
            last_ns: 100 * MS,
            protocol: Some(Protocol::Postgres),
            turns,
        }
    }

    #[test]
    fn an_epoll_wait_is_on_the_socket_read_right_after_it() {
        let p = SampledProfile {
            samples: vec![
                poll_wait(7, 0, 10),
                poll_wait(7, 20, 10),
                poll_wait(8, 0, 10),
            ]
            .into(),
            resources: vec![db()],
            sockets: vec![traffic(vec![
                Turn {
                    tid: 7,
                    time_ns: 10 * MS + 50_000,
                },
                // Read 5 ms after the second wake-up: too late to be what ended it.
                Turn {
                    tid: 7,
                    time_ns: 35 * MS,
                },
            ])],
            sockets_recorded: true,
            wakers_recorded: true,
            ..SampledProfile::default()
        };
        let cats = vec![WaitCategory::Poll; 3];
        let r = sample_resources(&p, &cats.clone().into());
        assert_eq!(r.dense(3), vec![Some(0), None, None]);
        let roles = Roles::of(&p);
        assert_eq!(roles.role, vec![ResourceRole::Database]);
        assert_eq!(category(&p, 0, cats[0], r.get(0), &roles), WaitCategory::Db);
        // Nothing read after it and no waker in the run: idle.
        assert_eq!(
            category(&p, 1, cats[1], r.get(1), &roles),
            WaitCategory::Idle
        );
    }

    #[test]
    fn without_socket_records_an_unexplained_poll_stays_unknown() {
        let p = SampledProfile {
            samples: vec![poll_wait(7, 0, 10)].into(),
            wakers_recorded: true,
            ..SampledProfile::default()
        };
        let roles = Roles::of(&p);
        assert_eq!(
            category(&p, 0, WaitCategory::Poll, None, &roles),
            WaitCategory::Poll
        );
    }

    /// An event-loop wait of thread `tid` from `from_us` to `to_us` (µs).
    fn wait_us(tid: i32, from_us: u64, to_us: u64) -> ThreadSample {
        ThreadSample {
            time_ns: from_us * 1000,
            weight_ns: (to_us - from_us) * 1000,
            ..poll_wait(tid, 0, 0)
        }
    }

    fn turn_us(tid: i32, at_us: u64) -> Turn {
        Turn {
            tid,
            time_ns: at_us * 1000,
        }
    }

    /// A connection the tree accepted from a client on this host (a loopback peer).
    fn accepted(turns: Vec<Turn>, first_us: u64) -> (Resource, SocketTraffic) {
        let r = Resource {
            kind: ResourceKind::SocketTcp,
            name: "127.0.0.1:40000".into(),
            local: Some("127.0.0.1:8080".into()),
            peer: Some("127.0.0.1:40000".into()),
            pid: 1,
            service: None,
            peer_local: Some(true),
        };
        let t = SocketTraffic {
            connected: false,
            sent_first: false,
            first_ns: first_us * 1000,
            protocol: Some(Protocol::Http),
            ..traffic(turns)
        };
        (r, t)
    }

    fn categories(p: &SampledProfile) -> Vec<WaitCategory> {
        let cats = vec![WaitCategory::Poll; p.samples.len()];
        let r = sample_resources(p, &cats.clone().into());
        let roles = Roles::of(p);
        (0..p.samples.len())
            .map(|i| category(p, i, cats[i], r.get(i), &roles))
            .collect()
    }

    #[test]
    fn a_server_s_waits_for_its_clients_are_idle_not_on_their_connections() {
        use WaitCategory::{Idle, Poll};
        // Listening until 10 ms; accept, then waiting for the request's bytes until
        // 25 ms (first read 25.05, answer 25.1); waiting for the next request until
        // 40 ms (answer 40.1); then a wait after which nothing happened on a socket.
        let (conn, served) = accepted(vec![turn_us(7, 25_100), turn_us(7, 40_100)], 25_050);
        let mut p = SampledProfile {
            samples: vec![
                wait_us(7, 0, 10_000),
                wait_us(7, 10_200, 25_000),
                wait_us(7, 26_000, 40_000),
                wait_us(7, 41_000, 60_000),
            ]
            .into(),
            resources: vec![conn],
            sockets: vec![served],
            sockets_recorded: true,
            ..SampledProfile::default()
        };
        let cats = vec![Poll; 4].into();
        assert_eq!(
            sample_resources(&p, &cats).dense(4),
            vec![None; 4],
            "not the connection"
        );
        // Without wake-ups, the accept and the answers alone say it.
        assert_eq!(categories(&p), vec![Idle, Idle, Idle, Poll]);
        // A wait that ended 3 ms before the next one began is not chained to it.
        p.samples.update(1, |s| *s = wait_us(7, 13_000, 25_000));
        assert_eq!(categories(&p)[..2], [Poll, Idle]);
        p.wakers_recorded = true;
        assert_eq!(categories(&p), vec![Idle; 4], "no waker in the run: idle");
    }

    #[test]
    fn the_thread_s_own_reply_read_comes_before_an_accept_of_its_process() {
        // Thread 7 reads a reply 1.5 ms after waking; 0.5 ms after it woke, another
        // thread of the process read a newly accepted connection's first request.
        let (conn, served) = accepted(Vec::new(), 10_500);
        let p = SampledProfile {
            samples: vec![wait_us(7, 0, 10_000), wait_us(8, 0, 10_400)].into(),
            resources: vec![db(), conn],
            sockets: vec![
                traffic(vec![turn_us(7, 11_500)]),
                SocketTraffic {
                    resource: Some(1),
                    ..served
                },
            ],
            sockets_recorded: true,
            ..SampledProfile::default()
        };
        assert_eq!(
            sample_resources(&p, &vec![WaitCategory::Poll; 2].into()).dense(2),
            vec![Some(0), None]
        );
        assert_eq!(categories(&p), vec![WaitCategory::Db, WaitCategory::Idle]);
    }

    /// A stack of `kernel` frames (outermost first) under the user frame `send`.
    fn kernel_stack(p: &mut SampledProfile, kernel: &[&str]) -> u32 {
        let mut parent = None;
        let user = std::iter::once(("send", FrameKind::User));
        for (name, kind) in user.chain(kernel.iter().map(|&k| (k, FrameKind::Kernel))) {
            p.frames.push(crate::profile::Frame {
                function: name.into(),
                module: None,
                file: None,
                line: None,
                kind,
                inlined: false,
            });
            p.stacks.push(crate::profile::StackNode {
                frame: p.frames.len() as u32 - 1,
                parent,
            });
            parent = Some(p.stacks.len() as u32 - 1);
        }
        parent.unwrap_or(0)
    }

    #[test]
    fn a_client_preempted_as_its_request_wakes_a_local_server_waits_on_the_server() {
        // psql's `send` wakes the PostgreSQL backend, which takes the CPU as the send
        // returns; psql then reads the reply at once (no blocked recv). Preempted so
        // from 0 to 10 ms, reading the reply 20 µs later: a wait on the database. A
        // time slice's end (an interrupt's exit) is a CPU wait, as is a preemption with
        // no reply read after it.
        let mut p = SampledProfile {
            resources: vec![db()],
            sockets: vec![traffic(vec![turn_us(7, 10_020), turn_us(7, 40_020)])],
            sockets_recorded: true,
            ..SampledProfile::default()
        };
        let exit = kernel_stack(
            &mut p,
            &[
                "entry_SYSCALL_64_after_hwframe",
                "do_syscall_64",
                "exit_to_user_mode_loop",
                "schedule",
                "__schedule",
            ],
        );
        let tick = kernel_stack(
            &mut p,
            &[
                "asm_sysvec_apic_timer_interrupt",
                "irqentry_exit_to_user_mode",
                "schedule",
                "__schedule",
            ],
        );
        let preempted = |from_us: u64, to_us: u64, stack: u32| ThreadSample {
            stack: Some(stack).into(),
            kind: SampleKind::OffCpu {
                state: WaitState::Preempted,
            },
            ..wait_us(7, from_us, to_us)
        };
        p.samples = vec![
            preempted(0, 10_000, exit),
            preempted(30_000, 40_000, tick),
            preempted(50_000, 60_000, exit),
        ]
        .into();
        let cats = vec![WaitCategory::Runqueue; 3];
        let r = sample_resources(&p, &cats.clone().into());
        assert_eq!(r.dense(3), vec![Some(0), None, None]);
        let roles = Roles::of(&p);
        let got: Vec<WaitCategory> = (0..3)
            .map(|i| category(&p, i, cats[i], r.get(i), &roles))
            .collect();
        use WaitCategory::{Db, Runqueue};
        assert_eq!(got, vec![Db, Runqueue, Runqueue]);
    }

    #[test]
    fn a_connection_whose_peer_speaks_first_gives_no_reply_evidence() {
        // A MySQL-like client: it opened the connection, read the greeting first, and
        // its turns are its requests, not the replies.
        let p = SampledProfile {
            samples: vec![poll_wait(7, 0, 10)].into(),
            resources: vec![db()],
            sockets: vec![SocketTraffic {
                sent_first: false,
                ..traffic(vec![turn_us(7, 10_050)])
            }],
            sockets_recorded: true,
            ..SampledProfile::default()
        };
        assert_eq!(
            sample_resources(&p, &vec![WaitCategory::Poll].into()).dense(1),
            vec![None]
        );
        assert_eq!(categories(&p), vec![WaitCategory::Poll]);
    }
}

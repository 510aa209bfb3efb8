//! Each step's `resources`: what the waits inside the step's subtree were on, and the
//! round trips and connections made from it; and its `http_round_trips` and
//! `db_round_trips` (the turns of the client connections made from it, counted as the
//! session's are in [`super::resources::round_trips`]).
//!
//! Waits come with their stack, so they land in the steps above their leaf. A round
//! trip (the first read of a reply, recorded by the socket tracepoints with its thread
//! and time but no stack) is placed at the sample of the same thread that covers that
//! moment or ends just before it — the blocked read of the reply itself when the reply
//! was slow, else the thread's last sample within [`TURN_SAMPLE_WINDOW_NS`]. A new
//! connection is placed like its first round trip. Turns with no such sample are
//! counted in the resource's totals but in no step.

use std::collections::HashMap;

use super::{FastMap, seek};
use crate::packed::Packed;

use crate::profile::SampledProfile;

use super::calltree::CallTree;
use super::resources::{ResourceUse, StepResource};
use super::steps::{Step, StepRef, ms};

/// How far back from a round trip a sample of its thread may be to stand for its stack.
pub const TURN_SAMPLE_WINDOW_NS: u64 = 50_000_000;

/// Resources listed per step, at most.
const MAX_PER_STEP: usize = 5;

#[derive(Debug, Clone, Copy, Default)]
struct Agg {
    intervals: u64,
    blocked_ns: u64,
    crit_ns: u64,
    round_trips: u64,
    connections: u64,
    /// Turns of client connections (the tree spoke first) over HTTP, and to databases.
    http_round_trips: u64,
    db_round_trips: u64,
}

impl Agg {
    fn add(&mut self, o: &Agg) {
        self.intervals += o.intervals;
        self.blocked_ns += o.blocked_ns;
        self.crit_ns += o.crit_ns;
        self.round_trips += o.round_trips;
        self.connections += o.connections;
        self.http_round_trips += o.http_round_trips;
        self.db_round_trips += o.db_round_trips;
    }
}

/// Fill `steps[..].resources` (recursively) from the tree's per-sample resources and
/// the recording's socket turns. `uses` are the session's merged resource rows.
pub(crate) fn fill(
    p: &SampledProfile,
    tree: &CallTree,
    refs: &[StepRef],
    uses: &[ResourceUse],
    steps: &mut [Step],
) {
    let row_of = rows_by_resource(p, uses);
    // Summed per (leaf, row) first, then up the tree once per distinct pair: a profile
    // has millions of waits and few distinct pairs.
    let mut per_leaf: FastMap<(usize, usize), Agg> = FastMap::default();
    let mut add = |leaf: usize, row: usize, f: &dyn Fn(&mut Agg)| {
        f(per_leaf.entry((leaf, row)).or_default());
    };
    for (i, r) in tree.sample_resources.iter() {
        let Some(s) = p.samples.get(i) else {
            continue;
        };
        let Some(leaf) = tree.node_of(&s) else {
            continue;
        };
        let Some(&row) = row_of.get(r as usize).and_then(Option::as_ref) else {
            continue;
        };
        add(leaf, row, &|a: &mut Agg| {
            a.intervals += 1;
            a.blocked_ns += s.weight_ns;
        });
    }
    for (r, leaf, crit) in tree.resource_crit.iter() {
        if let (Some(leaf), Some(&row)) = (leaf, row_of.get(r as usize).and_then(Option::as_ref)) {
            add(leaf, row, &|a: &mut Agg| a.crit_ns += crit);
        }
    }
    let by_thread = samples_by_thread(p);
    for t in &p.sockets {
        let Some(&row) = t
            .resource
            .and_then(|r| row_of.get(r as usize))
            .and_then(Option::as_ref)
        else {
            continue;
        };
        for (k, turn) in t.turns.iter().enumerate() {
            let Some(leaf) = sample_at(&by_thread, turn.tid, turn.time_ns)
                .and_then(|i| tree.node_of(&p.samples.get(i)?))
            else {
                continue;
            };
            let kind = t
                .resource
                .and_then(|r| p.resources.get(r as usize))
                .map(|r| r.kind);
            let new_connection = k == 0 && super::resources::opened(t, kind);
            let (http, db) = uses.get(row).map_or((false, false), |u| client_kind(t, u));
            add(leaf, row, &|a: &mut Agg| {
                a.round_trips += 1;
                a.connections += u64::from(new_connection);
                a.http_round_trips += u64::from(http);
                a.db_round_trips += u64::from(db);
            });
        }
    }
    let mut per_node: HashMap<(usize, usize), Agg> = HashMap::new();
    for (&(leaf, row), a) in &per_leaf {
        let mut cur = Some(leaf);
        while let Some(n) = cur {
            per_node.entry((n, row)).or_default().add(a);
            cur = tree.nodes.get(n).and_then(|x| x.parent());
        }
    }
    let by_id: HashMap<&str, &StepRef> = refs.iter().map(|r| (r.id.as_str(), r)).collect();
    let ctx = Ctx {
        tree,
        uses,
        per_node: &per_node,
        by_id: &by_id,
        traffic: p.sockets_recorded,
    };
    ctx.fill_all(steps);
}

struct Ctx<'a> {
    tree: &'a CallTree,
    uses: &'a [ResourceUse],
    per_node: &'a HashMap<(usize, usize), Agg>,
    by_id: &'a HashMap<&'a str, &'a StepRef>,
    traffic: bool,
}

impl Ctx<'_> {
    fn fill_all(&self, steps: &mut [Step]) {
        for s in steps {
            if let Some(r) = self.by_id.get(s.id.as_str()) {
                let rows = self.rows_of(&r.nodes);
                let sum = |f: fn(&Agg) -> u64| {
                    let n: u64 = rows.iter().map(|(_, a)| f(a)).sum();
                    (self.traffic && n > 0).then_some(n)
                };
                s.http_round_trips = sum(|a| a.http_round_trips);
                s.db_round_trips = sum(|a| a.db_round_trips);
                s.resources = self.listed(rows);
            }
            self.fill_all(&mut s.children);
        }
    }

    /// The figures per resource row of a step made of `nodes` (a node under another of
    /// the set is counted once, with its ancestor), most blocked first.
    fn rows_of(&self, nodes: &[usize]) -> Vec<(usize, Agg)> {
        let outer: Vec<usize> = nodes
            .iter()
            .copied()
            .filter(|&n| !self.has_ancestor_in(n, nodes))
            .collect();
        let mut rows: HashMap<usize, Agg> = HashMap::new();
        for (&(n, row), a) in self.per_node {
            if outer.contains(&n) {
                rows.entry(row).or_default().add(a);
            }
        }
        let mut out: Vec<(usize, Agg)> = rows.into_iter().collect();
        out.sort_by(|a, b| {
            (b.1.blocked_ns, b.1.round_trips, a.0).cmp(&(a.1.blocked_ns, a.1.round_trips, b.0))
        });
        out
    }

    /// The step's `resources`: its first rows.
    fn listed(&self, out: Vec<(usize, Agg)>) -> Vec<StepResource> {
        out.into_iter()
            .take(MAX_PER_STEP)
            .filter_map(|(row, a)| {
                let u = self.uses.get(row)?;
                let socket = u.calls.is_some();
                Some(StepResource {
                    kind: u.kind,
                    role: u.role,
                    name: u.name.clone(),
                    intervals: a.intervals,
                    blocked_ms: ms(a.blocked_ns),
                    critical_ms: u.critical_ms.map(|_| ms(a.crit_ns)),
                    round_trips: (self.traffic && socket).then_some(a.round_trips),
                    connections: (self.traffic && socket).then_some(a.connections),
                })
            })
            .collect()
    }

    fn has_ancestor_in(&self, n: usize, set: &[usize]) -> bool {
        let mut cur = self.tree.nodes.get(n).and_then(|x| x.parent());
        while let Some(a) = cur {
            if set.contains(&a) {
                return true;
            }
            cur = self.tree.nodes.get(a).and_then(|x| x.parent());
        }
        false
    }
}

/// Whether a socket's turns count as HTTP and as database round trips: only a client
/// connection's (the tree spoke first); HTTP by the socket's protocol or its row's
/// (a connection whose first bytes were not read, beside recognised ones to the same
/// peer), a database by the row's role.
fn client_kind(t: &crate::profile::SocketTraffic, u: &ResourceUse) -> (bool, bool) {
    use crate::profile::Protocol;
    if !t.sent_first {
        return (false, false);
    }
    let http = |p: Option<Protocol>| matches!(p, Some(Protocol::Http | Protocol::Http2));
    (
        http(t.protocol) || (t.protocol.is_none() && http(u.protocol)),
        u.role == super::resources::ResourceRole::Database,
    )
}

/// For each resource index, the merged row of `uses` it belongs to.
fn rows_by_resource(p: &SampledProfile, uses: &[ResourceUse]) -> Vec<Option<usize>> {
    let key = |pid: i32, kind, name: &str| (pid, kind, name.to_string());
    let at: HashMap<_, usize> = uses
        .iter()
        .enumerate()
        .map(|(i, u)| (key(u.pid, u.kind, &u.name), i))
        .collect();
    p.resources
        .iter()
        .map(|r| {
            let name = super::resources::shown_name(r);
            at.get(&key(r.pid, r.kind, name)).copied()
        })
        .collect()
}

/// One sample of a thread: start, end, index, off-CPU.
type Span = (u64, u64, usize, bool);

/// One thread's samples by start, bit-packed (see [`crate::packed`]): a few bytes a
/// sample instead of 32, and in the spill file beyond the memory budget.
#[derive(Debug, Default)]
struct Spans(Packed<4>);

impl Spans {
    fn push(&mut self, (start, end, i, off): Span) {
        self.0.push([start, end, i as u64, u64::from(off)]);
    }

    fn get(&self, k: usize) -> Option<Span> {
        (self.0.get(k)).map(|[start, end, i, off]| (start, end, i as usize, off != 0))
    }

    fn len(&self) -> usize {
        self.0.len()
    }

    /// In order, as `sort_unstable` orders the spans (a thread's are already, as the
    /// samples are in time order: they are left as they are).
    fn sorted(self) -> Spans {
        if self.0.iter().is_sorted() {
            return self;
        }
        let mut v: Vec<[u64; 4]> = self.0.iter().collect();
        v.sort_unstable();
        Spans(v.into_iter().collect())
    }
}

/// Each thread's samples, by start: of the threads that made socket round trips only.
fn samples_by_thread(p: &SampledProfile) -> FastMap<i32, Spans> {
    let turned: std::collections::HashSet<i32> = p
        .sockets
        .iter()
        .flat_map(|t| t.turns.iter().map(|u| u.tid))
        .collect();
    if turned.is_empty() {
        return FastMap::default();
    }
    let mut m: FastMap<i32, Spans> = FastMap::default();
    for (i, s) in p.samples.iter().enumerate() {
        if !turned.contains(&s.tid) {
            continue;
        }
        let off = matches!(s.kind, crate::profile::SampleKind::OffCpu { .. });
        m.entry(s.tid).or_default().push((
            s.time_ns,
            s.time_ns.saturating_add(s.weight_ns),
            i,
            off,
        ));
    }
    m.into_iter().map(|(tid, v)| (tid, v.sorted())).collect()
}

/// The sample that stands for a reply read by `tid` at `t`: the blocked wait that
/// ended just before it (the read of that very reply), else the sample covering `t`,
/// else the last one before it within the window.
fn sample_at(by_thread: &FastMap<i32, Spans>, tid: i32, t: u64) -> Option<usize> {
    let v = by_thread.get(&tid)?;
    let after = seek::bisect(0, v.len(), |k| {
        v.get(k).is_some_and(|(start, ..)| start <= t)
    });
    let recent = (0..after).rev().take(4).filter_map(|k| v.get(k));
    let waited = recent
        .filter(|&(_, end, _, off)| off && end <= t.saturating_add(WAKE_SLACK_NS))
        .find(|&(_, end, ..)| t.saturating_sub(end) <= super::waited::READ_AFTER_WAKE_NS);
    if let Some((.., i, _)) = waited {
        return Some(i);
    }
    let (_, end, i, _) = v.get(after.checked_sub(1)?)?;
    (end >= t || t - end <= TURN_SAMPLE_WINDOW_NS).then_some(i)
}

/// A wait's recorded end may follow the read it allowed by this much (the switch-in
/// is stamped after the wake-up).
const WAKE_SLACK_NS: u64 = 100_000;

#[cfg(test)]
mod tests {
    use super::*;

    impl From<Vec<Span>> for Spans {
        fn from(v: Vec<Span>) -> Spans {
            let mut out = Spans::default();
            for x in v {
                out.push(x);
            }
            out
        }
    }

    #[test]
    fn a_turn_lands_on_the_sample_covering_it_or_just_before() {
        let mut m = FastMap::default();
        m.insert(
            7,
            Spans::from(vec![
                (0, 10, 0, false),
                (20, 30, 1, false),
                (200_000_000, 200_000_010, 2, false),
            ]),
        );
        assert_eq!(sample_at(&m, 7, 5), Some(0));
        assert_eq!(sample_at(&m, 7, 25), Some(1));
        assert_eq!(sample_at(&m, 7, 40_000_000), Some(1));
        assert_eq!(sample_at(&m, 7, 100_000_000), None, "too far from any");
        assert_eq!(sample_at(&m, 8, 5), None, "another thread");
    }

    #[test]
    fn spans_out_of_order_are_sorted_as_tuples_are() {
        let v = vec![
            (5, 9, 1, false),
            (5, 7, 2, true),
            (1, 2, 0, false),
            (5, 7, 2, false),
        ];
        let mut want = v.clone();
        want.sort_unstable();
        let got = Spans::from(v).sorted();
        let got: Vec<Span> = (0..got.len()).filter_map(|k| got.get(k)).collect();
        assert_eq!(got, want);
        let kept = Spans::from(want.clone()).sorted();
        assert_eq!(kept.get(3), want.get(3).copied(), "in order: as it was");
    }

    #[test]
    fn a_turn_right_after_a_wait_is_that_wait_s() {
        let ms = 1_000_000;
        let mut m = FastMap::default();
        // on-CPU 0..1 ms, blocked 1..21 ms, on-CPU again from 21 ms.
        m.insert(
            7,
            Spans::from(vec![
                (0, ms, 0, false),
                (ms, 21 * ms, 1, true),
                (21 * ms, 22 * ms, 2, false),
            ]),
        );
        assert_eq!(sample_at(&m, 7, 21 * ms), Some(1));
        assert_eq!(sample_at(&m, 7, 21 * ms + 50_000), Some(1));
        // 5 ms after the wait: the covering sample.
        m.insert(
            8,
            Spans::from(vec![(0, ms, 0, true), (ms, 10 * ms, 1, false)]),
        );
        assert_eq!(sample_at(&m, 8, 6 * ms), Some(1));
    }
}

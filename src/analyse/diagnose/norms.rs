//! Normal latencies of common operations, for `within_industry_norm`: when each
//! operation took what such an operation normally takes, the time is in how many are
//! made, or in the infrastructure — not in slow code around them.
//!
//! The ranges are deliberately wide, order-of-magnitude figures commonly measured on
//! current hardware: an fsync/fdatasync on local storage commits a journal and flushes
//! a device cache (tens of µs on NVMe with power-loss protection, a few ms on SATA SSDs,
//! up to ~20 ms on spinning disks); a request→response on this host costs the loopback
//! (~10–50 µs) plus the service's work (a simple PostgreSQL query ~0.05–1 ms, a small
//! HTTP response ~0.1–5 ms); a peer on another host adds its network's round trip
//! (~0.2 ms in a rack to ~150 ms across continents).

use super::super::resources::ResourceRole;

/// One row of the table.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Norm {
    /// What the operation is, for sentences.
    pub what: &'static str,
    pub low_ms: f64,
    pub high_ms: f64,
}

pub const FSYNC_LOCAL: Norm = Norm {
    what: "an fsync/fdatasync to local storage",
    low_ms: 0.02,
    high_ms: 20.0,
};
pub const DB_QUERY_LOCAL: Norm = Norm {
    what: "a simple database query on this host",
    low_ms: 0.02,
    high_ms: 1.0,
};
pub const SERVICE_LOCAL: Norm = Norm {
    what: "a request to a service on this host",
    low_ms: 0.02,
    high_ms: 5.0,
};
pub const REMOTE_ROUND_TRIP: Norm = Norm {
    what: "a request to a peer on another host",
    low_ms: 0.1,
    high_ms: 150.0,
};

/// The norm for one round trip to a peer of this role.
pub fn for_peer(role: Option<ResourceRole>) -> Option<Norm> {
    match role? {
        ResourceRole::Database => Some(DB_QUERY_LOCAL),
        ResourceRole::Service => Some(SERVICE_LOCAL),
        ResourceRole::External => Some(REMOTE_ROUND_TRIP),
        _ => None,
    }
}

impl Norm {
    pub fn holds(&self, ms: f64) -> bool {
        ms <= self.high_ms
    }

    /// "0.02–20 ms for an fsync/fdatasync to local storage".
    pub fn range(&self) -> String {
        format!("{}–{} ms for {}", self.low_ms, self.high_ms, self.what)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roles_map_to_norms() {
        assert_eq!(for_peer(Some(ResourceRole::Database)), Some(DB_QUERY_LOCAL));
        assert_eq!(for_peer(Some(ResourceRole::File)), None);
        assert!(FSYNC_LOCAL.holds(3.0) && !FSYNC_LOCAL.holds(50.0));
    }
}

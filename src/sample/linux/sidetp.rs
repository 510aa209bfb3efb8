//! The socket and page-cache tracepoints: finding them in tracefs with the places of
//! the fields we read (from each format file, never hard-coded: layouts change between
//! kernels), their perf attributes, and decoding those fields from a record's raw data.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use perf_event_open_sys::bindings as b;

use super::sys::{self, REG_DI, REG_DX, REG_SI};
use super::tracefs;
use crate::sample::protocol::Direction;

/// (offset, size) of a field in a tracepoint's raw record.
pub(crate) type Field = (usize, usize);

/// What a side event's records mean, with their fields' places.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SideRole {
    SockIo {
        dir: Direction,
        sk: Field,
        ret: Field,
        flags: Field,
    },
    SockState(StateFields),
    PagesAsked {
        ino: Field,
        dev: Field,
        index: Field,
        last: Field,
    },
}

/// The fields of `inet_sock_set_state` we read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct StateFields {
    pub skaddr: Field,
    pub newstate: Field,
    family: Field,
    sport: Field,
    dport: Field,
    saddr: Field,
    daddr: Field,
    saddr_v6: Field,
    daddr_v6: Field,
}

/// A tracepoint to open: its id, role, and the user registers it samples.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SideSource {
    pub name: &'static str,
    id: u64,
    pub role: SideRole,
    regs: u64,
}

/// The side tracepoints found in tracefs; the error names a missing one and why.
pub(crate) fn sources() -> Vec<Result<SideSource, String>> {
    let sock_regs = (1 << REG_DI) | (1 << REG_SI) | (1 << REG_DX);
    let io = |name: &'static str, dir| {
        let tp = tracepoint("sock", name)?;
        let f = |n| field(&tp, name, n);
        let role = SideRole::SockIo {
            dir,
            sk: f("sk")?,
            ret: f("ret")?,
            flags: f("flags")?,
        };
        Ok(SideSource {
            name,
            id: tp.id,
            role,
            regs: sock_regs,
        })
    };
    let state = || {
        let name = "inet_sock_set_state";
        let tp = tracepoint("sock", name)?;
        let f = |n| field(&tp, name, n);
        let role = SideRole::SockState(StateFields {
            skaddr: f("skaddr")?,
            newstate: f("newstate")?,
            family: f("family")?,
            sport: f("sport")?,
            dport: f("dport")?,
            saddr: f("saddr")?,
            daddr: f("daddr")?,
            saddr_v6: f("saddr_v6")?,
            daddr_v6: f("daddr_v6")?,
        });
        Ok(SideSource {
            name,
            id: tp.id,
            role,
            regs: 0,
        })
    };
    let pages = || {
        let name = "mm_filemap_get_pages";
        let tp = tracepoint("filemap", name)?;
        let f = |n| field(&tp, name, n);
        let role = SideRole::PagesAsked {
            ino: f("i_ino")?,
            dev: f("s_dev")?,
            index: f("index")?,
            last: f("last_index")?,
        };
        Ok(SideSource {
            name,
            id: tp.id,
            role,
            regs: 0,
        })
    };
    vec![
        io("sock_send_length", Direction::Send),
        io("sock_recv_length", Direction::Recv),
        state(),
        pages(),
    ]
}

fn tracepoint(group: &str, name: &str) -> Result<tracefs::Tracepoint, String> {
    tracefs::tracepoint(group, name).ok_or_else(|| format!("{group}:{name} not in tracefs"))
}

fn field(tp: &tracefs::Tracepoint, tp_name: &str, name: &str) -> Result<Field, String> {
    tp.field(name)
        .ok_or_else(|| format!("{tp_name}'s format has no {name} field"))
}

/// The perf attributes of a side event: every hit, no stacks.
pub(crate) fn attr(src: &SideSource) -> b::perf_event_attr {
    let mut attr = sys::new_attr(b::PERF_TYPE_TRACEPOINT, src.id);
    attr.sample_type =
        sys::SAMPLE_IDENTIFIER | sys::SAMPLE_TID | sys::SAMPLE_TIME | sys::SAMPLE_RAW;
    if src.regs != 0 {
        attr.sample_type |= sys::SAMPLE_REGS_USER;
        attr.sample_regs_user = src.regs;
    }
    attr.__bindgen_anon_1.sample_period = 1;
    attr.set_disabled(1);
    attr.set_inherit(1);
    attr.set_enable_on_exec(1);
    attr.set_sample_id_all(1);
    attr.set_use_clockid(1);
    attr.clockid = libc::CLOCK_MONOTONIC;
    attr
}

/// (local, peer) of a state change's socket; None while the peer port is unset. The
/// local port is unset at SYN_SENT (chosen just after).
pub(crate) fn tcp_addrs(data: &[u8], f: &StateFields) -> Option<(Option<String>, String)> {
    let bytes = |(off, size): Field| data.get(off..off.checked_add(size)?);
    let (sport, dport) = (uint(data, f.sport)? as u16, uint(data, f.dport)? as u16);
    if dport == 0 {
        return None;
    }
    let ip = |v4: Field, v6: Field| -> Option<IpAddr> {
        if uint(data, f.family)? == libc::AF_INET6 as u64 {
            let a: [u8; 16] = bytes(v6)?.try_into().ok()?;
            Some(Ipv6Addr::from(a).to_canonical())
        } else {
            let a: [u8; 4] = bytes(v4)?.try_into().ok()?;
            Some(IpAddr::V4(Ipv4Addr::from(a)))
        }
    };
    let peer = SocketAddr::new(ip(f.daddr, f.daddr_v6)?, dport).to_string();
    let local = (sport != 0)
        .then(|| ip(f.saddr, f.saddr_v6))
        .flatten()
        .map(|a| SocketAddr::new(a, sport).to_string());
    Some((local, peer))
}

/// An unsigned little-endian field of 1, 2, 4 or 8 bytes.
pub(crate) fn uint(data: &[u8], (off, size): Field) -> Option<u64> {
    let b = data.get(off..off.checked_add(size)?)?;
    let mut v = [0u8; 8];
    if size > 8 {
        return None;
    }
    v[..size].copy_from_slice(b);
    Some(u64::from_le_bytes(v))
}

/// A signed little-endian field of 4 or 8 bytes.
pub(crate) fn int(data: &[u8], f: Field) -> Option<i64> {
    let v = uint(data, f)?;
    match f.1 {
        4 => Some(i64::from(v as u32 as i32)),
        8 => Some(v as i64),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tcp_addresses_come_from_a_state_change() {
        let f = StateFields {
            skaddr: (0, 8),
            newstate: (8, 4),
            family: (12, 2),
            sport: (14, 2),
            dport: (16, 2),
            saddr: (18, 4),
            daddr: (22, 4),
            saddr_v6: (26, 16),
            daddr_v6: (42, 16),
        };
        let mut d = vec![0u8; 58];
        d[12..14].copy_from_slice(&(libc::AF_INET as u16).to_le_bytes());
        d[16..18].copy_from_slice(&5432u16.to_le_bytes());
        d[22..26].copy_from_slice(&[127, 0, 0, 1]);
        assert_eq!(tcp_addrs(&d, &f), Some((None, "127.0.0.1:5432".into())));
        d[14..16].copy_from_slice(&40000u16.to_le_bytes());
        d[18..22].copy_from_slice(&[127, 0, 0, 1]);
        let local = Some("127.0.0.1:40000".to_string());
        assert_eq!(tcp_addrs(&d, &f), Some((local, "127.0.0.1:5432".into())));
        d[12..14].copy_from_slice(&(libc::AF_INET6 as u16).to_le_bytes());
        d[57] = 1;
        assert_eq!(tcp_addrs(&d, &f).map(|a| a.1), Some("[::1]:5432".into()));
        d[16..18].copy_from_slice(&0u16.to_le_bytes());
        assert_eq!(tcp_addrs(&d, &f), None);
    }

    #[test]
    fn fields_are_read_little_endian_and_signed() {
        let data = [1, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 2, 0];
        assert_eq!(uint(&data, (0, 4)), Some(1));
        assert_eq!(int(&data, (4, 4)), Some(-1));
        assert_eq!(uint(&data, (8, 2)), Some(2));
        assert_eq!(uint(&data, (8, 4)), None);
        assert_eq!(int(&data, (8, 2)), None);
    }
}

//! The target's process tree: every descendant of this process (we are the subreaper,
//! so orphans stay ours), found through /proc/<tid>/task/<tid>/children, and killing it.

use std::collections::HashSet;

/// Direct children of `pid` (all of its threads' children).
pub fn children_of(pid: i32) -> Vec<i32> {
    let mut out = Vec::new();
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return out;
    };
    for t in tasks.flatten() {
        let path = t.path().join("children");
        if let Ok(s) = std::fs::read_to_string(path) {
            out.extend(s.split_whitespace().filter_map(|x| x.parse::<i32>().ok()));
        }
    }
    out
}

/// Every live descendant of this process, breadth first.
pub fn descendants_of_self() -> Vec<i32> {
    // SAFETY: getpid cannot fail.
    let me = unsafe { libc::getpid() };
    let mut seen = HashSet::new();
    let mut queue = children_of(me);
    let mut i = 0;
    while i < queue.len() {
        let p = queue[i];
        i += 1;
        if seen.insert(p) {
            queue.extend(children_of(p));
        }
    }
    queue.retain(|p| seen.remove(p));
    queue
}

/// Send `sig` to the target's process group and to every descendant of this process
/// (some may have left the group with setsid).
pub fn signal_tree(pgid: i32, sig: i32) {
    // List first: once the group is killed, its members' children are being reparented
    // and would be missing from both the old and the new parent's list for a moment.
    let tree = descendants_of_self();
    // SAFETY: plain kill syscalls; a vanished pid only yields ESRCH.
    unsafe {
        if pgid > 0 {
            libc::kill(-pgid, sig);
        }
        for p in tree {
            libc::kill(p, sig);
        }
    }
}

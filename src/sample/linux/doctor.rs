//! `probe_capabilities`: what this machine allows, for `profmap doctor` and for choosing
//! a sampling method. Every check opens or reads the real thing (an event on ourselves,
//! a file, a library) rather than inferring from versions; failures carry the fix.
//! The checks of what names a wait's resource (issue 8) are in `evidence_sources`
//! (tracepoints, syscall arguments, /proc/net) and `peers` (sock_diag, other users'
//! descriptors, BPF); each failing one also says what the profile loses without it.

mod evidence_sources;
mod peers;

use perf_event_open_sys::bindings as b;

use super::sys;
use super::tracefs;

/// One line of the doctor's report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Check {
    pub name: String,
    pub ok: bool,
    pub detail: String,
    pub fix: Option<String>,
}

/// Everything the doctor found, and the best sampling method available.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Capabilities {
    pub checks: Vec<Check>,
    /// e.g. "cpu-clock+dwarf", "cycles+dwarf", "cpu-clock+fp", or "none".
    pub best_method: String,
}

fn check(name: &str, ok: bool, detail: String, fix: Option<&str>) -> Check {
    Check {
        name: name.to_string(),
        ok,
        detail,
        fix: if ok { None } else { fix.map(str::to_string) },
    }
}

/// Try to open an event on ourselves; in `user_only` scope with kernel and hypervisor
/// excluded, as the sampler does when kernel sampling is refused.
fn try_open(mut attr: b::perf_event_attr, user_only: bool) -> Result<(), std::io::Error> {
    if user_only {
        attr.set_exclude_kernel(1);
        attr.set_exclude_hv(1);
    }
    sys::open(&mut attr, 0, -1, -1).map(drop)
}

fn sw_attr(config: u32) -> b::perf_event_attr {
    let mut a = sys::new_attr(b::PERF_TYPE_SOFTWARE, u64::from(config));
    a.set_disabled(1);
    a
}

/// Probe everything profmap may use on this machine.
pub fn probe_capabilities() -> Capabilities {
    let mut checks = Vec::new();
    let paranoid = sys::read_int("/proc/sys/kernel/perf_event_paranoid");
    let root = sys::is_root();
    let who = if root { "root" } else { "not root" };

    // perf_event_open with a software event: kernel + user, else user space only (what
    // the sampler falls back to).
    let full = try_open(sw_attr(b::PERF_COUNT_SW_CPU_CLOCK), false);
    let user_only = full.is_err() && try_open(sw_attr(b::PERF_COUNT_SW_CPU_CLOCK), true).is_ok();
    let sw_ok = full.is_ok() || user_only;
    let para = paranoid.map_or("unknown".to_string(), |p| p.to_string());
    checks.push(check(
        "perf_event_open",
        sw_ok,
        match &full {
            Ok(()) => format!("cpu-clock opens (perf_event_paranoid = {para}, {who})"),
            Err(_) if user_only => format!(
                "cpu-clock opens for user space only (perf_event_paranoid = {para}, {who}); \
                 blocked threads are read from /proc"
            ),
            Err(e) => format!("{e} (perf_event_paranoid = {para}, {who})"),
        },
        Some("sudo sysctl kernel.perf_event_paranoid=1"),
    ));

    // Kernel callchains need paranoid <= 1 for non-root users.
    let kernel_ok = root || paranoid.is_some_and(|p| p <= 1);
    checks.push(check(
        "kernel stacks",
        kernel_ok,
        format!(
            "kernel frames in stacks: {}",
            if kernel_ok { "allowed" } else { "refused" }
        ),
        Some("sudo sysctl kernel.perf_event_paranoid=1"),
    ));

    // Hardware events.
    let mut hw = sys::new_attr(b::PERF_TYPE_HARDWARE, b::PERF_COUNT_HW_CPU_CYCLES as u64);
    hw.set_disabled(1);
    let hw = try_open(hw, user_only);
    checks.push(check(
        "hardware events",
        hw.is_ok(),
        match &hw {
            Ok(()) => "cycles available".to_string(),
            Err(e) => format!("cycles unavailable ({e}); sampling falls back to cpu-clock"),
        },
        Some("none needed: cpu-clock is used (hardware PMU absent, e.g. in a VM)"),
    ));

    // DWARF unwinding needs user registers and stack copies.
    let mut dw = sw_attr(b::PERF_COUNT_SW_CPU_CLOCK);
    dw.sample_type = sys::SAMPLE_REGS_USER | sys::SAMPLE_STACK_USER | sys::SAMPLE_CALLCHAIN;
    dw.sample_regs_user = sys::USER_REGS_MASK;
    dw.sample_stack_user = 32 * 1024;
    dw.__bindgen_anon_1.sample_period = 1_000_000;
    let dwarf = try_open(dw, user_only).is_ok();
    checks.push(check(
        "user stack copies",
        dwarf,
        if dwarf {
            "registers + 32 KiB stack copies: DWARF unwinding".to_string()
        } else {
            "refused: frame-pointer stacks only".to_string()
        },
        Some("sudo sysctl kernel.perf_event_paranoid=1"),
    ));

    // Tracepoints.
    let tp = tracefs::tracepoint("sched", "sched_switch");
    let unreadable = std::fs::read_dir("/sys/kernel/tracing")
        .is_err_and(|e| e.kind() == std::io::ErrorKind::PermissionDenied);
    let tp_check = match &tp {
        None if unreadable => check(
            "tracepoints",
            false,
            "/sys/kernel/tracing is not readable by this user (off-CPU S/D states come from \
             /proc instead)"
                .into(),
            Some("run as root (the sched_switch tracepoint also needs kernel sampling)"),
        ),
        None => check(
            "tracepoints",
            false,
            "tracefs not found at /sys/kernel/tracing (off-CPU S/D states not told apart)".into(),
            Some("sudo mount -t tracefs nodev /sys/kernel/tracing"),
        ),
        Some(t) => {
            let mut a = sys::new_attr(b::PERF_TYPE_TRACEPOINT, t.id);
            a.set_disabled(1);
            a.sample_type = sys::SAMPLE_RAW;
            a.__bindgen_anon_1.sample_period = 1;
            match try_open(a, false) {
                Ok(()) => check(
                    "tracepoints",
                    true,
                    "sched:sched_switch with raw data".into(),
                    None,
                ),
                Err(e) => check(
                    "tracepoints",
                    false,
                    format!(
                        "sched:sched_switch refused ({e}): context-switches event used instead"
                    ),
                    Some("run as root, or sudo sysctl kernel.perf_event_paranoid=-1"),
                ),
            }
        }
    };
    checks.push(tp_check);
    checks.push(waking_check(kernel_ok));
    checks.extend(evidence_sources::checks(root, user_only));

    // kallsyms.
    let kptr = sys::read_int("/proc/sys/kernel/kptr_restrict");
    let kallsyms_ok = std::fs::read_to_string("/proc/kallsyms")
        .ok()
        .and_then(|s| {
            s.lines()
                .take(200)
                .find_map(|l| u64::from_str_radix(l.split_whitespace().next()?, 16).ok())
                .map(|a| a != 0)
        })
        .unwrap_or(false);
    // With kptr_restrict = 0 a user who is not root sees addresses only when perf may
    // profile the kernel (perf_event_paranoid <= 1).
    let kallsyms_fix = if kptr == Some(0) && !root {
        "sudo sysctl kernel.perf_event_paranoid=1"
    } else {
        "sudo sysctl kernel.kptr_restrict=0"
    };
    checks.push(check(
        "kernel symbols",
        kallsyms_ok,
        format!(
            "/proc/kallsyms {} (kptr_restrict = {})",
            if kallsyms_ok {
                "readable"
            } else {
                "hides addresses"
            },
            kptr.map_or("unknown".into(), |k| k.to_string())
        ),
        Some(kallsyms_fix),
    ));

    // ptrace scope (Python stack readers attach with ptrace / process_vm_readv).
    let scope = sys::read_int("/proc/sys/kernel/yama/ptrace_scope");
    let ptrace_ok = root || scope.is_none_or(|s| s == 0);
    checks.push(check(
        "ptrace",
        ptrace_ok,
        match scope {
            None => "Yama not present: no ptrace restriction".to_string(),
            Some(s) => format!("kernel.yama.ptrace_scope = {s}"),
        },
        Some("sudo sysctl kernel.yama.ptrace_scope=0"),
    ));

    // Python interpreter (resolving pyenv shims).
    let py = std::process::Command::new("python3")
        .args(["-c", "import sys;print(sys.executable)"])
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .filter(|s| !s.is_empty());
    checks.push(check(
        "python",
        py.is_some(),
        match &py {
            Some(p) => format!("python3 is {p}"),
            None => "no python3 on PATH".to_string(),
        },
        Some("install python3 (only needed for Python targets)"),
    ));

    // NVIDIA driver.
    let nvml = dlopen_ok("libnvidia-ml.so.1");
    checks.push(check(
        "nvidia",
        nvml,
        if nvml {
            "libnvidia-ml.so.1 loads".to_string()
        } else {
            "libnvidia-ml.so.1 not found: GPU metrics unavailable".to_string()
        },
        Some("install the NVIDIA driver (only needed for GPU targets)"),
    ));

    let best_method = if !sw_ok {
        "none".to_string()
    } else {
        format!(
            "{}+{}{}",
            if hw.is_ok() { "cycles" } else { "cpu-clock" },
            if dwarf { "dwarf" } else { "fp" },
            if user_only { " (user space only)" } else { "" }
        )
    };
    Capabilities {
        checks,
        best_method,
    }
}

/// Whether `sched:sched_waking` opens with a kernel callchain, as the sampler opens it
/// to follow an off-CPU wait to the thread that ended it.
fn waking_check(kernel_ok: bool) -> Check {
    let fix = Some("run as root, or sudo sysctl kernel.perf_event_paranoid=1");
    let Some(tp) = tracefs::tracepoint("sched", "sched_waking") else {
        return check(
            "wake-ups",
            false,
            "sched:sched_waking not found (tracefs missing or unreadable): off-CPU waits \
             cannot be followed to their waker"
                .into(),
            fix,
        );
    };
    let mut a = sys::new_attr(b::PERF_TYPE_TRACEPOINT, tp.id);
    a.set_disabled(1);
    a.sample_type = sys::SAMPLE_RAW | sys::SAMPLE_CALLCHAIN;
    a.set_exclude_callchain_user(1);
    a.__bindgen_anon_1.sample_period = 1;
    let has_pid = tp.field("pid").is_some();
    match try_open(a, false) {
        Ok(()) if kernel_ok && has_pid => check(
            "wake-ups",
            true,
            "sched:sched_waking opens: off-CPU waits are followed to their waker".into(),
            None,
        ),
        Ok(()) => check(
            "wake-ups",
            false,
            if has_pid {
                "sched:sched_waking opens, but the sampler records wake-ups only with kernel \
                 sampling"
                    .into()
            } else {
                "sched:sched_waking has no pid field in its format: wakers not recorded".into()
            },
            fix,
        ),
        Err(e) => check(
            "wake-ups",
            false,
            format!(
                "sched:sched_waking refused ({e}): off-CPU waits cannot be followed to their \
                 waker"
            ),
            fix,
        ),
    }
}

fn dlopen_ok(name: &str) -> bool {
    let Ok(c) = std::ffi::CString::new(name) else {
        return false;
    };
    // SAFETY: dlopen with a valid C string; the handle is closed right away.
    unsafe {
        let h = libc::dlopen(c.as_ptr(), libc::RTLD_LAZY | libc::RTLD_LOCAL);
        if h.is_null() {
            return false;
        }
        libc::dlclose(h);
    }
    true
}

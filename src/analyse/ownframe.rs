//! Where the user can act: a bottleneck whose time sits in library, runtime or kernel
//! code (glibc's `poll`, Rust's `std::thread::sleep`, the kernel) is named at the
//! program's own frame nearest to it — the caller in the user's code — with the library
//! function kept as the detail ("main (demo.rs:20) in clock_nanosleep").
//!
//! "Library" here is the system's C and C++ runtimes, the dynamic loader, the vDSO,
//! the kernel, Rust's standard library and Python's (its frozen modules, the files
//! under `lib/pythonX.Y/` outside `site-packages`, and CPython's own extension modules:
//! `_socket`, `_ssl`…), and Go's (its runtime and standard packages, compiled into the
//! program from the toolchain's `GOROOT/src/`: `crypto/sha256.block`,
//! `runtime.futex`), and Node.js's (the `node` binary itself: V8, libuv, its bindings;
//! and its JavaScript library, `node:internal/…`); anything else (the program, its own
//! shared objects, its Python code, installed Python packages, Go modules, JavaScript
//! named through V8's JIT map, native addons) is the user's.

use crate::profile::{Frame, FrameKind, SampledProfile};

use super::calltree::{CallTree, NodeLabel, is_plumbing};

/// Module name prefixes of the system's runtimes.
const SYSTEM_MODULES: &[&str] = &[
    "libc.so",
    "libc-",
    "ld-linux",
    "ld64.so",
    "libpthread",
    "libstdc++",
    "libgcc_s",
    "libm.so",
    "libdl",
    "librt",
    "[vdso]",
    "linux-vdso",
    "[kernel]",
];

/// Function name prefixes of Rust's standard library.
const RUNTIME_FUNCTIONS: &[&str] = &[
    "std::", "core::", "alloc::", "<std::", "<core::", "<alloc::",
];

/// True for a frame of the system's runtimes, Rust's standard library or the kernel.
pub fn is_system(f: &Frame) -> bool {
    f.kind == FrameKind::Kernel
        || f.module
            .as_deref()
            .is_some_and(|m| SYSTEM_MODULES.iter().any(|s| m.starts_with(s)))
        || RUNTIME_FUNCTIONS.iter().any(|s| f.function.starts_with(s))
        || f.file.as_deref().is_some_and(|p| p.starts_with("/rustc/"))
        || is_python_stdlib(f)
        || is_cpython_extension(f)
        || is_go_stdlib(f)
        || is_node_runtime(f)
}

/// A frame of Node.js itself: native code of the `node` binary (or `libnode.so`), or
/// JavaScript of its library (`node:internal/modules/cjs/loader`, `node:fs`: the
/// `node:` files of V8's JIT map, see `symbolize::perfmap`).
fn is_node_runtime(f: &Frame) -> bool {
    let module = f.module.as_deref().unwrap_or_default();
    module == "node"
        || module == "nodejs"
        || module.starts_with("libnode.so")
        || f.file.as_deref().is_some_and(|p| p.starts_with("node:"))
        // Recorded before JIT names were read into function, file and line.
        || (module.starts_with("perf-")
            && crate::symbolize::perfmap::v8_function(&f.function)
                .is_some_and(|(_, file, _)| file.starts_with("node:")))
}

/// A function of Go's runtime or standard library: its source is under the toolchain's
/// `src/` (a GOROOT named `go`, `go-1.19`, `go1.21.0`: `/usr/lib/go-1.19/src/crypto/…`,
/// `/usr/local/go/src/runtime/…`) in a standard package (a first path element without
/// a dot: `crypto`, `runtime`, `net`; `github.com/…` is a module). Go modules are
/// under `pkg/mod/`, not a GOROOT; the program's own package is `main`.
fn is_go_stdlib(f: &Frame) -> bool {
    let Some(path) = f.file.as_deref() else {
        return false;
    };
    if !(path.ends_with(".go") || path.ends_with(".s")) || f.function.starts_with("main.") {
        return false;
    }
    let Some((root, package)) = path.split_once("/src/") else {
        return false;
    };
    let goroot = root.rsplit('/').next().is_some_and(|d| d.starts_with("go"));
    let standard = package.split('/').next().is_some_and(|e| !e.contains('.'));
    goroot && standard && !root.contains("/pkg/mod/")
}

/// A native frame of one of CPython's own extension modules (`_socket`, `_ssl`,
/// `select`... in `lib-dynload`): an extension module (`NAME.cpython-3XY-….so`) built
/// from CPython's source tree (`…/Python-3.X.Y/Modules/…`, as a build with symbols names
/// it). A package's extension (numpy's) is the user's.
fn is_cpython_extension(f: &Frame) -> bool {
    f.kind == FrameKind::User
        && f.module
            .as_deref()
            .is_some_and(|m| m.contains(".cpython-3"))
        && f.file
            .as_deref()
            .is_some_and(|p| p.contains("/Python-3.") && p.contains("/Modules/"))
}

/// A Python frame of the interpreter's standard library.
fn is_python_stdlib(f: &Frame) -> bool {
    f.kind == FrameKind::Python
        && f.file.as_deref().is_some_and(|p| {
            p.starts_with("<frozen ") || (p.contains("/lib/python") && !p.contains("-packages/"))
        })
}

/// The nearest caller of `node` (a function node) that is the user's own code, if any.
/// None past an address no module holds (`[unknown]+0x…`): the stack's unwinding went
/// astray there (Go's assembly uses the frame pointer register for data), so nothing
/// above it is a caller.
pub fn own_caller(p: &SampledProfile, tree: &CallTree, node: usize) -> Option<u32> {
    let mut cur = tree.nodes.get(node)?.parent();
    while let Some(i) = cur {
        let NodeLabel::Function { frame } = tree.nodes[i].label else {
            return None;
        };
        let f = p.frames.get(frame as usize)?;
        if f.module.as_deref() == Some("[unknown]") {
            return None;
        }
        if !is_system(f) && !is_plumbing(&f.function) {
            return Some(frame);
        }
        cur = tree.nodes[i].parent();
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(function: &str, module: &str, file: Option<&str>) -> Frame {
        Frame {
            function: function.into(),
            module: Some(module.into()),
            file: file.map(str::to_string),
            line: None,
            kind: FrameKind::User,
            inlined: false,
        }
    }

    #[test]
    fn runtimes_and_the_kernel_are_system_code_the_program_is_not() {
        assert!(is_system(&frame("__GI___poll", "libc.so.6", None)));
        assert!(is_system(&frame("std::thread::sleep", "demo", None)));
        assert!(is_system(&frame(
            "lt",
            "demo",
            Some("/rustc/abc/library/core/src/cmp.rs")
        )));
        assert!(!is_system(&frame(
            "compute",
            "demo",
            Some("examples/demo.rs")
        )));
        assert!(!is_system(&frame("PQexec", "libpq.so.5", None)));
    }

    #[test]
    fn node_and_its_library_are_system_code_the_script_and_its_addons_are_not() {
        assert!(is_system(&frame("uv__fs_write", "node", None)));
        assert!(is_system(&frame(
            "v8::internal::Heap::Scavenge",
            "libnode.so.108",
            None
        )));
        assert!(is_system(&frame(
            "Module._compile",
            "perf-42.map",
            Some("node:internal/modules/cjs/loader")
        )));
        assert!(!is_system(&frame(
            "slowSum",
            "perf-42.map",
            Some("/app/hot.js")
        )));
        assert!(!is_system(&frame("Hash", "binding.node", None)));
    }

    #[test]
    fn python_standard_library_frames_are_system_code_the_script_is_not() {
        let py = |file: &str| Frame {
            kind: FrameKind::Python,
            ..frame("f", "m", Some(file))
        };
        assert!(is_system(&py("/usr/lib/python3.11/socket.py")));
        assert!(is_system(&py(
            "/root/.pyenv/versions/3.11.7/lib/python3.11/json/decoder.py"
        )));
        assert!(is_system(&py("<frozen importlib._bootstrap>")));
        assert!(!is_system(&py(
            "/usr/lib/python3/dist-packages/requests/api.py"
        )));
        assert!(!is_system(&py("/home/me/app/main.py")));
    }

    #[test]
    fn go_s_runtime_and_standard_packages_are_system_code_modules_and_main_are_not() {
        let go = |function: &str, file: &str| frame(function, "app", Some(file));
        assert!(is_system(&go(
            "crypto/sha256.block",
            "/usr/lib/go-1.19/src/crypto/sha256/sha256block_amd64.s"
        )));
        assert!(is_system(&go(
            "runtime.futex",
            "/usr/local/go/src/runtime/sys_linux_amd64.s"
        )));
        assert!(is_system(&go(
            "sync.(*Mutex).lockSlow",
            "/root/sdk/go1.21.0/src/sync/mutex.go"
        )));
        assert!(!is_system(&go("main.work", "/tmp/gop/main.go")));
        assert!(!is_system(&go(
            "github.com/x/y.F",
            "/root/go/pkg/mod/github.com/x/y@v1.2.0/src/y.go"
        )));
        assert!(!is_system(&go(
            "github.com/x/y.F",
            "/root/go/src/github.com/x/y/y.go"
        )));
        // A C function with a compiler suffix is no Go function.
        assert!(!is_system(&go(
            "finish.isra.0",
            "/usr/src/linux/src/sched/core.c"
        )));
    }

    #[test]
    fn cpython_s_own_extension_modules_are_library_a_package_s_are_not() {
        assert!(is_system(&frame(
            "sock_recv_impl",
            "_socket.cpython-311-x86_64-linux-gnu.so",
            Some("/tmp/python-build.1/Python-3.11.7/Modules/socketmodule.c")
        )));
        assert!(!is_system(&frame(
            "PyArray_Sum",
            "_multiarray_umath.cpython-311-x86_64-linux-gnu.so",
            Some("numpy/core/src/multiarray/calculation.c")
        )));
        assert!(!is_system(&frame(
            "lz4_compress",
            "_block.cpython-311-x86_64-linux-gnu.so",
            None
        )));
    }
}

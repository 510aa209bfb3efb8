//! A real PostgreSQL cluster for one test: `initdb` in a temporary folder, started on a
//! free TCP port of 127.0.0.1 with its Unix socket in that folder, trust
//! authentication for user `postgres`, every statement and connection logged (so a test
//! can count on the server's side what a client sent), stopped (`pg_ctl stop -m fast`)
//! when dropped — also when the test panics.
//!
//! Nothing is skipped: when PostgreSQL is not installed or will not start, the test
//! fails and says why and how to fix it (`.ci/run` installs it). No system service is
//! used or assumed.

use std::path::{Path, PathBuf};
use std::process::Command;

/// A running cluster; stopped and removed on drop.
pub struct PgCluster {
    dir: tempfile::TempDir,
    bin: PathBuf,
    pub port: u16,
}

/// The folder holding `initdb` and `pg_ctl`: PATH first, then /usr/lib/postgresql/*/bin
/// (the Debian layout, newest version first).
pub fn pg_bin_dir() -> PathBuf {
    let on_path = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .unwrap_or_default();
    let mut debian: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .map(|d| d.flatten().map(|e| e.path().join("bin")).collect())
        .unwrap_or_default();
    debian.sort_by_key(|p| {
        let v = p.parent().and_then(|v| v.file_name());
        std::cmp::Reverse(v.and_then(|v| v.to_str()?.parse::<u32>().ok()))
    });
    on_path
        .into_iter()
        .chain(debian)
        .find(|d| d.join("initdb").is_file() && d.join("pg_ctl").is_file())
        .unwrap_or_else(|| {
            panic!(
                "PostgreSQL is not installed (no initdb/pg_ctl on PATH or in \
                 /usr/lib/postgresql/*/bin): run .ci/run, or `apt-get install -y postgresql`"
            )
        })
}

/// The `psql` binary itself (not Debian's Perl wrapper in /usr/bin): beside initdb,
/// following links (/usr/local/bin/initdb → /usr/lib/postgresql/15/bin/initdb).
pub fn psql() -> PathBuf {
    let initdb = pg_bin_dir().join("initdb");
    let real = std::fs::canonicalize(&initdb).unwrap_or(initdb);
    let beside = real.with_file_name("psql");
    if beside.is_file() {
        return beside;
    }
    PathBuf::from("psql")
}

fn is_root() -> bool {
    // SAFETY: getuid cannot fail.
    unsafe { libc::getuid() == 0 }
}

/// Create the `postgres` system user when missing (root only).
fn ensure_postgres_user() {
    let known = Command::new("id")
        .args(["-u", "postgres"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !known {
        let st = Command::new("useradd")
            .args([
                "--system",
                "--no-create-home",
                "--shell",
                "/bin/false",
                "postgres",
            ])
            .status()
            .expect("useradd runs");
        assert!(st.success(), "creating the postgres user failed: {st}");
    }
}

/// A command run as `postgres` when we are root (initdb refuses root), as ourselves
/// otherwise.
fn as_owner(program: &Path) -> Command {
    if is_root() {
        let mut c = Command::new("runuser");
        c.args(["-u", "postgres", "--"]).arg(program);
        c
    } else {
        Command::new(program)
    }
}

/// A TCP port of 127.0.0.1 that was free a moment ago.
pub fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
    l.local_addr().expect("local addr").port()
}

fn run_checked(mut cmd: Command, what: &str, log: Option<&Path>) {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("{what}: cannot run {cmd:?}: {e}"));
    if !out.status.success() {
        let server_log = log
            .and_then(|l| std::fs::read_to_string(l).ok())
            .unwrap_or_default();
        panic!(
            "{what} failed ({}): {cmd:?}\nstdout: {}\nstderr: {}\nserver log:\n{server_log}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

impl PgCluster {
    /// initdb, then start on a free port; panics with the reason when it cannot.
    pub fn start() -> PgCluster {
        let bin = pg_bin_dir();
        let dir = tempfile::Builder::new()
            .prefix("pg")
            .tempdir()
            .expect("tempdir");
        std::fs::set_permissions(
            dir.path(),
            std::os::unix::fs::PermissionsExt::from_mode(0o755),
        )
        .expect("chmod");
        if is_root() {
            ensure_postgres_user();
            let st = Command::new("chown")
                .arg("postgres:")
                .arg(dir.path())
                .status()
                .expect("chown runs");
            assert!(st.success(), "chown postgres {}", dir.path().display());
        }
        let data = dir.path().join("data");
        let mut init = as_owner(&bin.join("initdb"));
        init.arg("-D")
            .arg(&data)
            .args(["-A", "trust", "-U", "postgres", "--no-sync"])
            .args(["-E", "UTF8", "--locale=C"]);
        run_checked(init, "initdb", None);
        let port = free_port();
        let pg = PgCluster { dir, bin, port };
        pg.pg_ctl_start();
        pg
    }

    fn pg_ctl_start(&self) {
        let opts = format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1 -c fsync=off \
             -c log_statement=all -c log_connections=on",
            self.port,
            self.socket_dir().display()
        );
        let mut start = as_owner(&self.bin.join("pg_ctl"));
        start
            .arg("-D")
            .arg(self.dir.path().join("data"))
            .arg("-l")
            .arg(self.log_path())
            .args(["-w", "-t", "30", "-o", &opts, "start"]);
        run_checked(start, "starting PostgreSQL", Some(&self.log_path()));
    }

    /// The folder of the Unix socket (`.s.PGSQL.<port>` inside): psql's `-h` for it.
    pub fn socket_dir(&self) -> &Path {
        self.dir.path()
    }

    /// The server's log (statements and connections).
    pub fn log_path(&self) -> PathBuf {
        self.dir.path().join("server.log")
    }

    /// A folder the cluster's owner made, writable by anyone (for query files and
    /// outputs of unprivileged runs).
    pub fn scratch(&self) -> PathBuf {
        let d = self.dir.path().join("scratch");
        std::fs::create_dir_all(&d).expect("mkdir scratch");
        std::fs::set_permissions(&d, std::os::unix::fs::PermissionsExt::from_mode(0o777))
            .expect("chmod scratch");
        d
    }

    /// The postmaster's pid, from the data folder's postmaster.pid.
    pub fn postmaster_pid(&self) -> Option<i32> {
        let text = std::fs::read_to_string(self.dir.path().join("data/postmaster.pid")).ok()?;
        text.lines().next()?.trim().parse().ok()
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.log_path()).unwrap_or_default()
    }

    /// Statements the server logged whose text contains `needle`.
    pub fn statements(&self, needle: &str) -> usize {
        self.log()
            .lines()
            .filter(|l| l.contains("statement: ") && l.contains(needle))
            .count()
    }

    /// Connections the server authorized so far.
    pub fn connections(&self) -> usize {
        self.log()
            .lines()
            .filter(|l| l.contains("connection authorized"))
            .count()
    }

    /// psql's arguments to reach this cluster over TCP (`tcp`) or its Unix socket.
    pub fn psql_args(&self, tcp: bool) -> Vec<String> {
        let host = if tcp {
            "127.0.0.1".to_string()
        } else {
            self.socket_dir().display().to_string()
        };
        ["-X", "-q", "-U", "postgres", "-d", "postgres", "-h", &host]
            .iter()
            .map(|s| s.to_string())
            .chain(["-p".to_string(), self.port.to_string()])
            .collect()
    }
}

impl Drop for PgCluster {
    fn drop(&mut self) {
        let mut stop = as_owner(&self.bin.join("pg_ctl"));
        stop.arg("-D")
            .arg(self.dir.path().join("data"))
            .args(["-w", "-t", "30", "-m", "fast", "stop"]);
        match stop.output() {
            Ok(o) if o.status.success() => {}
            Ok(o) => eprintln!("pg_ctl stop failed: {}", String::from_utf8_lossy(&o.stderr)),
            Err(e) => eprintln!("pg_ctl stop: {e}"),
        }
    }
}

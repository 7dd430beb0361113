//! One `redis-server` process: [`RedisServer`], how to start it ([`RedisOptions`]), and why a
//! start failed ([`StartError`]).

use std::io;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use crate::off_runtime;

/// The shipped `redis.conf`, built into the binary so `keyfire dev` works from anywhere.
pub const REDIS_CONF: &str = include_str!("../../../redis.conf");

/// How to start a [`RedisServer`].
#[derive(Debug, Clone, Default)]
pub struct RedisOptions {
    /// Keep the AOF (for tests of persistence and `keyfire dev`). Off: no disk writes.
    pub persistent: bool,
    /// Extra `--name value` settings.
    pub extra: Vec<(String, String)>,
}

/// Commands that managed Redis services forbid (ElastiCache: CONFIG, DEBUG; Aiven also ACL,
/// CLUSTER, COMMAND, MONITOR, ROLE), and the name a [`RedisOptions::managed`] server gives each:
/// empty where it is gone, a secret name where the tests' own fixtures still need it to set a
/// fault up (see [`RedisServer::admin`]).
pub const MANAGED_RENAMES: &[(&str, &str)] = &[
    ("CONFIG", "kf-admin-config"),
    ("DEBUG", "kf-admin-debug"),
    ("ACL", "kf-admin-acl"),
    ("ROLE", ""),
    ("COMMAND", ""),
    ("MONITOR", ""),
    ("CLUSTER", ""),
];

/// Whether the tests run against Redis as a managed service offers it
/// (`KEYFIRE_TEST_REDIS_MANAGED=1`): the fixtures that honour it start their servers with
/// [`RedisOptions::managed`].
pub fn managed_from_env() -> bool {
    std::env::var("KEYFIRE_TEST_REDIS_MANAGED").is_ok_and(|v| !v.is_empty() && v != "0")
}

impl RedisOptions {
    /// A server like a managed service's: the commands of [`MANAGED_RENAMES`] renamed away.
    pub fn managed() -> Self {
        Self::default().as_managed()
    }

    /// These options with the commands of [`MANAGED_RENAMES`] renamed away.
    pub fn as_managed(mut self) -> Self {
        for (from, to) in MANAGED_RENAMES {
            self.extra
                .push(("rename-command".into(), format!("{from} {to}")));
        }
        self
    }

    /// Whether these options rename the managed services' forbidden commands away.
    pub fn is_managed(&self) -> bool {
        self.extra.iter().any(|(k, _)| k == "rename-command")
    }
}

/// A redis-server child process, killed when dropped.
pub struct RedisServer {
    child: Option<Child>,
    port: u16,
    dir: tempfile::TempDir,
    pub(crate) options: RedisOptions,
    /// A second port of its own, passed as `--<name> <port>` (`cluster-port`, `tls-port`).
    extra_port: Option<(String, u16)>,
    /// Run as a sentinel monitoring this master.
    sentinel: Option<SentinelOf>,
    /// While it is stopped, sockets bound to its ports (see [`RedisServer::stop`]).
    held: Vec<tokio::net::TcpSocket>,
}

/// What a sentinel process monitors.
#[derive(Debug, Clone)]
struct SentinelOf {
    name: String,
    host: String,
    port: u16,
}

impl std::fmt::Debug for RedisServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisServer")
            .field("port", &self.port)
            .finish()
    }
}

/// Why a fixture could not start, for `keyfire dev` to tell its user what to fix: carried
/// inside the `io::Error` the start functions return (see [`StartError::of`]), whose kind is
/// the underlying error's.
#[derive(Debug)]
pub enum StartError {
    /// No directory of its own could be made, or written, under the temp dir (`TMPDIR`).
    Dir {
        /// The temp dir it was made in.
        parent: PathBuf,
        /// Why not.
        source: io::Error,
    },
    /// The program could not be run (not installed, not on `PATH`, not executable).
    Program {
        /// `redis-server` or `redis-cli`.
        program: &'static str,
        /// Why not.
        source: io::Error,
    },
}

impl StartError {
    /// The start error an `io::Error` from a fixture carries, if it is one.
    pub fn of(e: &io::Error) -> Option<&StartError> {
        e.get_ref()?.downcast_ref()
    }
}

impl std::fmt::Display for StartError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StartError::Dir { parent, source } => write!(
                f,
                "cannot create redis-server's directory under {} ({source}): set TMPDIR to a \
                 writable directory",
                parent.display()
            ),
            StartError::Program { program, source } => write!(
                f,
                "cannot run {program} ({source}): install Redis, or put {program} on PATH"
            ),
        }
    }
}

impl std::error::Error for StartError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            StartError::Dir { source, .. } | StartError::Program { source, .. } => Some(source),
        }
    }
}

impl From<StartError> for io::Error {
    fn from(e: StartError) -> Self {
        let kind = match &e {
            StartError::Dir { source, .. } | StartError::Program { source, .. } => source.kind(),
        };
        io::Error::new(kind, e)
    }
}

fn free_port() -> io::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

impl RedisServer {
    /// Start a server without persistence.
    pub fn start() -> io::Result<Self> {
        off_runtime(|| Self::start_with(RedisOptions::default()))
    }

    /// Start a server with `options`.
    pub fn start_with(options: RedisOptions) -> io::Result<Self> {
        off_runtime(|| Self::start_inner(options, None, None))
    }

    /// Start a server with `options` and a second free port of its own, passed as
    /// `--<name> <port>`: `cluster-port` (the cluster bus; port + 10000 may be out of range or
    /// taken), `tls-port`. The port is [`RedisServer::extra_port`].
    pub fn start_with_extra_port(options: RedisOptions, name: &str) -> io::Result<Self> {
        off_runtime(|| Self::start_inner(options, Some(name), None))
    }

    fn start_inner(
        options: RedisOptions,
        extra_port: Option<&str>,
        sentinel: Option<SentinelOf>,
    ) -> io::Result<Self> {
        let in_temp = |source: io::Error| StartError::Dir {
            parent: std::env::temp_dir(),
            source,
        };
        let dir = tempfile::Builder::new()
            .prefix("keyfire-redis-")
            .tempdir()
            .map_err(in_temp)?;
        std::fs::write(dir.path().join("redis.conf"), REDIS_CONF).map_err(in_temp)?;
        let mut server = Self {
            child: None,
            port: 0,
            dir,
            options,
            extra_port: extra_port.map(|name| (name.to_string(), 0)),
            sentinel,
            held: Vec::new(),
        };
        let mut last_err = None;
        // Another process may take the free port between our probe and Redis's bind: retry.
        for _ in 0..5 {
            server.port = free_port()?;
            if let Some((_, port)) = server.extra_port.as_mut() {
                *port = free_port()?;
                if *port == server.port {
                    continue;
                }
            }
            if server.sentinel.is_some() {
                server.write_sentinel_conf()?;
            }
            match server.spawn() {
                Ok(()) => return Ok(server),
                Err(e) => {
                    let _ = server.stop(true);
                    last_err = Some(e);
                }
            }
        }
        Err(last_err.unwrap_or_else(|| io::Error::other("redis-server did not start")))
    }

    /// Start a sentinel (`redis-server <conf> --sentinel`) that monitors the master `name` at
    /// `host:port` with quorum 2, `down-after-milliseconds 1000` and `failover-timeout 5000`.
    pub fn start_sentinel(name: &str, host: &str, port: u16) -> io::Result<Self> {
        off_runtime(|| {
            Self::start_inner(
                RedisOptions::default(),
                None,
                Some(SentinelOf {
                    name: name.to_string(),
                    host: host.to_string(),
                    port,
                }),
            )
        })
    }

    /// A sentinel rewrites its config file (what it learns of replicas, peers and failovers),
    /// so it gets one of its own in the temp dir, written before its first start.
    fn write_sentinel_conf(&self) -> io::Result<()> {
        let Some(of) = &self.sentinel else {
            return Ok(());
        };
        let dir = self.dir.path();
        let conf = format!(
            "port {port}\n\
             bind 127.0.0.1\n\
             daemonize no\n\
             dir {dir}\n\
             logfile {log}\n\
             sentinel monitor {name} {host} {mport} 2\n\
             sentinel down-after-milliseconds {name} 1000\n\
             sentinel failover-timeout {name} 5000\n\
             sentinel parallel-syncs {name} 1\n",
            port = self.port,
            dir = dir.display(),
            log = self.log_path().display(),
            name = of.name,
            host = of.host,
            mport = of.port,
        );
        std::fs::write(dir.join("sentinel.conf"), conf)
    }

    fn spawn(&mut self) -> io::Result<()> {
        let dir = self.dir.path();
        let mut cmd = Command::new("redis-server");
        if self.sentinel.is_some() {
            cmd.arg(dir.join("sentinel.conf")).arg("--sentinel");
        } else {
            cmd.arg(dir.join("redis.conf"))
                .args(["--port", &self.port.to_string()])
                .args(["--bind", "127.0.0.1"])
                .arg("--dir")
                .arg(dir)
                .arg("--logfile")
                .arg(dir.join("redis.log"))
                .args(["--daemonize", "no"]);
            if !self.options.persistent {
                cmd.args(["--appendonly", "no", "--save", ""]);
            }
            if let Some((name, port)) = &self.extra_port {
                cmd.arg(format!("--{name}")).arg(port.to_string());
            }
            for (k, v) in &self.options.extra {
                cmd.arg(format!("--{k}"));
                // `rename-command` takes two arguments (see RedisOptions::managed).
                match (k.as_str(), v.split_once(' ')) {
                    ("rename-command", Some((from, to))) => cmd.args([from, to]),
                    _ => cmd.arg(v),
                };
            }
        }
        // What Redis says before its log file is open (a bad argument, a port it cannot
        // bind on some versions) goes to stdout and stderr: keep it beside the log.
        let out = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.join("redis.out"))?;
        let child = cmd
            .stdin(Stdio::null())
            .stdout(out.try_clone()?)
            .stderr(out)
            .spawn()
            .map_err(|source| StartError::Program {
                program: "redis-server",
                source,
            })?;
        self.child = Some(child);
        let ready = self.wait_ready(Duration::from_secs(10));
        // It has bound its ports (or never will).
        self.held.clear();
        ready
    }

    /// Keep its ports from other processes while it is stopped: a socket bound to each with
    /// `SO_REUSEADDR` but not listening. Connecting to the port is refused, as it is with no
    /// socket there; a free-port probe anywhere on the host (`bind` to port 0) passes it over;
    /// Redis, binding it by number with `SO_REUSEADDR` itself, still can. Without this, a port
    /// is free from the stop until the restart, and another test's server (or anything binding
    /// a free port) could take it: the restart would then fail, or find the other server
    /// answering in its place.
    fn hold_ports(&mut self) {
        let ports = std::iter::once(self.port).chain(self.extra_port());
        self.held = ports
            .filter_map(|port| {
                let socket = tokio::net::TcpSocket::new_v4().ok()?;
                socket.set_reuseaddr(true).ok()?;
                socket
                    .bind(std::net::SocketAddr::from(([127, 0, 0, 1], port)))
                    .ok()?;
                Some(socket)
            })
            .collect();
    }

    /// Longest a start may take while Redis answers that it is loading its data.
    const LOADING_LIMIT: Duration = Duration::from_secs(120);

    fn wait_ready(&mut self, limit: Duration) -> io::Result<()> {
        let started = Instant::now();
        let client = redis::Client::open(self.url()).map_err(io::Error::other)?;
        let ours = self.pid().map(|p| p.to_string());
        // Another process answering on its port (it could not bind it, and will exit).
        let mut foreign = None;
        loop {
            if let Some(child) = self.child.as_mut()
                && let Some(status) = child.try_wait()?
            {
                let taken = foreign
                    .map(|pid| format!(" (its port answered as process {pid}, not ours)"))
                    .unwrap_or_default();
                return Err(io::Error::other(format!(
                    "redis-server exited with {status}{taken}: {}",
                    self.log_tail(20)
                )));
            }
            let mut loading = false;
            if let Ok(mut c) = client.get_connection_with_timeout(Duration::from_millis(200)) {
                // Whatever answers may not speak Redis.
                let _ = c.set_read_timeout(Some(Duration::from_secs(1)));
                match redis::cmd("PING").query::<String>(&mut c) {
                    Ok(_) => {
                        let info: String = redis::cmd("INFO")
                            .arg("server")
                            .query(&mut c)
                            .unwrap_or_default();
                        match crate::info_field(&info, "process_id") {
                            Some(pid) if Some(&pid) != ours.as_ref() => foreign = Some(pid),
                            _ => return Ok(()),
                        }
                    }
                    // Reading its AOF: alive, and as slow as the AOF is long.
                    Err(e) => loading = e.code() == Some("LOADING"),
                }
            }
            if started.elapsed() > limit && !(loading && started.elapsed() < Self::LOADING_LIMIT) {
                return Err(io::Error::other("redis-server did not answer PING in time"));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// A command to set a test's fault up with: `name` (such as `CONFIG`), or the secret name
    /// a [`RedisOptions::managed`] server gave it, so fixtures keep working where keyfire
    /// cannot reach the command.
    pub fn admin(&self, name: &str) -> redis::Cmd {
        let renamed = self
            .options
            .extra
            .iter()
            .filter(|(k, _)| k == "rename-command")
            .filter_map(|(_, v)| v.split_once(' '))
            .find(|(from, _)| from.eq_ignore_ascii_case(name))
            .map(|(_, to)| to);
        redis::cmd(match renamed {
            Some(to) if !to.is_empty() => to,
            _ => name,
        })
    }

    /// `CONFIG SET name value` through [`RedisServer::admin`], over a connection of its own:
    /// a test's fault, such as expired key events turned off
    /// (`config_set("notify-keyspace-events", "")`).
    pub async fn config_set(&self, name: &str, value: &str) {
        let _: () = self
            .admin("CONFIG")
            .arg("SET")
            .arg(name)
            .arg(value)
            .query_async(&mut self.admin_conn().await)
            .await
            .unwrap_or_else(|e| panic!("CONFIG SET {name}: {e}"));
    }

    /// `ACL SETUSER user rules...` through [`RedisServer::admin`], over a connection of its
    /// own: a user kept to what `rules` allow (`["on", ">pw", "~*", "+@all"]`).
    pub async fn acl_setuser(&self, user: &str, rules: &[String]) {
        let _: () = self
            .admin("ACL")
            .arg("SETUSER")
            .arg(user)
            .arg(rules)
            .query_async(&mut self.admin_conn().await)
            .await
            .unwrap_or_else(|e| panic!("ACL SETUSER {user}: {e}"));
    }

    /// A connection of the fixture's own, as the default user.
    async fn admin_conn(&self) -> redis::aio::MultiplexedConnection {
        redis::Client::open(self.url())
            .unwrap()
            .get_multiplexed_async_connection()
            .await
            .unwrap()
    }

    /// `redis://127.0.0.1:<port>/0`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/0", self.port)
    }

    /// The port it listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `127.0.0.1:<port>`.
    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// The second port given by [`RedisServer::start_with_extra_port`].
    pub fn extra_port(&self) -> Option<u16> {
        self.extra_port.as_ref().map(|(_, port)| *port)
    }

    /// Whether the process runs (it was neither stopped nor found dead).
    pub fn is_running(&mut self) -> bool {
        match self.child.as_mut() {
            Some(child) => matches!(child.try_wait(), Ok(None)),
            None => false,
        }
    }

    /// Its working directory (AOF, log).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Keep its directory (AOF, `nodes.conf`, log) when it is dropped, to read after a failure.
    pub fn keep_dir(&mut self) {
        self.dir.disable_cleanup(true);
    }

    /// How the process ended, if it was started and has exited since (without being stopped
    /// through [`RedisServer::stop`]).
    pub fn exit_status(&mut self) -> Option<std::process::ExitStatus> {
        self.child.as_mut()?.try_wait().ok().flatten()
    }

    /// The process id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Stop it: SIGTERM (Redis flushes its AOF) or SIGKILL (a crash). Its ports stay held
    /// until it starts again, so no other process takes them meanwhile.
    pub fn stop(&mut self, crash: bool) -> io::Result<()> {
        off_runtime(|| {
            if let Some(mut child) = self.child.take() {
                let sig = if crash {
                    Signal::SIGKILL
                } else {
                    Signal::SIGTERM
                };
                // A child already reaped (it exited, and `try_wait` saw it) no longer owns its
                // pid: another process may have it now.
                if child.try_wait()?.is_none() {
                    let _ = kill(Pid::from_raw(child.id() as i32), sig);
                }
                child.wait()?;
                self.hold_ports();
            }
            Ok(())
        })
    }

    /// Start it again on the same port and directory (AOF recovery when persistent).
    pub fn restart(&mut self) -> io::Result<()> {
        off_runtime(|| {
            self.stop(false)?;
            let started = self.spawn();
            // Not answering in time: no process of ours may stay behind on its port.
            if started.is_err() {
                let _ = self.stop(true);
            }
            started
        })
    }

    /// The last `n` lines of its log.
    pub fn log_tail(&self, n: usize) -> String {
        let log = std::fs::read_to_string(self.log_path()).unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        lines[lines.len().saturating_sub(n)..].join("\n")
    }

    /// Its log file.
    pub fn log_path(&self) -> PathBuf {
        self.dir.path().join("redis.log")
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!(
                "--- redis-server :{} log (last 30 lines) ---\n{}",
                self.port,
                self.log_tail(30)
            );
        }
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A free-port probe as any test does it (`bind` to port 0, `SO_REUSEADDR` set by std).
    fn probe() -> u16 {
        TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .expect("a free port")
    }

    #[test]
    fn a_stopped_server_starts_again_on_its_own_ports() {
        // A cluster node: the second port is its bus's.
        let options = RedisOptions {
            persistent: false,
            extra: vec![("cluster-enabled".into(), "yes".into())],
        };
        let mut redis =
            RedisServer::start_with_extra_port(options, "cluster-port").expect("redis-server");
        let ports = [redis.port(), redis.extra_port().expect("extra port")];
        redis.stop(true).unwrap();
        // Refused, as with nothing there...
        let refused = std::net::TcpStream::connect(("127.0.0.1", ports[0]));
        assert!(
            refused.is_err(),
            "a stopped server's port accepts connections"
        );
        // ...but passed over by every free-port probe (about 7,000 odd ports to draw from).
        for _ in 0..3_000 {
            let p = probe();
            assert!(
                !ports.contains(&p),
                "a probe got port {p} of the stopped server"
            );
        }
        redis.restart().unwrap();
        assert_eq!(redis.port(), ports[0]);
    }

    #[test]
    fn a_restart_on_a_port_another_server_took_fails_saying_so() {
        let mut redis = RedisServer::start().expect("redis-server");
        let port = redis.port();
        redis.stop(true).unwrap();
        // Another server binds the port by number (a probe would pass it over).
        let dir = tempfile::tempdir().unwrap();
        let mut other = Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .arg("--dir")
            .arg(dir.path())
            .stdout(Stdio::null())
            .spawn()
            .expect("redis-server");
        let client = redis::Client::open(format!("redis://127.0.0.1:{port}")).unwrap();
        let started = Instant::now();
        while client
            .get_connection()
            .and_then(|mut c| redis::cmd("PING").query::<String>(&mut c))
            .is_err()
        {
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "the other server"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        let err = redis
            .restart()
            .expect_err("restarted in the other server's place");
        let _ = other.kill();
        let _ = other.wait();
        let msg = err.to_string();
        assert!(msg.contains("not ours"), "{msg}");
        assert!(msg.contains("Address already in use"), "{msg}");
    }
}

//! `redis-server` processes of our own: for `keyfire dev`, the benchmarks and the tests.
//! A [`RedisServer`] runs with the shipped `redis.conf` on a free port in a temporary
//! directory; [`RedisCluster`] and [`RedisSentinelSet`] build the deployments keyfire supports
//! past one server out of such processes (Redis Cluster; a master, a replica and sentinels).
//!
//! The fixtures' calls block (they start processes, poll, run `redis-cli`), but they are safe
//! to call from async tests: on a multi-thread tokio runtime each call first hands the
//! worker's other tasks, the nodes under test, to the other workers (`block_in_place`), so a
//! wait for a failover never stalls the nodes it waits on. Use a multi-thread runtime in tests
//! that run nodes while a fixture waits.

use std::io;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

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
    options: RedisOptions,
    /// A second port of its own, passed as `--<name> <port>` (`cluster-port`, `tls-port`).
    extra_port: Option<(String, u16)>,
    /// Run as a sentinel monitoring this master.
    sentinel: Option<SentinelOf>,
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
        let child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|source| StartError::Program {
                program: "redis-server",
                source,
            })?;
        self.child = Some(child);
        self.wait_ready(Duration::from_secs(10))
    }

    fn wait_ready(&mut self, limit: Duration) -> io::Result<()> {
        let started = Instant::now();
        let client = redis::Client::open(self.url()).map_err(io::Error::other)?;
        loop {
            if let Some(child) = self.child.as_mut()
                && let Some(status) = child.try_wait()?
            {
                return Err(io::Error::other(format!(
                    "redis-server exited with {status}: {}",
                    self.log_tail(20)
                )));
            }
            if let Ok(mut c) = client.get_connection_with_timeout(Duration::from_millis(200))
                && redis::cmd("PING").query::<String>(&mut c).is_ok()
            {
                return Ok(());
            }
            if started.elapsed() > limit {
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

    /// The process id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Stop it: SIGTERM (Redis flushes its AOF) or SIGKILL (a crash).
    pub fn stop(&mut self, crash: bool) -> io::Result<()> {
        off_runtime(|| {
            if let Some(mut child) = self.child.take() {
                let sig = if crash {
                    Signal::SIGKILL
                } else {
                    Signal::SIGTERM
                };
                let _ = kill(Pid::from_raw(child.id() as i32), sig);
                child.wait()?;
            }
            Ok(())
        })
    }

    /// Start it again on the same port and directory (AOF recovery when persistent).
    pub fn restart(&mut self) -> io::Result<()> {
        off_runtime(|| {
            self.stop(false)?;
            self.spawn()
        })
    }

    /// The last `n` lines of its log.
    pub fn log_tail(&self, n: usize) -> String {
        let log = std::fs::read_to_string(self.log_path()).unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        lines[lines.len().saturating_sub(n)..].join("\n")
    }

    fn log_path(&self) -> PathBuf {
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

/// Run one command on the server at `addr` (`host:port`) over a short-lived connection.
fn query<T: redis::FromRedisValue>(addr: &str, cmd: &redis::Cmd) -> io::Result<T> {
    let client = redis::Client::open(format!("redis://{addr}")).map_err(io::Error::other)?;
    let mut conn = client
        .get_connection_with_timeout(Duration::from_millis(500))
        .map_err(|e| io::Error::other(format!("{addr}: {e}")))?;
    conn.set_read_timeout(Some(Duration::from_secs(2)))
        .map_err(io::Error::other)?;
    cmd.query(&mut conn)
        .map_err(|e| io::Error::other(format!("{addr}: {e}")))
}

/// The `field:value` lines of an `INFO` or `CLUSTER INFO` reply.
fn info_field(info: &str, field: &str) -> Option<String> {
    info.lines().find_map(|line| {
        line.strip_prefix(field)
            .and_then(|rest| rest.strip_prefix(':'))
            .map(|v| v.trim().to_string())
    })
}

/// Poll `check` every 50 ms until it gives `Some`, for at most `limit`; on timeout the error
/// says what was awaited and the last state seen.
fn wait_until<T>(
    what: &str,
    limit: Duration,
    mut check: impl FnMut() -> io::Result<Option<T>>,
) -> io::Result<T> {
    let started = Instant::now();
    let mut last: String;
    loop {
        match check() {
            Ok(Some(v)) => return Ok(v),
            Ok(None) => last = "not yet".into(),
            Err(e) => last = e.to_string(),
        }
        if started.elapsed() > limit {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("{what}: not done after {limit:?} (last: {last})"),
            ));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// One slot range of `CLUSTER SLOTS`: first slot, last slot, master `host:port`.
type SlotRange = (u16, u16, String);

/// The slot map as `addr` sees it, in slot order (parsed as the library parses it).
fn cluster_slots(addr: &str) -> io::Result<Vec<SlotRange>> {
    let v: redis::Value = query(addr, redis::cmd("CLUSTER").arg("SLOTS"))?;
    let mut out: Vec<SlotRange> = keyfire::store::parse_cluster_slots(&v)
        .map_err(|e| io::Error::other(format!("{addr}: {e}")))?
        .into_iter()
        .map(|(start, end, host, port)| (start, end, format!("{host}:{port}")))
        .collect();
    out.sort();
    Ok(out)
}

/// A Redis Cluster of our own: `masters` masters with `replicas_per_master` replicas each,
/// every node a [`RedisServer`] with `cluster-enabled yes`, a 2 s node timeout, the AOF on and
/// expired events on. All processes are killed (SIGKILL) when it is dropped.
pub struct RedisCluster {
    nodes: Vec<RedisServer>,
    killed: Vec<bool>,
}

impl std::fmt::Debug for RedisCluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisCluster")
            .field("nodes", &self.nodes)
            .field("killed", &self.killed)
            .finish()
    }
}

impl RedisCluster {
    /// How long the cluster may take to form, or to fail over.
    pub const SETTLE_LIMIT: Duration = Duration::from_secs(30);

    /// Start the processes, join them with `redis-cli --cluster create`, and wait until
    /// every node says `cluster_state:ok`, all agree on which master serves which slots, and
    /// every replica is in sync with its master.
    pub fn start(masters: usize, replicas_per_master: usize) -> io::Result<Self> {
        Self::start_with(masters, replicas_per_master, Self::options())
    }

    /// [`RedisCluster::start`] as a managed service offers a cluster: the commands of
    /// [`MANAGED_RENAMES`] renamed away, except `CLUSTER` (a cluster client needs its
    /// `CLUSTER SLOTS`). Reach the renamed ones with [`RedisServer::admin`] of a node.
    pub fn start_managed(masters: usize, replicas_per_master: usize) -> io::Result<Self> {
        let mut options = Self::options().as_managed();
        options
            .extra
            .retain(|(k, v)| !(k == "rename-command" && v.starts_with("CLUSTER ")));
        Self::start_with(masters, replicas_per_master, options)
    }

    fn start_with(
        masters: usize,
        replicas_per_master: usize,
        options: RedisOptions,
    ) -> io::Result<Self> {
        off_runtime(|| {
            if masters < 3 {
                return Err(io::Error::other(
                    "a Redis Cluster needs at least 3 masters (redis-cli --cluster create)",
                ));
            }
            let total = masters * (1 + replicas_per_master);
            let nodes = (0..total)
                .map(|_| RedisServer::start_with_extra_port(options.clone(), "cluster-port"))
                .collect::<io::Result<Vec<_>>>()?;
            let cluster = Self {
                killed: vec![false; nodes.len()],
                nodes,
            };
            // infallible index: `masters >= 3` was checked above, so there are nodes.
            let log = cluster.nodes[0].dir().join("cluster-create.log");
            let out = Command::new("redis-cli")
                .arg("--cluster")
                .arg("create")
                .args(cluster.nodes.iter().map(RedisServer::addr))
                .args(["--cluster-replicas", &replicas_per_master.to_string()])
                .arg("--cluster-yes")
                .stdin(Stdio::null())
                .output()
                .map_err(|source| StartError::Program {
                    program: "redis-cli",
                    source,
                })?;
            let _ = std::fs::write(&log, [&out.stdout[..], &out.stderr[..]].concat());
            if !out.status.success() {
                return Err(io::Error::other(format!(
                    "redis-cli --cluster create failed ({}): {}{}",
                    out.status,
                    String::from_utf8_lossy(&out.stdout),
                    String::from_utf8_lossy(&out.stderr)
                )));
            }
            cluster.wait_settled(None, Self::SETTLE_LIMIT)?;
            wait_until("replicas in sync", Self::SETTLE_LIMIT, || {
                for node in cluster.live() {
                    let info: String = query(&node.addr(), redis::cmd("INFO").arg("replication"))?;
                    if info_field(&info, "role").as_deref() == Some("slave")
                        && info_field(&info, "master_link_status").as_deref() != Some("up")
                    {
                        return Ok(None);
                    }
                }
                Ok(Some(()))
            })?;
            Ok(cluster)
        })
    }

    /// The settings of every node of the cluster.
    fn options() -> RedisOptions {
        RedisOptions {
            persistent: true,
            extra: [
                ("cluster-enabled", "yes"),
                ("cluster-config-file", "nodes.conf"),
                ("cluster-node-timeout", "2000"),
                ("appendonly", "yes"),
                ("notify-keyspace-events", "Ex"),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        }
    }

    /// Run `redis-cli --cluster <args>`, its output kept in the first node's directory.
    fn redis_cli(&self, args: &[String]) -> io::Result<()> {
        let out = Command::new("redis-cli")
            .arg("--cluster")
            .args(args)
            .stdin(Stdio::null())
            .output()?;
        let log = self.nodes[0].dir().join(format!("cluster-{}.log", args[0]));
        let _ = std::fs::write(&log, [&out.stdout[..], &out.stderr[..]].concat());
        if !out.status.success() {
            return Err(io::Error::other(format!(
                "redis-cli --cluster {} failed ({}): {}{}",
                args[0],
                out.status,
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            )));
        }
        Ok(())
    }

    /// Start one more master and join it to the cluster, serving no slots yet (`redis-cli
    /// --cluster add-node`). Returns its address (`127.0.0.1:<port>`).
    pub fn add_master(&mut self) -> io::Result<String> {
        off_runtime(|| {
            let node = RedisServer::start_with_extra_port(Self::options(), "cluster-port")?;
            let addr = node.addr();
            let seed = self
                .live()
                .next()
                .map(RedisServer::addr)
                .ok_or_else(|| io::Error::other("no live cluster node"))?;
            self.nodes.push(node);
            self.killed.push(false);
            self.redis_cli(&["add-node".into(), addr.clone(), seed])?;
            wait_until("the new node known to all", Self::SETTLE_LIMIT, || {
                for node in self.live() {
                    let nodes: String = query(&node.addr(), redis::cmd("CLUSTER").arg("NODES"))?;
                    if !nodes.contains(&addr) {
                        return Ok(None);
                    }
                }
                Ok(Some(()))
            })?;
            // Before moving slots to it: it must know the whole slot map (else `MIGRATE` to it
            // answers CLUSTERDOWN).
            self.wait_settled(None, Self::SETTLE_LIMIT)?;
            Ok(addr)
        })
    }

    /// Move slots (and their keys, with `MIGRATE`) until every master, empty ones included,
    /// serves an equal share (`redis-cli --cluster rebalance --cluster-use-empty-masters`),
    /// then wait until the nodes agree on the slot map.
    pub fn rebalance(&self) -> io::Result<()> {
        off_runtime(|| {
            let seed = self
                .live()
                .next()
                .map(RedisServer::addr)
                .ok_or_else(|| io::Error::other("no live cluster node"))?;
            self.redis_cli(&[
                "rebalance".into(),
                seed,
                "--cluster-use-empty-masters".into(),
            ])?;
            self.wait_settled(None, Self::SETTLE_LIMIT)
        })
    }

    fn live(&self) -> impl Iterator<Item = &RedisServer> {
        self.nodes
            .iter()
            .zip(&self.killed)
            .filter(|(_, killed)| !**killed)
            .map(|(n, _)| n)
    }

    /// Seed URLs (`redis://127.0.0.1:<port>`) of the nodes not killed.
    pub fn nodes(&self) -> Vec<String> {
        self.live()
            .map(|n| format!("redis://{}", n.addr()))
            .collect()
    }

    /// Every node, killed or not, in creation order.
    pub fn servers(&self) -> &[RedisServer] {
        &self.nodes
    }

    /// The masters serving slots (`127.0.0.1:<port>`), in slot order, as a live node sees them.
    pub fn masters(&self) -> io::Result<Vec<String>> {
        off_runtime(|| {
            let mut last = None;
            for node in self.live() {
                match cluster_slots(&node.addr()) {
                    Ok(ranges) => {
                        let mut masters: Vec<String> = Vec::new();
                        for (_, _, m) in ranges {
                            if !masters.contains(&m) {
                                masters.push(m);
                            }
                        }
                        return Ok(masters);
                    }
                    Err(e) => last = Some(e),
                }
            }
            Err(last.unwrap_or_else(|| io::Error::other("no live cluster node")))
        })
    }

    /// The master (`127.0.0.1:<port>`) serving `slot`, as a live node sees it.
    pub fn master_of_slot(&self, slot: u16) -> io::Result<String> {
        off_runtime(|| {
            let node = self
                .live()
                .next()
                .ok_or_else(|| io::Error::other("no live cluster node"))?;
            cluster_slots(&node.addr())?
                .into_iter()
                .find(|(start, end, _)| (*start..=*end).contains(&slot))
                .map(|(_, _, m)| m)
                .ok_or_else(|| io::Error::other(format!("no master serves slot {slot}")))
        })
    }

    /// Kill node `i` with SIGKILL (a crash).
    pub fn kill(&mut self, i: usize) -> io::Result<()> {
        off_runtime(|| {
            self.nodes[i].stop(true)?;
            self.killed[i] = true;
            Ok(())
        })
    }

    /// Kill (SIGKILL) the master serving `slot`; returns its address.
    pub fn kill_master_of_slot(&mut self, slot: u16) -> io::Result<String> {
        off_runtime(|| {
            let master = self.master_of_slot(slot)?;
            let i = self
                .nodes
                .iter()
                .position(|n| n.addr() == master)
                .ok_or_else(|| io::Error::other(format!("master {master} is not one of ours")))?;
            self.kill(i)?;
            Ok(master)
        })
    }

    /// Wait until a replica has taken over from the killed master `old` (`host:port`): every
    /// live node says `cluster_state:ok` and all agree on a slot map in which `old` serves
    /// nothing. Returns the masters then.
    pub fn wait_for_failover(&self, old: &str, limit: Duration) -> io::Result<Vec<String>> {
        off_runtime(|| {
            self.wait_settled(Some(old), limit)?;
            self.masters()
        })
    }

    /// Wait until every live node says `cluster_state:ok` and all agree on the slot map (in
    /// which `gone`, if given, serves nothing).
    pub fn wait_settled(&self, gone: Option<&str>, limit: Duration) -> io::Result<()> {
        off_runtime(|| {
            wait_until("cluster_state:ok on every node", limit, || {
                let mut agreed: Option<Vec<SlotRange>> = None;
                for node in self.live() {
                    let info: String = query(&node.addr(), redis::cmd("CLUSTER").arg("INFO"))?;
                    if info_field(&info, "cluster_state").as_deref() != Some("ok") {
                        return Ok(None);
                    }
                    let slots = cluster_slots(&node.addr())?;
                    let covered: usize = slots.iter().map(|(s, e, _)| usize::from(e - s) + 1).sum();
                    if covered != 16384
                        || gone.is_some_and(|g| slots.iter().any(|(_, _, m)| m == g))
                    {
                        return Ok(None);
                    }
                    match &agreed {
                        None => agreed = Some(slots),
                        Some(a) if *a != slots => return Ok(None),
                        Some(_) => {}
                    }
                }
                Ok(agreed.map(|_| ()))
            })
        })
    }
}

/// A Sentinel deployment of our own: one master, one replica of it, and three sentinels
/// (quorum 2, `down-after-milliseconds 1000`, `failover-timeout 5000`) watching it under
/// [`RedisSentinelSet::MASTER_NAME`]. All processes are killed (SIGKILL) when it is dropped.
pub struct RedisSentinelSet {
    data: Vec<RedisServer>,
    killed: Vec<bool>,
    sentinels: Vec<RedisServer>,
}

impl std::fmt::Debug for RedisSentinelSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisSentinelSet")
            .field("data", &self.data)
            .field("sentinels", &self.sentinels)
            .finish()
    }
}

impl RedisSentinelSet {
    /// The name the sentinels monitor the master under.
    pub const MASTER_NAME: &str = "mymaster";

    /// Start the master and the replica, wait until the replica is in sync, start the
    /// sentinels, and wait until each sees the replica and the two other sentinels (so a
    /// failover can be agreed on).
    pub fn start() -> io::Result<Self> {
        off_runtime(|| {
            let master = RedisServer::start()?;
            let replica = RedisServer::start()?;
            let _: String = query(
                &replica.addr(),
                redis::cmd("REPLICAOF").arg("127.0.0.1").arg(master.port()),
            )?;
            wait_until("replica in sync", Duration::from_secs(20), || {
                let info: String = query(&replica.addr(), redis::cmd("INFO").arg("replication"))?;
                Ok(
                    (info_field(&info, "master_link_status").as_deref() == Some("up"))
                        .then_some(()),
                )
            })?;
            let sentinels = (0..3)
                .map(|_| RedisServer::start_sentinel(Self::MASTER_NAME, "127.0.0.1", master.port()))
                .collect::<io::Result<Vec<_>>>()?;
            let set = Self {
                data: vec![master, replica],
                killed: vec![false, false],
                sentinels,
            };
            wait_until(
                "sentinels see the replica and each other",
                Duration::from_secs(30),
                || {
                    for s in &set.sentinels {
                        let fields: Vec<String> = query(
                            &s.addr(),
                            redis::cmd("SENTINEL").arg("MASTER").arg(Self::MASTER_NAME),
                        )?;
                        let get = |name: &str| {
                            fields
                                .chunks(2)
                                .find(|kv| kv[0] == name)
                                .and_then(|kv| kv.get(1).cloned())
                        };
                        if get("num-slaves").as_deref() != Some("1")
                            || get("num-other-sentinels").as_deref() != Some("2")
                        {
                            return Ok(None);
                        }
                    }
                    Ok(Some(()))
                },
            )?;
            Ok(set)
        })
    }

    /// The sentinels' addresses (`redis://127.0.0.1:<port>`), for `redis.nodes`.
    pub fn sentinels(&self) -> Vec<String> {
        self.sentinels
            .iter()
            .map(|s| format!("redis://{}", s.addr()))
            .collect()
    }

    /// The data servers (the first started as the master, the second as its replica).
    pub fn servers(&self) -> &[RedisServer] {
        &self.data
    }

    /// The master's address (`127.0.0.1:<port>`) as the first sentinel that answers reports it.
    pub fn master_addr(&self) -> io::Result<String> {
        off_runtime(|| {
            let mut last = None;
            for s in &self.sentinels {
                match query::<(String, u16)>(
                    &s.addr(),
                    redis::cmd("SENTINEL")
                        .arg("get-master-addr-by-name")
                        .arg(Self::MASTER_NAME),
                ) {
                    Ok((host, port)) => return Ok(format!("{host}:{port}")),
                    Err(e) => last = Some(e),
                }
            }
            Err(last.unwrap_or_else(|| io::Error::other("no sentinel")))
        })
    }

    /// Kill (SIGKILL) the server that is master now; returns its address.
    pub fn kill_master(&mut self) -> io::Result<String> {
        off_runtime(|| {
            let master = self.master_addr()?;
            let i = self
                .data
                .iter()
                .position(|n| n.addr() == master)
                .ok_or_else(|| io::Error::other(format!("master {master} is not one of ours")))?;
            self.data[i].stop(true)?;
            self.killed[i] = true;
            Ok(master)
        })
    }

    /// Wait until every sentinel names a master other than `old` (`host:port`), the same one,
    /// and that server says it is a master. Returns its address.
    pub fn wait_for_failover(&self, old: &str, limit: Duration) -> io::Result<String> {
        off_runtime(|| {
            wait_until("sentinel failover", limit, || {
                let mut agreed: Option<String> = None;
                for s in &self.sentinels {
                    let (host, port): (String, u16) = query(
                        &s.addr(),
                        redis::cmd("SENTINEL")
                            .arg("get-master-addr-by-name")
                            .arg(Self::MASTER_NAME),
                    )?;
                    let addr = format!("{host}:{port}");
                    if addr == old || agreed.as_ref().is_some_and(|a| *a != addr) {
                        return Ok(None);
                    }
                    agreed = Some(addr);
                }
                let Some(addr) = agreed else {
                    return Ok(None);
                };
                let role: Vec<redis::Value> = query(&addr, &redis::cmd("ROLE"))?;
                let is_master =
                    matches!(role.first(), Some(redis::Value::BulkString(b)) if b == b"master");
                Ok(is_master.then_some(addr))
            })
        })
    }
}

/// Run blocking fixture work (process start, polling waits, synchronous Redis calls, redis-cli)
/// without holding up an async runtime: on a multi-thread tokio runtime the worker hands its
/// other tasks (the nodes under test) to the other workers first (`block_in_place`).
/// Elsewhere (plain threads, `keyfire dev`'s setup) it just runs.
fn off_runtime<T>(f: impl FnOnce() -> T) -> T {
    match tokio::runtime::Handle::try_current() {
        Ok(h) if h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(f)
        }
        _ => f(),
    }
}

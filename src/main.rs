//! The `keyfire` binary: `serve`, `dev`, the remote job/task commands, `doctor`, `bench`, `chaos`.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// mimalloc instead of the system allocator: a node allocates small, short-lived buffers for
/// every firing (Redis replies, claim and completion arguments, run records).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// keyfire: a distributed job scheduler on Redis.
#[derive(Debug, Parser)]
#[command(name = "keyfire", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run a node: claim and run firings, until SIGINT/SIGTERM.
    #[command(after_help = keyfire_server::cli::exit::HELP)]
    Serve {
        /// TOML settings file (see keyfire.example.toml); KEYFIRE__SECTION__KEY env vars override it.
        #[arg(long, short)]
        config: Option<PathBuf>,
    },
    /// Start a redis-server of its own (shipped redis.conf, free port) and a node with demo jobs.
    #[cfg(feature = "lab")]
    #[command(after_help = keyfire_server::cli::exit::HELP)]
    Dev {
        /// A Redis Cluster of its own instead (3 masters + 3 replicas, 12 shards).
        #[arg(long)]
        cluster: bool,
    },
    /// Run a benchmark scenario; prints one JSON line (progress on stderr).
    #[cfg(feature = "lab")]
    Bench(keyfire_lab::cli::bench::BenchArgs),
    /// Run a chaos round (faults from a seed) and check its history; exit 1 on a violation.
    #[cfg(feature = "lab")]
    Chaos(keyfire_lab::cli::chaos::ChaosArgs),
    /// Manage jobs through a node's API (`--url`, `--token`, or KEYFIRE_URL, KEYFIRE_TOKEN).
    Job(keyfire_server::cli::job::JobArgs),
    /// One-shot tasks, and the delay queue's tasks (add, pop, finish, rm), through a node's API.
    Task(keyfire_server::cli::task::TaskArgs),
    /// List the delay queue's topics with their tasks by state, through a node's API.
    Topics(keyfire_server::cli::topics::TopicsArgs),
    /// List the cluster's live nodes, through a node's API.
    Nodes(keyfire_server::cli::nodes::NodesArgs),
    /// Flow control: set, list and lift per-key limits (firings per second, in flight),
    /// through a node's API.
    Limits(keyfire_server::cli::limits::LimitsArgs),
    /// Calendars: days, ranges and cron expressions whose instants the jobs that name them
    /// in `exclude` skip, through a node's API.
    Calendar(keyfire_server::cli::calendar::CalendarArgs),
    /// Inspect, replay or purge a job's dead letters, through a node's API.
    Dead(keyfire_server::cli::dead::DeadArgs),
    /// Check the Redis keyfire uses: version, notifications, eviction, persistence, hz, replicas,
    /// clock, pub/sub buffers, key layout; each finding with a fix. Exit 1 when a check fails.
    Doctor(keyfire_server::cli::doctor::DoctorArgs),
    /// Cron tools.
    Cron {
        #[command(subcommand)]
        command: CronCommand,
    },
}

#[derive(Debug, Subcommand)]
enum CronCommand {
    /// Preview the next instants of a cron expression.
    Next {
        /// 5 fields, 6 with seconds, or a macro like @hourly.
        expr: String,
        /// IANA time zone.
        #[arg(long, default_value = "UTC")]
        tz: String,
        /// How many instants.
        #[arg(short = 'n', default_value_t = 5)]
        n: usize,
        /// Start here instead of now, to preview a DST change months away: a date
        /// (2027-03-13: its midnight in --tz, included), a local time (2027-03-13T02:30, in
        /// --tz) or an RFC 3339 instant (2026-10-31T00:00:00Z).
        #[arg(long)]
        from: Option<String>,
    },
}

fn main() -> ExitCode {
    // Transparent huge pages off for this process (and the redis-servers `dev` and `bench`
    // start, which inherit it; Redis asks for the same). mimalloc asks the kernel for huge
    // pages on its regions, and the kernel then zeroes 2 MiB at the first touch of each,
    // mostly memory a node never uses: in `keyfire bench burst` that zeroing took 14-20 % of
    // all CPU samples and 0.7 s of system CPU per 100,000 firings. Nothing to report if the
    // kernel refuses: it only costs that time.
    #[cfg(target_os = "linux")]
    let _ = nix::sys::prctl::set_thp_disable(true);
    let cli = Cli::parse();
    // Built here rather than by `#[tokio::main]`, which panics when the runtime cannot start.
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    #[cfg(feature = "lab")]
    if let Command::Bench(args) = &cli.command {
        // The bench's nodes leave a core to the Redis it starts on this machine.
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let env_set = std::env::var_os("TOKIO_WORKER_THREADS").is_some();
        if let Some(n) = args.worker_threads(cores, env_set) {
            builder.worker_threads(n);
        }
    }
    let runtime = match builder.enable_all().build() {
        Ok(runtime) => runtime,
        Err(e) => {
            print_error(&format!(
                "cannot start the async runtime ({e}): raise the limits on open files and threads (ulimit -n, ulimit -u)"
            ));
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(run(cli))
}

async fn run(cli: Cli) -> ExitCode {
    let result: anyhow::Result<()> = match cli.command {
        Command::Serve { config } => {
            return node_exit(keyfire_server::cli::serve::run(config.as_deref()).await);
        }
        #[cfg(feature = "lab")]
        Command::Dev { cluster } => return node_exit(keyfire_server::cli::dev::run(cluster).await),
        #[cfg(feature = "lab")]
        Command::Bench(args) => keyfire_lab::cli::bench::run(args).await,
        #[cfg(feature = "lab")]
        Command::Chaos(args) => keyfire_lab::cli::chaos::run(args).await,
        Command::Job(args) => return client_exit(keyfire_server::cli::job::run(args).await),
        Command::Task(args) => return client_exit(keyfire_server::cli::task::run(args).await),
        Command::Topics(args) => return client_exit(keyfire_server::cli::topics::run(args).await),
        Command::Nodes(args) => return client_exit(keyfire_server::cli::nodes::run(args).await),
        Command::Limits(args) => {
            return client_exit(keyfire_server::cli::limits::run(args).await);
        }
        Command::Calendar(args) => {
            return client_exit(keyfire_server::cli::calendar::run(args).await);
        }
        Command::Dead(args) => return client_exit(keyfire_server::cli::dead::run(args).await),
        Command::Doctor(args) => {
            return ExitCode::from(keyfire_server::cli::doctor::run(args).await);
        }
        Command::Cron {
            command: CronCommand::Next { expr, tz, n, from },
        } => match keyfire_server::cli::cron::parse_from(from.as_deref(), &tz).and_then(|from| {
            keyfire_server::cli::cron::next(&expr, &tz, n, from).map_err(|e| e.to_string())
        }) {
            Ok(list) => {
                for (utc, local) in list {
                    println!("{utc}  {local}");
                }
                Ok(())
            }
            Err(e) => {
                eprintln!("error: {e}");
                return ExitCode::from(2);
            }
        },
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            print_error(&format!("{e:#}"));
            ExitCode::FAILURE
        }
    }
}

/// The exit of `serve` and `dev`: one line naming the fault and its fix, and the fault's code
/// (listed in `keyfire serve --help`).
fn node_exit(result: anyhow::Result<()>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            let (exit, line) = keyfire_server::cli::exit::describe(&e);
            print_error(&line);
            ExitCode::from(exit.code())
        }
    }
}

/// `error: <line>` on stderr; a closed stderr is no reason to panic (`eprintln!` would).
fn print_error(line: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "error: {line}");
}

/// The exit code of a client subcommand (documented in `keyfire job --help`).
fn client_exit(result: keyfire_server::cli::remote::CliResult) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(e.code)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn verify_cli() {
        Cli::command().debug_assert();
    }
}

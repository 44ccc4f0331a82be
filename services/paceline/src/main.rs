//! `paceline`: one binary, every role. `paceline api|worker|dispatcher|attendant|console|netsim` runs one
//! role; `paceline dev` runs a whole node in one process; `paceline migrate` applies
//! migrations; `paceline openapi` prints the OpenAPI description; `paceline mcp` speaks MCP
//! over stdio to a running API.

use std::future::Future;
use std::io::Write;
use std::path::PathBuf;
use std::pin::Pin;

use anyhow::Context;
use clap::{Parser, Subcommand};
use shared::config::{Network, Role};
use shared::{Config, Shutdown};
use tokio::net::TcpListener;

mod media_migrate;

#[derive(Parser)]
#[command(name = "paceline", version, about = "A horizontally scalable messaging-account gateway")]
struct Cli {
    /// A TOML config file (also `PACELINE_CONFIG`); `PACELINE_*` variables override it.
    #[arg(long, global = true)]
    config: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the HTTP API (listens on PACELINE_LISTEN_ADDR).
    Api,
    /// Run an instance worker.
    Worker,
    /// Run a webhook dispatcher.
    Dispatcher,
    /// Run the AI attendant: answers chats of instances that have one configured.
    Attendant,
    /// Run the Chatwoot bridge: keeps the inboxes of instances that have one configured.
    Chatwoot,
    /// Run the console, the web UI (listens on PACELINE_CONSOLE__LISTEN_ADDR; calls the
    /// API at PACELINE_CONSOLE__API_URL).
    Console,
    /// Run netsim, the simulated network (listens on PACELINE_NETSIM__LISTEN_ADDR).
    Netsim,
    /// Apply database migrations and exit.
    Migrate,
    /// Run api + worker + dispatcher + attendant + console (+ netsim with `--network sim`)
    /// in one process.
    Dev {
        /// `sim` (start netsim and use it) or `whatsapp`.
        #[arg(long)]
        network: Option<String>,
        /// Run no worker: start `paceline worker` processes beside it (the worker
        /// benchmarks measure one such process).
        #[arg(long)]
        no_worker: bool,
        /// Run no webhook dispatcher: start `paceline dispatcher` processes beside it (the
        /// dispatcher's memory benchmark measures one such process).
        #[arg(long)]
        no_dispatcher: bool,
    },
    /// Operate on stored media.
    Media {
        #[command(subcommand)]
        action: MediaCommand,
    },
    /// Print the OpenAPI 3.1 description.
    Openapi,
    /// Speak MCP over stdin/stdout for a local client, forwarding each message to
    /// `POST $PACELINE_URL/mcp` with `$PACELINE_TOKEN`. Logs go to stderr.
    Mcp,
}

#[derive(Subcommand)]
enum MediaCommand {
    /// Copy media stored in Postgres into the configured bucket (media_store), verifying
    /// each copy by size and SHA-256 before freeing Postgres. Resumable: run it again to
    /// go on where it stopped.
    Migrate {
        /// Where to: `s3` (the only target).
        #[arg(long)]
        to: String,
        /// Say how much would move, and move nothing.
        #[arg(long)]
        dry_run: bool,
    },
}

type Task = Pin<Box<dyn Future<Output = anyhow::Result<()>> + Send>>;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    match real_main(cli).await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!(error = format!("{e:#}"), "exiting");
            let _ = writeln!(std::io::stderr(), "paceline: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

async fn real_main(cli: Cli) -> anyhow::Result<()> {
    if let Command::Openapi = cli.command {
        print!("{}", api::openapi::json());
        return Ok(());
    }
    if let Command::Mcp = cli.command {
        // No config file or backends: only where the API is and the token. stdout is the
        // protocol's; logs go to stderr.
        let level = Config::from_env::<String>("log.level").unwrap_or_else(|| "warn".into());
        let mut config = Config::default();
        config.log.level = level;
        shared::telemetry::init_logging(&config);
        return api::mcp::stdio::run(api::mcp::stdio::Target::from_env()?).await;
    }
    let mut config = Config::load(cli.config.as_deref())?;
    if let Command::Dev { network: Some(n), .. } = &cli.command {
        config.network = match n.as_str() {
            "sim" => Network::Sim,
            "whatsapp" => Network::Whatsapp,
            _ => anyhow::bail!("--network must be sim or whatsapp"),
        };
    }
    shared::telemetry::init_logging(&config);
    let shutdown = Shutdown::new();
    spawn_signal_handler(shutdown.clone());

    // Once shutdown starts, the process ends within this time even if a backend hangs.
    let config_deadline = config.api.drain + config.api.shutdown_timeout + std::time::Duration::from_secs(5);
    let mut tasks: Vec<(&str, Task)> = Vec::new();
    // The metrics listener (and its probes) outlives the roles' drain: it stops once
    // every other task has ended.
    let roles_done = Shutdown::new();
    let metrics = |tasks: &mut Vec<(&str, Task)>, config: &Config, roles: Vec<&'static str>| {
        let addr = config.metrics_addr;
        let (shutdown, done) = (shutdown.clone(), roles_done.clone());
        tasks.push((
            "metrics",
            Box::pin(async move {
                let l = bind(addr, "metrics").await?;
                api::metrics::serve_metrics(l, roles, shutdown, done).await?;
                Ok(())
            }),
        ));
    };
    match cli.command {
        Command::Openapi | Command::Mcp => unreachable!("handled above"),
        Command::Media { action: MediaCommand::Migrate { to, dry_run } } => {
            anyhow::ensure!(to == "s3", "--to must be s3");
            config.validate(Role::Migrate)?;
            return media_migrate::run(&config, dry_run, shutdown).await;
        }
        Command::Migrate => {
            config.validate(Role::Migrate)?;
            let pool = shared::db::connect(&config).await.context("connecting to postgres")?;
            shared::db::migrate(&pool).await.context("applying migrations")?;
            tracing::info!("migrations applied");
            return Ok(());
        }
        Command::Api => {
            config.validate(Role::Api)?;
            let l = bind(config.listen_addr, "api").await?;
            metrics(&mut tasks, &config, vec!["api"]);
            tasks.push(("api", Box::pin(api::run(config, l, shutdown.clone()))));
        }
        Command::Worker => {
            config.validate(Role::Worker)?;
            metrics(&mut tasks, &config, vec!["worker"]);
            tasks.push(("worker", Box::pin(worker::run(config, shutdown.clone()))));
        }
        Command::Dispatcher => {
            config.validate(Role::Dispatcher)?;
            metrics(&mut tasks, &config, vec!["dispatcher"]);
            tasks.push(("dispatcher", Box::pin(dispatcher::run(config, shutdown.clone()))));
        }
        Command::Attendant => {
            config.validate(Role::Attendant)?;
            metrics(&mut tasks, &config, vec!["attendant"]);
            tasks.push(("attendant", Box::pin(attendant::run(config, shutdown.clone()))));
        }
        Command::Chatwoot => {
            config.validate(Role::Chatwoot)?;
            metrics(&mut tasks, &config, vec!["chatwoot"]);
            tasks.push(("chatwoot", Box::pin(chatwoot::run(config, shutdown.clone()))));
        }
        Command::Console => {
            config.validate(Role::Console)?;
            let l = bind(config.console.listen_addr, "console").await?;
            tasks.push(("console", Box::pin(console::run(config, l, shutdown.clone()))));
        }
        Command::Netsim => {
            config.validate(Role::Netsim)?;
            let l = bind(config.netsim.listen_addr, "netsim").await?;
            tasks.push(("netsim", Box::pin(netsim::run(l, config.netsim.qr_rotate, shutdown.clone()))));
        }
        Command::Dev { no_worker, no_dispatcher, .. } => {
            for role in [Role::Api, Role::Worker, Role::Dispatcher] {
                config.validate(role)?;
            }
            // Migrate once before the roles start, so they do not queue on the lock.
            let pool = shared::db::connect(&config).await.context("connecting to postgres")?;
            shared::db::migrate(&pool).await.context("applying migrations")?;
            pool.close().await;
            if config.network == Network::Sim {
                let l = bind(config.netsim.listen_addr, "netsim").await?;
                tasks.push(("netsim", Box::pin(netsim::run(l, config.netsim.qr_rotate, shutdown.clone()))));
            }
            let l = bind(config.listen_addr, "api").await?;
            let console_listener = bind(config.console.listen_addr, "console").await?;
            // The node's console calls the node's API.
            let mut api_addr = config.listen_addr;
            if api_addr.ip().is_unspecified() {
                api_addr.set_ip(std::net::Ipv4Addr::LOCALHOST.into());
            }
            config.console.api_url = url::Url::parse(&format!("http://{api_addr}")).context("the API's address")?;
            let roles: Vec<&'static str> = ["api", "worker", "dispatcher", "attendant", "chatwoot"]
                .into_iter()
                .filter(|r| match *r {
                    "worker" => !no_worker,
                    "dispatcher" => !no_dispatcher,
                    _ => true,
                })
                .collect();
            metrics(&mut tasks, &config, roles);
            tasks.push(("api", Box::pin(api::run(config.clone(), l, shutdown.clone()))));
            tasks.push(("console", Box::pin(console::run(config.clone(), console_listener, shutdown.clone()))));
            if !no_worker {
                tasks.push(("worker", Box::pin(worker::run(config.clone(), shutdown.clone()))));
            }
            if !no_dispatcher {
                tasks.push(("dispatcher", Box::pin(dispatcher::run(config.clone(), shutdown.clone()))));
            }
            tasks.push(("attendant", Box::pin(attendant::run(config.clone(), shutdown.clone()))));
            tasks.push(("chatwoot", Box::pin(chatwoot::run(config, shutdown.clone()))));
        }
    }
    let deadline = config_deadline;
    run_all(tasks, shutdown, roles_done, deadline).await
}

/// Runs every task; the first to fail stops the others, and its error is returned. Once
/// shutdown has started, tasks get `deadline` to finish before the process exits anyway.
async fn run_all(
    tasks: Vec<(&'static str, Task)>,
    shutdown: Shutdown,
    roles_done: Shutdown,
    deadline: std::time::Duration,
) -> anyhow::Result<()> {
    let mut roles_left = tasks.iter().filter(|(name, _)| *name != "metrics").count();
    tokio::spawn({
        let shutdown = shutdown.clone();
        async move {
            shutdown.cancelled().await;
            tokio::time::sleep(deadline).await;
            tracing::error!(deadline_ms = deadline.as_millis() as u64, "shutdown deadline passed; exiting");
            std::process::exit(1);
        }
    });
    let mut set = tokio::task::JoinSet::new();
    for (name, task) in tasks {
        let shutdown = shutdown.clone();
        set.spawn(async move {
            let res = task.await.with_context(|| format!("{name} failed"));
            // One role ending (failure or not) ends the process: a half-running pod
            // is worse than a restarted one.
            shutdown.cancel();
            (name, res)
        });
    }
    let mut first_err = None;
    while let Some(res) = set.join_next().await {
        let res = res.map_err(anyhow::Error::from);
        if !matches!(&res, Ok((name, _)) if *name == "metrics") {
            roles_left = roles_left.saturating_sub(1);
            if roles_left == 0 {
                roles_done.cancel();
            }
        }
        let res = res.and_then(|(_, r)| r);
        if let Err(e) = res {
            first_err.get_or_insert(e);
        }
    }
    first_err.map_or(Ok(()), Err)
}

async fn bind(addr: std::net::SocketAddr, what: &str) -> anyhow::Result<TcpListener> {
    TcpListener::bind(addr).await.with_context(|| format!("binding the {what} listener on {addr}"))
}

/// SIGTERM or Ctrl-C starts a graceful shutdown; a second one exits at once.
fn spawn_signal_handler(shutdown: Shutdown) {
    tokio::spawn(async move {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .expect("installing the SIGTERM handler");
        for n in 0.. {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
            if n == 0 {
                shutdown.cancel();
                tracing::info!("shutdown requested");
            } else {
                tracing::warn!("second signal: exiting now");
                std::process::exit(130);
            }
        }
    });
}

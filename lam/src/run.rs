//! `lam run -- AGENT ARGS...`: the proxy (`lam-serve`) on a free loopback
//! port, the agent run through it with `lam mcp` registered (an agent lam
//! knows: what its room, `lam_trajectory::agents`, says to set), and what
//! the proxy saved printed when the agent exits.

use anyhow::{Context, Result, bail};
use arc_store::StoreSpec;
use lam_serve::{Proxy, ServeConfig, SessionStats, Stats};
use lam_trajectory::agents::{self, Agent};
use std::ffi::{OsStr, OsString};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use crate::runfiles::{self, RunDir};
use crate::signals::Signalled;

#[derive(clap::Args)]
pub struct RunArgs {
    /// Store the tool results are archived in: a directory (or `postgres://...` where built in); default $LAM_HOME/runs/<unix seconds>-<pid>.
    #[arg(long)]
    store: Option<String>,
    /// Upstream origin; default: the base URL the agent is configured with ($ANTHROPIC_BASE_URL, $OPENAI_BASE_URL, its configuration), else its vendor's (https://api.anthropic.com, https://api.openai.com).
    #[arg(long)]
    upstream: Option<String>,
    #[arg(long, value_name = "FILE", help = concat!("A CA certificate (PEM file) to trust for the upstream, besides ", crate::trusted!(), " and the file NODE_EXTRA_CA_CERTS names (when set, as the node-based agents trust it); repeat for more. For a TLS-inspecting proxy or a gateway on an internal CA."))]
    upstream_ca: Vec<PathBuf>,
    #[command(flatten)]
    engine: crate::serve::EngineOpts,
    /// With --budget: how long the provider keeps a cached prompt after its last use, in SECONDS, or `none` (never cold). A request that comes longer than that after its conversation's previous one finds the cache cold, and is cut down to --budget-target whenever it is above it (the whole prompt is re-written anyway); while warm, a cut is made only at --budget, and only when it pays back its re-write. Default: the request's `cache_control.ttl` (`5m`, `1h`), else the provider's: 300 (Anthropic 5 minutes; OpenAI 5 to 10 minutes of inactivity).
    #[arg(long, value_parser = lam_serve::bill::CacheTtl::parse, value_name = "SECONDS|none")]
    cache_ttl: Option<lam_serve::bill::CacheTtl>,
    /// One line per request (method, path, status, session, time, receipt): on standard error, or,
    /// when that is the terminal of an interactive agent (whose full-screen display the lines would
    /// garble), appended to $LAM_HOME/logs/run-<unix seconds>-<pid>.log (named at the start).
    #[arg(long)]
    log: bool,
    /// `--log` to this file (appended to, created 0600).
    #[arg(long, value_name = "FILE")]
    log_file: Option<PathBuf>,
    /// For an agent's batch form (`claude -p`, `codex exec`, ...: it asks the model at once): when no model request has reached the proxy this many seconds after the agent started, stop the agent (it is not going through lam) and exit non-zero. 0: never.
    #[arg(long, default_value_t = 60, value_name = "SECONDS")]
    first_request_timeout_s: u64,
    /// After the agent exits, how long requests still in flight through the proxy (a subprocess
    /// the agent left behind, say) may take before `lam run` cuts them and exits; SIGTERM or SIGINT
    /// to `lam run` in that time cuts them at once.
    #[arg(long, default_value_t = 10, value_name = "SECONDS")]
    drain_timeout_s: u64,
    /// Which sessions the `lam mcp` this run registers answers for: `run`, the sessions of this run
    /// only (another run's archive in a shared store stays out of reach); `store`, every session.
    #[arg(long, value_enum, default_value_t = RecallScope::Run)]
    recall_scope: RecallScope,
    /// The agent and its arguments, after `--`: `lam run -- claude`, `lam run -- codex exec "fix the tests"` (docs/agents.md lists the agents lam knows).
    #[arg(last = true, required = true, value_name = "AGENT ARGS")]
    agent: Vec<OsString>,
}

/// `--recall-scope`.
#[derive(Clone, Copy, PartialEq, Eq, Debug, clap::ValueEnum)]
enum RecallScope {
    /// The sessions of this run.
    Run,
    /// Every session of the store.
    Store,
}

/// The agent a program is, by its file name ([`Agent::of_program`]); `None`
/// for any other agent (base URLs set, nothing registered).
fn agent_of(program: &OsStr) -> Option<Agent> {
    Path::new(program).file_name().and_then(OsStr::to_str).and_then(Agent::of_program)
}

/// `eprintln!` that never panics: when the terminal is closed (its window
/// shut: writes fail with EIO) or standard error is a closed pipe, a line
/// is lost, never the run: `lam run` still flushes the store, closes the
/// proxy and exits with the agent's code.
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

pub fn run(a: RunArgs) -> Result<()> {
    let (program, args) = a.agent.split_first().context("lam run: no agent given after `--`")?;
    if find_program(program).is_none() {
        say!("Error: lam run: agent `{}` not found (not an executable file, nor on PATH)", program.to_string_lossy());
        std::process::exit(127);
    }
    let agent = agent_of(program);
    let (upstream, from) = upstream(a.upstream.as_deref(), agent, args)?;
    let store = Store::resolve(a.store.as_deref())?;
    let proxy = Proxy::open(config(&a, agent, &upstream, store.spec.clone())?).context("lam run: starting the proxy")?;
    let pid = Arc::new(AtomicU32::new(0));
    let signalled = Arc::new(Signalled::default());
    let server = Server::start(proxy.clone(), pid.clone(), signalled.clone())?;
    say!("lam run: proxy http://{} -> {} ({from})", server.addr, lam_core::redact::url(&upstream));
    say!("lam run: store {}", store.shown);
    if let Some(f) = &proxy.config().log_file {
        say!("lam run: --log lines go to {} (`tail -f` it)", f.display());
    }
    say!(
        "lam run: recall an archived tool result with `lam recall --store {} --session S §ID` (S: `lam recall --store {} --list`), or the agent's `lam` MCP tools",
        store.shown,
        store.shown
    );
    let run = (a.recall_scope == RecallScope::Run).then(|| proxy.run_id());
    let launch = Launch::new(agent, program, args, server.addr, &store, Held::of(proxy.config()).tokens(), run);
    let first = first_request(&a, agent, args);
    let seen = || proxy.stats().model_requests() > 0;
    #[cfg(unix)]
    let tty = crate::terminal::Saved::take();
    let started = std::time::SystemTime::now();
    let status = launch.as_ref().map_err(|e| anyhow::anyhow!("{e:#}")).and_then(|l| l.wait(&pid, first.map(|t| (t, &seen as &dyn Fn() -> bool))));
    #[cfg(unix)]
    if let Some(t) = &tty {
        t.restore();
    }
    let stopped = server.stop(std::time::Duration::from_secs(a.drain_timeout_s));
    let closed = proxy.close().context("lam run: flushing the store");
    if let Ok(l) = &launch {
        l.clean();
    }
    let status = status?;
    let ran = Ran { agent, program, batch: batch(agent, args), status, started, budget: Held::of(proxy.config()) };
    let code = report(&proxy.stats(), &store, &ran);
    stopped.and(closed)?;
    std::process::exit(signalled.exit_code().unwrap_or(code))
}

/// How the agent ran.
struct Ran<'a> {
    agent: Option<Agent>,
    program: &'a OsStr,
    /// The agent's batch form (`claude -p`, `codex exec`): it asks the model at once.
    batch: bool,
    status: ExitStatus,
    started: std::time::SystemTime,
    budget: Held,
}

/// How the run's budget was set, for the summary.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Held {
    /// `--budget TOKENS`.
    Given(u64),
    /// The default (`lam_serve::DefaultBudget`), with its ceiling.
    Default(u64),
    /// `--budget off`.
    Off,
}

impl Held {
    /// The tokens it holds a request to at most: the budget, or the
    /// default's ceiling; `None` when off.
    fn tokens(self) -> Option<u64> {
        match self {
            Self::Given(n) | Self::Default(n) => Some(n),
            Self::Off => None,
        }
    }

    fn of(cfg: &ServeConfig) -> Self {
        match (cfg.engine.budget, cfg.default_budget) {
            (Some(b), _) => Self::Given(b.tokens),
            (None, Some(d)) => Self::Default(d.ceiling),
            (None, None) => Self::Off,
        }
    }
}

/// The summary, whether requests went around lam, and the way back into
/// the conversation through lam; the exit code the agent's status makes.
fn report(stats: &Stats, store: &Store, ran: &Ran<'_>) -> i32 {
    summary(stats, stored(store, stats), store, ran.program, ran.status);
    say!("lam run: {}", budget_line(&stats.total(), ran.budget, ran.agent, store, stats.sessions.first().map(|s| s.session.as_str())));
    // A batch run's transcript is read only when no model request reached the proxy (the evidence for the alarm).
    let look = !ran.batch || stats.model_requests() == 0;
    let transcript = ran.agent.filter(|_| look).and_then(|ag| crate::transcript::find(ag, ran.started));
    let code = confirmed(stats, ran, exit_code(ran.status), transcript.as_ref());
    if let (Some(ag), Some(crate::transcript::Transcript { answered: true, session: Some(id) }), false) = (ran.agent, &transcript, ran.batch) {
        let own = ag.resume(id).1;
        say!("lam run: to go on with this conversation through lam: {} ({own}: use this one)", crate::transcript::resume_command(ag, &store.shown, id));
    }
    code
}

/// The observations the store holds for the run's sessions, read back
/// after the flush (identical tool results are stored once); `None` when
/// the store cannot be read or sessions were evicted from the statistics.
fn stored(store: &Store, stats: &Stats) -> Option<u64> {
    if stats.evicted_sessions > 0 {
        return None;
    }
    let s = arc_store::open(&store.spec, arc_store::Access::ReadOnly).ok()?;
    let names: std::collections::BTreeSet<&str> = stats.sessions.iter().map(|x| x.session.as_str()).collect();
    names.into_iter().try_fold(0, |n, name| Some(n + s.ids(&lam_core::SessionId::new(name)).ok()?.len() as u64))
}

/// How long an agent run in its batch form ([`batch`]) may run before its
/// first model request must have reached the proxy; `None` for interactive
/// runs (the user may not have typed yet), other agents, and
/// `--first-request-timeout-s 0`.
fn first_request(a: &RunArgs, agent: Option<Agent>, args: &[OsString]) -> Option<std::time::Duration> {
    (batch(agent, args) && a.first_request_timeout_s > 0).then(|| std::time::Duration::from_secs(a.first_request_timeout_s))
}

/// Whether the agent runs non-interactively, asking the model at once
/// ([`Agent::batch`]); never for an agent lam does not know.
fn batch(agent: Option<Agent>, args: &[OsString]) -> bool {
    agent.is_some_and(|a| a.batch(args))
}

/// The exit code, after checking that the agent's model requests came
/// through the proxy. When none did, the alarm (its requests went around
/// lam: an error, and an agent that exited 0 makes `lam` exit 1) needs
/// evidence that the agent talked to a model: its transcript of this run
/// holds a model's answer, or its batch form, which asks the model at once,
/// exited 0. Without it an agent lam knows ended before any model request
/// (the user left at once, it was not logged in, Gemini CLI's untrusted
/// folder): one plain line with its exit code and what the code means
/// ([`Agent::exit_reason`]). Other agents: a warning.
fn confirmed(stats: &Stats, ran: &Ran<'_>, code: i32, transcript: Option<&crate::transcript::Transcript>) -> i32 {
    if stats.model_requests() > 0 {
        return code;
    }
    let name = ran.program.to_string_lossy();
    let answered = transcript.is_some_and(|t| t.answered);
    if let Some(agent) = ran.agent
        && !answered
        && !(ran.batch && code == 0)
    {
        say!("lam run: `{name}` made no model request: {}", ended(agent, ran.status));
        return code;
    }
    let what = if answered {
        "its transcript of this run holds a model's answer, yet no model request reached the proxy: it went around lam (nothing was compacted or archived)"
    } else {
        "no model request reached the proxy: if the agent talked to a model, it went around lam (nothing was compacted or archived)"
    };
    let Some(how) = ran.agent.map(Agent::pointed_by) else {
        say!("lam run: warning: `{name}`: {what}; point its base URL at the proxy");
        return code;
    };
    say!(
        "lam run: error: `{name}`: {what}. lam set {how}; this version of `{name}` may read its base URL another way (a config file's model provider, say). Check with `lam run --log`, or run `lam serve` and point the agent at it yourself."
    );
    if code == 0 { 1 } else { code }
}

/// How an agent that asked no model ended: its exit code and what its
/// room says the code means, or the signal.
fn ended(agent: Agent, status: ExitStatus) -> String {
    #[cfg(unix)]
    if let Some(sig) = std::os::unix::process::ExitStatusExt::signal(&status) {
        return format!("signal {sig} ended it");
    }
    match status.code() {
        Some(0) => "it exited 0".into(),
        Some(c) => format!("it exited {c} ({})", agent.exit_reason(c).unwrap_or("its own messages above say why")),
        None => "it ended".into(),
    }
}

/// `program` as `Command` will find it: a path, or a name on PATH.
fn find_program(program: &OsStr) -> Option<PathBuf> {
    let p = Path::new(program);
    if p.components().count() > 1 {
        return is_executable(p).then(|| p.to_path_buf());
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|d| d.join(p)).find(|c| is_executable(c))
}

fn is_executable(p: &Path) -> bool {
    #[cfg(unix)]
    use std::os::unix::fs::PermissionsExt;
    p.metadata().is_ok_and(|m| {
        #[cfg(unix)]
        let exec = m.permissions().mode() & 0o111 != 0;
        #[cfg(not(unix))]
        let exec = true;
        m.is_file() && exec
    })
}

/// The upstream origin and where it came from: `--upstream`, else what
/// the agent's room finds configured, else its vendor's; for an agent lam
/// does not know, the one base URL set among the variables `lam run` sets
/// for it ([`Agent::base_url_env`]).
fn upstream(flag: Option<&str>, agent: Option<Agent>, args: &[OsString]) -> Result<(String, String)> {
    let env = |k: &str| std::env::var(k).ok();
    let cwd = std::env::current_dir().unwrap_or_default();
    let (url, from) = match (flag, agent) {
        (Some(u), _) => (u.to_string(), "--upstream".to_string()),
        (None, Some(a)) => a.upstream(args, &cwd, &env),
        (None, None) => {
            let mut set: Vec<(String, String)> =
                Agent::ALL.iter().filter(|a| a.base_url_env().is_some()).filter_map(|a| a.configured_upstream(&[], &cwd, &env)).collect();
            set.dedup_by(|x, y| x.0 == y.0);
            match &set[..] {
                [one] => one.clone(),
                _ => {
                    let known: Vec<&str> = Agent::ALL.iter().map(|a| a.program()).collect();
                    let mut vendors: Vec<&str> = Agent::ALL.iter().map(|a| a.vendor()).collect();
                    vendors.dedup();
                    bail!("lam run: not {}, so give the upstream: --upstream {}", known.join(" or "), vendors.join(" or "))
                }
            }
        }
    };
    let url = url.trim_end_matches('/').to_string();
    if !(url.starts_with("http://") || url.starts_with("https://")) {
        bail!("lam run: upstream `{}` ({from}): expected an http:// or https:// origin", lam_core::redact::url(&url));
    }
    Ok((url, from))
}

/// The store: its spec, the spec `lam mcp` gets (which may hold a
/// password: never printed, never on a command line), and how it is shown.
#[derive(Debug)]
struct Store {
    spec: StoreSpec,
    arg: String,
    shown: String,
}

impl Store {
    /// `--store`, or a new directory `$LAM_HOME/runs/<unix seconds>-<pid>`; directories are created and made absolute.
    fn resolve(flag: Option<&str>) -> Result<Self> {
        let spec = match flag {
            Some(s) => StoreSpec::parse(s).with_context(|| format!("--store {}", lam_core::redact::url(s)))?,
            None => {
                let secs = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
                let dir = lam_encode::lam_home().join("runs").join(format!("{secs}-{}", std::process::id()));
                StoreSpec::Dir(dir)
            }
        };
        let spec = match spec {
            StoreSpec::Dir(d) => {
                lam_core::fsdir::create_private(&d).with_context(|| format!("creating the store {}", d.display()))?;
                StoreSpec::Dir(std::path::absolute(&d).with_context(|| format!("--store {}", d.display()))?)
            }
            other => other,
        };
        let arg = match (&spec, flag) {
            (StoreSpec::Dir(d), _) => d.to_string_lossy().into_owned(),
            (_, Some(s)) => s.to_string(),
            (_, None) => spec.display(),
        };
        Ok(Self { shown: spec.display(), spec, arg })
    }
}

/// `lam serve`'s settings from the flags.
fn config(a: &RunArgs, agent: Option<Agent>, upstream: &str, store: StoreSpec) -> Result<ServeConfig> {
    let mut cfg = ServeConfig::new(upstream);
    cfg.store = store;
    // The name the agent gives the `lam` MCP server's recall tool.
    let recall = agent.map_or(lam_core::stub::Recall::None, |a| lam_core::stub::Recall::Via(a.recall_tool()));
    cfg.engine = a.engine.settings(recall, None)?;
    // On by default, so the agent never compacts its context on its own.
    cfg.default_budget = a.engine.default_budget(true)?;
    cfg.cache_ttl = a.cache_ttl;
    cfg.upstream_ca = crate::serve::upstream_ca("lam run", &a.upstream_ca, true)?;
    cfg.log_file = log_file(a, agent)?;
    cfg.log = a.log || cfg.log_file.is_some();
    Ok(cfg)
}

/// Where `--log` lines go: `--log-file`; with `--log` alone, a file under
/// `$LAM_HOME/logs` when standard error is the terminal an interactive agent
/// draws on; else standard error (`None`).
fn log_file(a: &RunArgs, agent: Option<Agent>) -> Result<Option<PathBuf>> {
    use std::io::IsTerminal as _;
    if a.log_file.is_some() || !a.log {
        return Ok(a.log_file.clone());
    }
    let args = a.agent.get(1..).unwrap_or_default();
    if batch(agent, args) || !std::io::stderr().is_terminal() {
        return Ok(None);
    }
    let dir = lam_encode::lam_home().join("logs");
    lam_core::fsdir::create_private(&dir).with_context(|| format!("lam run: creating {}", dir.display()))?;
    let secs = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    Ok(Some(dir.join(format!("run-{secs}-{}.log", std::process::id()))))
}

/// The proxy served on its own runtime (worker threads in the background).
#[derive(Debug)]
struct Server {
    addr: SocketAddr,
    rt: tokio::runtime::Runtime,
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<Result<(), lam_serve::Error>>,
    /// Told when SIGTERM, SIGINT or SIGHUP arrives with no agent running.
    cut: Arc<tokio::sync::Notify>,
}

impl Server {
    /// Listen on a free loopback port and serve; SIGINT, SIGTERM and SIGHUP
    /// no longer end `lam` at once: they are passed on to the agent `pid`
    /// (SIGINT only when a process sent it) and recorded in `signalled`.
    fn start(proxy: Proxy, pid: Arc<AtomicU32>, signalled: Arc<Signalled>) -> Result<Self> {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").context("lam run: listening on 127.0.0.1")?;
        let addr = listener.local_addr().context("lam run: listening")?;
        let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().context("lam run: starting the runtime")?;
        let cut = Arc::new(tokio::sync::Notify::new());
        #[cfg(unix)]
        guard_signals(&rt, pid, cut.clone(), signalled)?;
        #[cfg(not(unix))]
        let _ = (pid, signalled);
        let (stop, rx) = tokio::sync::oneshot::channel::<()>();
        let task = rt.spawn(lam_serve::serve(proxy, listener, async move {
            let _ = rx.await;
        }));
        Ok(Self { addr, rt, stop, task, cut })
    }

    /// Stop accepting and let what is in flight finish, for at most `drain`
    /// (or until a signal cuts it); then stop the runtime.
    fn stop(self, drain: std::time::Duration) -> Result<()> {
        let _ = self.stop.send(());
        let mut task = self.task;
        let cut = self.cut;
        let served = self.rt.block_on(async {
            tokio::select! {
                r = &mut task => Some(r),
                () = tokio::time::sleep(drain) => None,
                () = cut.notified() => None,
            }
        });
        let Some(served) = served else {
            say!("lam run: the agent has exited; cutting the requests still in flight through the proxy (--drain-timeout-s {})", drain.as_secs());
            task.abort();
            self.rt.shutdown_timeout(std::time::Duration::from_secs(1));
            return Ok(());
        };
        self.rt.shutdown_timeout(std::time::Duration::from_secs(5));
        served.context("lam run: the proxy")?.context("lam run: the proxy")
    }
}

/// While the agent runs: SIGTERM and SIGHUP sent on to the agent, SIGINT
/// too when a process sent it (a Ctrl-C typed in the terminal reaches the
/// agent by itself: it shares the terminal's process group, and `lam` waits
/// for it). Once it has exited, any of the three cuts the requests still in
/// flight (`cut`), so `lam run` ends at once. `signalled` records which
/// make `lam run` exit 128 + the signal ([`Signalled`]).
#[cfg(unix)]
fn guard_signals(rt: &tokio::runtime::Runtime, pid: Arc<AtomicU32>, cut: Arc<tokio::sync::Notify>, signalled: Arc<Signalled>) -> Result<()> {
    use tokio::signal::unix::{SignalKind, signal};
    // Before tokio's handlers: on each signal this one runs first.
    signalled.watch().context("lam run: signal handlers")?;
    let _in = rt.enter();
    let mut int = signal(SignalKind::interrupt()).context("lam run: SIGINT handler")?;
    let mut term = signal(SignalKind::terminate()).context("lam run: SIGTERM handler")?;
    let mut hup = signal(SignalKind::hangup()).context("lam run: SIGHUP handler")?;
    rt.spawn(async move {
        loop {
            let sig = tokio::select! {
                _ = int.recv() => "INT",
                _ = term.recv() => "TERM",
                _ = hup.recv() => "HUP",
            };
            match pid.load(Ordering::SeqCst) {
                0 => cut.notify_one(),
                _ if sig == "INT" && !signalled.take_sent_int() => {}
                // SIGTERM to the agent and every process below it: Gemini CLI's
                // `node` launcher does not pass it on to the CLI it runs.
                child if sig == "TERM" => {
                    let pids: Vec<String> = with_descendants(child).iter().map(u32::to_string).collect();
                    let _ = Command::new("kill").args(["-s", sig]).args(&pids).status();
                }
                child => {
                    let _ = Command::new("kill").args(["-s", sig, &child.to_string()]).status();
                }
            }
        }
    });
    Ok(())
}

/// `pid` and every process below it (its children, theirs, ...), from
/// `/proc`; `pid` alone where `/proc` cannot be read.
fn with_descendants(pid: u32) -> Vec<u32> {
    // (process, parent): `/proc/P/stat` is `P (COMM) STATE PPID ...`.
    let parent = |e: std::fs::DirEntry| -> Option<(u32, u32)> {
        let p = e.file_name().to_str()?.parse().ok()?;
        let stat = std::fs::read_to_string(e.path().join("stat")).ok()?;
        Some((p, stat.rsplit_once(')')?.1.split_whitespace().nth(1)?.parse().ok()?))
    };
    let all: Vec<(u32, u32)> = std::fs::read_dir("/proc").map(|d| d.flatten().filter_map(parent).collect()).unwrap_or_default();
    let mut out = vec![pid];
    let mut i = 0;
    while let Some(&p) = out.get(i) {
        out.extend(all.iter().filter(|&&(c, pp)| pp == p && !out.contains(&c)).map(|&(c, _)| c).collect::<Vec<_>>());
        i += 1;
    }
    out
}

/// The agent's command line and environment, and the files written for it
/// (the proxy's address for `lam top`, the MCP config, the store spec
/// holding a password, the agent's home for the run), all in the run's
/// private directory ([`RunDir`]), removed at the end.
#[derive(Debug)]
struct Launch {
    cmd: Vec<OsString>,
    env: Vec<(String, String)>,
    /// The files and the agent's home written for the run.
    files: Vec<PathBuf>,
    dir: RunDir,
    /// The lock on the agent's home path while this run uses it ([`RunDir::home`]).
    _home_lock: Option<std::fs::File>,
}

/// `lam mcp`'s arguments for this run: the store (in a 0600 file added to
/// `files` when its spec holds a password) and the run it answers for.
fn mcp_args(store: &Store, run: Option<&str>, dir: &RunDir, files: &mut Vec<PathBuf>) -> Result<Vec<String>> {
    let mut mcp = vec!["mcp".to_string()];
    if lam_core::redact::url(&store.arg) == store.arg {
        mcp.extend(["--store".to_string(), store.arg.clone()]);
    } else {
        let f = dir.file("store", &store.arg)?;
        mcp.extend(["--store-file".to_string(), f.to_string_lossy().into_owned()]);
        files.push(f);
    }
    if let Some(r) = run {
        mcp.extend(["--run".to_string(), r.to_string()]);
    }
    Ok(mcp)
}

impl Launch {
    /// Base URLs at the proxy; `lam mcp --store STORE [--run RUN]`
    /// registered (`--store-file` for a store spec holding a password), as
    /// the agent's room says ([`Agent::launch`]); for an agent lam does not
    /// know, every agent's base-URL variable, nothing registered.
    fn new(agent: Option<Agent>, program: &OsStr, args: &[OsString], addr: SocketAddr, store: &Store, held: Option<u64>, run: Option<&str>) -> Result<Self> {
        let exe = std::env::current_exe().context("lam run: the path of this lam")?;
        let exe = exe.to_string_lossy().into_owned();
        let dir = RunDir::create(&mut |note| say!("lam run: {note}"))?;
        let mut files = Vec::new();
        let mcp = mcp_args(store, run, &dir, &mut files)?;
        let origin = format!("http://{addr}");
        // `lam top` finds this run's proxy here.
        files.push(dir.file("proxy", &origin)?);
        let Some(agent) = agent else {
            let known: Vec<&str> = Agent::ALL.iter().map(|a| a.program()).collect();
            let vars: Vec<(String, String)> = Agent::ALL.iter().filter_map(|a| Some((a.base_url_env()?.to_string(), a.base_url(&origin)))).collect();
            say!(
                "lam run: `{}` is none of {}: {} point at the proxy, no MCP server registered (register `{exe} mcp --store {}` yourself)",
                program.to_string_lossy(),
                known.join(", "),
                vars.iter().map(|(k, _)| k.as_str()).collect::<Vec<_>>().join(" and "),
                store.shown
            );
            let cmd = std::iter::once(program.to_os_string()).chain(args.iter().cloned()).collect();
            return Ok(Self { cmd, env: vars, files, dir, _home_lock: None });
        };
        let env = |k: &str| std::env::var(k).ok();
        // The status line shows only in the interactive display: none in the batch form.
        let status_line = !agent.batch(args) && crate::status::line_wanted();
        let cwd = std::env::current_dir().context("lam run: the working directory")?;
        let setup = agents::Setup { lam: &exe, mcp: &mcp, origin: &origin, args, cwd: &cwd, status_line, budget: held, env: &env };
        let launch = agent.launch(&setup);
        for note in &launch.notes {
            say!("lam run: {note}");
        }
        let mut paths = std::collections::HashMap::new();
        for (name, text) in &launch.files {
            let path = dir.file(name, text)?;
            paths.insert(*name, path.clone());
            files.push(path);
        }
        let mut env = launch.env.clone();
        let mut home_lock = None;
        if let Some(home) = &launch.home {
            let (path, lock) = dir.home(home)?;
            home_lock = lock;
            env.push((home.var.to_string(), path.to_string_lossy().into_owned()));
            env.extend(home.vars.iter().map(|(var, rel)| (var.to_string(), path.join(rel).to_string_lossy().into_owned())));
            files.push(path);
        }
        let arg = |a: &agents::Arg| match a {
            agents::Arg::Text(t) => t.clone(),
            agents::Arg::File(name) => paths.get(name).map_or_else(|| OsString::from(*name), |p| p.clone().into_os_string()),
        };
        say!("lam run: MCP server `lam` registered for this run: {exe} {}", mcp.join(" "));
        let before = launch.before.iter().map(arg);
        let after = launch.after.iter().map(arg);
        let cmd = std::iter::once(program.to_os_string()).chain(before).chain(args.iter().cloned()).chain(after).collect();
        Ok(Self { cmd, env, files, dir, _home_lock: home_lock })
    }

    /// Run the agent with this terminal, and wait for it. With `first`
    /// (a limit, and whether a model request has reached the proxy), stop
    /// the agent when none has when the limit passes.
    fn wait(&self, pid: &AtomicU32, first: Option<(std::time::Duration, &dyn Fn() -> bool)>) -> Result<ExitStatus> {
        let program = self.cmd[0].to_string_lossy();
        let mut command = Command::new(&self.cmd[0]);
        command.args(&self.cmd[1..]).envs(self.env.iter().map(|(k, v)| (k, v)));
        crate::proc::end_with_parent(&mut command);
        let mut child = command.spawn().with_context(|| format!("lam run: starting `{program}`"))?;
        pid.store(child.id(), Ordering::SeqCst);
        if let Some((limit, seen)) = first {
            watch(&mut child, &program, limit, seen)?;
        }
        let status = child.wait().with_context(|| format!("lam run: waiting for `{program}`"));
        pid.store(0, Ordering::SeqCst);
        status
    }

    fn clean(&self) {
        for f in &self.files {
            runfiles::remove(f);
        }
        self.dir.remove();
    }
}

/// Poll until the agent's first model request reached the proxy or the agent
/// exited; if `limit` passes first, say so and stop the agent: SIGTERM, then
/// SIGKILL when it is still running [`KILL_AFTER`] later.
fn watch(child: &mut Child, program: &str, limit: std::time::Duration, seen: &dyn Fn() -> bool) -> Result<()> {
    let t0 = std::time::Instant::now();
    let exited = |c: &mut Child| c.try_wait().with_context(|| format!("lam run: waiting for `{program}`")).map(|s| s.is_some());
    while !seen() && !exited(child)? {
        if t0.elapsed() >= limit {
            say!(
                "lam run: error: no model request of `{program}` reached the proxy within {} s (--first-request-timeout-s): it is not going through lam; stopping it",
                limit.as_secs()
            );
            let _ = Command::new("kill").args(["-s", "TERM", &child.id().to_string()]).status();
            let t1 = std::time::Instant::now();
            while !exited(child)? {
                if t1.elapsed() >= KILL_AFTER {
                    say!("lam run: `{program}` ignored SIGTERM for {} s; killing it", KILL_AFTER.as_secs());
                    let _ = child.kill();
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
            return Ok(());
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    Ok(())
}

/// How long a stopped agent may take to exit before SIGKILL.
const KILL_AFTER: std::time::Duration = std::time::Duration::from_secs(5);

/// The child's status as a shell reports it: its code, or 128 + the signal that ended it.
fn exit_code(status: ExitStatus) -> i32 {
    #[cfg(unix)]
    if let Some(sig) = std::os::unix::process::ExitStatusExt::signal(&status) {
        return 128 + sig;
    }
    status.code().unwrap_or(1)
}

/// Per proxy session and in total: requests, observations, tool-result tokens, removal.
fn summary(stats: &Stats, stored: Option<u64>, store: &Store, program: &OsStr, status: ExitStatus) {
    let line = |s: &SessionStats, note: &str| {
        let pct = 100.0 * s.removal;
        let budget = match (s.budget_tokens, s.peak_input_tokens) {
            (0, 0) => String::new(),
            (held, peak) => format!(
                "; budget: {} cuts, {} citations, peak input {peak} (lam's count), {} over, upstream's count of the last {} (x{:.3}), held to {held}",
                s.cuts,
                s.citations,
                s.over_budget,
                s.upstream_input_tokens,
                s.calibration.max(1.0)
            ),
        };
        format!(
            "{} requests, {} observations{note}, tool-result tokens {} -> {} ({pct:.1}% removed){budget}",
            s.requests, s.observations, s.tokens_in, s.tokens_out
        )
    };
    say!("lam run: `{}` exited with code {}", program.to_string_lossy(), exit_code(status));
    for s in &stats.sessions {
        say!("lam run: session {} (conversation {}): {}", s.session, s.conversation, line(s, ""));
    }
    let total = stats.total();
    let n = stats.sessions.len() as u64 + stats.evicted_sessions;
    say!("lam run: total: {n} session{}, {}", if n == 1 { "" } else { "s" }, line(&total, &stored_note(total.observations, stored)));
    let session = stats.sessions.first().map_or("SESSION", |s| s.session.as_str());
    say!(
        "lam run: store {}; recall: lam recall --store {} --session {session} §ID (list: lam recall --store {} --list)",
        store.shown,
        store.shown,
        store.shown
    );
}

/// The summary's line on the budget: how it was set, the cuts it made, and
/// how to recall what they cited (`total`: the run's summed counters,
/// `session`: the first session's name).
fn budget_line(total: &SessionStats, held: Held, agent: Option<Agent>, store: &Store, session: Option<&str>) -> String {
    let how = match held {
        Held::Off => return "budget: off (--budget off): the agent compacts its context on its own, at its own threshold".to_string(),
        Held::Given(n) => format!("{n} tokens (--budget {n})"),
        Held::Default(c) => format!(
            "{}on by default (the smaller of {c} and a level below the agent's own compaction threshold for its model; `--budget off` turns it off)",
            match total.budget_tokens {
                0 => String::new(),
                n => format!("{n} tokens, "),
            }
        ),
    };
    if total.cuts == 0 {
        return format!("budget: {how}: no cut made (peak input {} tokens, lam's count)", total.peak_input_tokens);
    }
    let plural = |n: u64, one: &'static str, many: &'static str| if n == 1 { one } else { many };
    let tool = agent.map_or(String::new(), |a| format!("the agent's `{} §ID`, or ", a.recall_tool()));
    format!(
        "budget: {how}: {} {} ({} cold, {} warm) cited {} tool {} ({} tokens kept out of the context); each citation names its `§ID`: recall the original exactly with {tool}`lam recall --store {} --session {} §ID`",
        total.cuts,
        plural(total.cuts, "cut", "cuts"),
        total.cuts_cold,
        total.cuts_warm,
        total.citations,
        plural(total.citations, "result", "results"),
        total.tokens_cited,
        store.shown,
        session.unwrap_or("SESSION"),
    )
}

/// After the total's observations: how many the store holds when that
/// differs (a tool result read twice is stored once).
fn stored_note(observations: u64, stored: Option<u64>) -> String {
    let plural = |n: u64| if n == 1 { "" } else { "s" };
    match stored {
        Some(s) if s < observations => {
            let r = observations - s;
            format!(" ({s} stored; {r} repeat{} stored once)", plural(r))
        }
        Some(s) if s > observations => format!(" ({s} stored in the run's sessions, earlier runs' included)"),
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The summary's budget line names the cuts and how to recall what they
    /// cited; without cuts it says none was made; off, that the agent
    /// compacts on its own.
    #[test]
    fn the_budget_line_names_the_cuts_and_the_way_back() {
        let store = Store { spec: StoreSpec::Memory, arg: "/s".into(), shown: "/s".into() };
        let mut t = SessionStats { cuts: 2, cuts_cold: 1, cuts_warm: 1, citations: 7, tokens_cited: 41_000, budget_tokens: 100_000, ..SessionStats::default() };
        let line = budget_line(&t, Held::Default(100_000), Some(Agent::ClaudeCode), &store, Some("serve-1-2"));
        assert!(line.starts_with("budget: 100000 tokens, on by default (the smaller of 100000 and a level below"), "{line}");
        assert!(
            line.ends_with(": 2 cuts (1 cold, 1 warm) cited 7 tool results (41000 tokens kept out of the context); each citation names its `§ID`: recall the original exactly with the agent's `mcp__lam__recall §ID`, or `lam recall --store /s --session serve-1-2 §ID`"),
            "{line}"
        );
        let given = budget_line(&t, Held::Given(50_000), None, &store, None);
        assert!(
            given.starts_with("budget: 50000 tokens (--budget 50000): 2 cuts") && given.contains("exactly with `lam recall --store /s --session SESSION §ID`"),
            "{given}"
        );
        t.cuts = 0;
        assert!(budget_line(&t, Held::Given(50_000), None, &store, None).ends_with(": no cut made (peak input 0 tokens, lam's count)"));
        assert!(budget_line(&t, Held::Off, None, &store, None).starts_with("budget: off (--budget off): the agent compacts"));
    }

    #[test]
    fn the_stored_note_counts_repeats() {
        assert_eq!(stored_note(5, Some(4)), " (4 stored; 1 repeat stored once)");
        assert_eq!(stored_note(7, Some(4)), " (4 stored; 3 repeats stored once)");
        assert_eq!(stored_note(4, Some(4)), "");
        assert_eq!(stored_note(4, None), "");
        assert!(stored_note(2, Some(3)).starts_with(" (3 stored"));
    }

    /// A store spec with a password reaches `lam mcp` in a 0600 file, never
    /// on a command line (`-c` arguments are visible in `ps`) nor in the
    /// agent's environment, for every agent.
    #[test]
    fn a_store_password_never_reaches_a_command_line() {
        let spec = "postgres://lam:pw-SECRET@127.0.0.1:5432/lam";
        let store = Store { spec: StoreSpec::parse(spec).unwrap(), arg: spec.to_string(), shown: lam_core::redact::url(spec) };
        let addr: SocketAddr = "127.0.0.1:1".parse().unwrap();
        for agent in Agent::ALL {
            let l = Launch::new(Some(agent), OsStr::new(agent.program()), &[], addr, &store, Some(100_000), Some("serve-1-2")).unwrap();
            let argv: Vec<String> = l.cmd.iter().map(|a| a.to_string_lossy().into_owned()).collect();
            assert!(argv.iter().all(|a| !a.contains("SECRET")), "{argv:?}");
            assert!(l.env.iter().all(|(_, v)| !v.contains("SECRET")));
            let held: Vec<String> = l.files.iter().flat_map(|f| texts_in(f)).collect();
            assert!(held.iter().any(|t| t == spec), "the spec is in a file: {held:?}");
            #[cfg(unix)]
            for f in &l.files {
                use std::os::unix::fs::PermissionsExt;
                let want = if f.is_dir() { 0o700 } else { 0o600 };
                assert_eq!(std::fs::metadata(f).unwrap().permissions().mode() & 0o777, want, "{}", f.display());
            }
            // On the command line, in a file, or in the environment (opencode's configuration).
            let named = |t: &String| t.contains("--store-file");
            assert!(argv.iter().any(named) || held.iter().any(named) || l.env.iter().any(|(_, v)| named(v)), "{}", agent.name());
            l.clean();
            assert!(l.files.iter().all(|f| !f.exists()));
        }
    }

    /// The texts of a file, or of the files in a directory (an agent's home
    /// for the run: its links not followed).
    fn texts_in(path: &Path) -> Vec<String> {
        match std::fs::read_dir(path) {
            Ok(rd) => rd.flatten().filter(|e| e.file_type().is_ok_and(|t| !t.is_symlink())).flat_map(|e| texts_in(&e.path())).collect(),
            Err(_) => vec![std::fs::read_to_string(path).unwrap()],
        }
    }

    /// The descendants of a process: itself at least, and a child it has.
    #[cfg(unix)]
    #[test]
    fn a_process_s_descendants_include_its_children() {
        let mut child = Command::new("sleep").arg("5").spawn().unwrap();
        assert!(with_descendants(std::process::id()).contains(&child.id()));
        let _ = child.kill();
        let _ = child.wait();
    }
}

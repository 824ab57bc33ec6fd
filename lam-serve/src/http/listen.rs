//! Listening, serving, and shutting down without cutting streams (within
//! the drain deadline).

use super::{App, router, upstream};
use crate::config::ServeConfig;
use crate::error::Error;
use crate::proxy::Proxy;
use std::future::Future;
use std::net::SocketAddr;
use std::time::Duration;

/// Serve `proxy` on `listener` until `shutdown` completes, then finish the
/// requests in flight (streams included) and return.
/// The upstream client is made here, once (its CAs loaded, [`super::trust`]).
pub async fn serve(proxy: Proxy, listener: std::net::TcpListener, shutdown: impl Future<Output = ()> + Send + 'static) -> Result<(), Error> {
    let client = client(proxy.config())?;
    serve_with(proxy, client, listener, shutdown).await
}

/// The upstream client for `cfg`, or why there can be none.
fn client(cfg: &ServeConfig) -> Result<upstream::Client, Error> {
    upstream::Client::new(cfg).map_err(|e| Error::Setting(format!("HTTP client: {e}")))
}

/// [`serve`] with `client`.
async fn serve_with(
    proxy: Proxy,
    client: upstream::Client,
    listener: std::net::TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), Error> {
    let io = |what: &str| {
        let what = what.to_string();
        move |source| Error::Io { what, source }
    };
    listener.set_nonblocking(true).map_err(io("listening"))?;
    let listener = tokio::net::TcpListener::from_std(listener).map_err(io("listening"))?;
    let app = App { room: super::room::Room::new(proxy.config()), proxy, client };
    // Small SSE events go out at once (no Nagle delay waiting for an ACK).
    let listener = axum::serve::ListenerExt::tap_io(listener, |tcp: &mut tokio::net::TcpStream| {
        let _ = tcp.set_nodelay(true);
    });
    axum::serve(listener, router(app)).with_graceful_shutdown(shutdown).await.map_err(io("serving"))
}

/// Listen on `listen`, call `ready` with the bound address, serve until
/// SIGINT or SIGTERM, finish what is in flight, then make the archive
/// durable and save the embedding cache.
pub fn run(cfg: ServeConfig, listen: SocketAddr, ready: impl FnOnce(SocketAddr)) -> Result<(), Error> {
    if !listen.ip().is_loopback() && cfg.token.is_none() {
        return Err(Error::Setting(format!(
            "--listen {listen} is not a loopback address: give a token (--token-file PATH or LAM_TOKEN) that every client must send"
        )));
    }
    let drain = cfg.drain_timeout;
    // A proxy the client cannot speak, or a CA file that gives no
    // certificate, stops it before it listens.
    let client = client(&cfg)?;
    let proxy = Proxy::open(cfg)?;
    let listener = std::net::TcpListener::bind(listen).map_err(|source| Error::Io { what: format!("listening on {listen}"), source })?;
    let addr = listener.local_addr().map_err(|source| Error::Io { what: "listening".into(), source })?;
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().map_err(|source| Error::Io { what: "starting the runtime".into(), source })?;
    // Handlers first: a signal right after `ready` is a stop, never a kill.
    let signals = {
        let _in = rt.enter();
        Signals::new().map_err(|source| Error::Io { what: "installing signal handlers".into(), source })?
    };
    ready(addr);
    let served = rt.block_on(serve_until_signalled(proxy.clone(), client, listener, signals, drain));
    let closed = proxy.close();
    // Requests cut by the deadline may still run blocking work: do not wait.
    rt.shutdown_background();
    served.and(closed)
}

/// Serve until the first signal, then drain: return when every in-flight
/// request is done, at a second signal, or after `drain`, whichever is first
/// (the last two: [`Error::Cut`]).
async fn serve_until_signalled(
    proxy: Proxy,
    client: upstream::Client,
    listener: std::net::TcpListener,
    mut signals: Signals,
    drain: Duration,
) -> Result<(), Error> {
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = serve_with(proxy, client, listener, async move {
        let _ = stopped.await;
    });
    tokio::pin!(server);
    tokio::select! {
        r = &mut server => return r,
        () = signals.next() => {}
    }
    let _ = stop.send(());
    say!(
        "lam serve: stopping: no new connections; finishing in-flight requests for at most {} s (--drain-timeout-s; a second signal stops now)",
        drain.as_secs_f64()
    );
    tokio::select! {
        r = &mut server => r,
        () = signals.next() => {
            say!("lam serve: second signal: stopping now, cutting in-flight requests");
            Err(Error::Cut("a second signal"))
        }
        () = tokio::time::sleep(drain) => {
            say!("lam serve: drain deadline reached: stopping now, cutting in-flight requests");
            Err(Error::Cut("the drain deadline, --drain-timeout-s"))
        }
    }
}

/// SIGINT (Ctrl-C) and SIGTERM, each as often as they come.
struct Signals {
    #[cfg(unix)]
    int: tokio::signal::unix::Signal,
    #[cfg(unix)]
    term: tokio::signal::unix::Signal,
}

impl Signals {
    /// Install the handlers (inside a runtime).
    fn new() -> std::io::Result<Self> {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            Ok(Self { int: signal(SignalKind::interrupt())?, term: signal(SignalKind::terminate())? })
        }
        #[cfg(not(unix))]
        Ok(Self {})
    }

    /// The next signal.
    async fn next(&mut self) {
        #[cfg(unix)]
        tokio::select! {
            _ = self.int.recv() => {},
            _ = self.term.recv() => {},
        }
        #[cfg(not(unix))]
        let _ = tokio::signal::ctrl_c().await;
    }
}

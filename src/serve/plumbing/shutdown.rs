//! Stopping on Ctrl-C or SIGTERM. The handlers are installed before the models load, so neither signal kills the
//! process: before the server listens one exits at once (nothing is in flight yet); after, it starts a graceful
//! stop. The server then takes no new connections and no new work, agent runs stop at their next event (their
//! logs end at a safe point: they resume later), queued chat requests are answered 503, and generations in flight
//! get `--shutdown-grace` seconds before they are halted. A second signal exits at once.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use tokio::runtime::Runtime;
use tokio::sync::watch;

use crate::{Error, Result};

/// The installed handlers.
pub struct Signals {
    received: watch::Receiver<bool>,
    listening: Arc<AtomicBool>,
}

impl Signals {
    /// Installs the handlers on `runtime` now.
    pub fn install(runtime: &Runtime) -> Result<Signals> {
        let _inside = runtime.enter();
        let (sender, received) = watch::channel(false);
        let listening = Arc::new(AtomicBool::new(false));
        let serving = listening.clone();
        let mut source = Source::new()?;
        runtime.spawn(async move {
            let name = source.next().await;
            if !serving.load(Ordering::SeqCst) {
                eprintln!("tandem serve: {name} before the server listened: stopping");
                std::process::exit(0);
            }
            eprintln!(
                "tandem serve: {name}: stopping (no new requests; agent runs stop at their next event and can be \
                 resumed; {name} again exits at once)"
            );
            let _ = sender.send(true);
            let name = source.next().await;
            eprintln!("tandem serve: {name} again: exiting now (runs' logs end at their last whole event)");
            std::process::exit(0);
        });
        Ok(Signals { received, listening })
    }

    /// From now on a signal stops the server gracefully.
    pub fn listening(&self) {
        self.listening.store(true, Ordering::SeqCst);
    }

    /// Resolves at the first signal.
    pub async fn received(mut self) {
        let _ = self.received.wait_for(|got| *got).await;
    }
}

/// The signals listened to.
struct Source {
    #[cfg(unix)]
    terminate: tokio::signal::unix::Signal,
    #[cfg(unix)]
    interrupt: tokio::signal::unix::Signal,
}

impl Source {
    /// Registers the handlers (inside a runtime).
    fn new() -> Result<Self> {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{signal, SignalKind};
            let install = |kind| signal(kind).map_err(|e| Error::io("installing the signal handlers", e));
            Ok(Self { terminate: install(SignalKind::terminate())?, interrupt: install(SignalKind::interrupt())? })
        }
        #[cfg(not(unix))]
        Ok(Self {})
    }

    /// The next signal's name.
    async fn next(&mut self) -> &'static str {
        #[cfg(unix)]
        {
            tokio::select! {
                _ = self.terminate.recv() => "SIGTERM",
                _ = self.interrupt.recv() => "Ctrl-C",
            }
        }
        #[cfg(not(unix))]
        {
            let _ = tokio::signal::ctrl_c().await;
            "Ctrl-C"
        }
    }
}

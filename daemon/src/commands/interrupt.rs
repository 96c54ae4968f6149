//! Ctrl-C and SIGTERM for the measuring commands (`sweep`, `idle --measure`): a thread of
//! its own sets a stop flag and runs the command's own action at once (stop the loops), and
//! remembers which signal it was, for the exit status (128 + the signal number).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};

use crate::runtime::signals::Signals;

/// Watches for SIGINT and SIGTERM until dropped.
pub struct SignalWatch {
    done: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
    /// The signal number received (`SIGINT` = 2, `SIGTERM` = 15); 0 while none has come.
    received: Arc<AtomicI32>,
}

impl SignalWatch {
    /// On the first SIGINT or SIGTERM: set `stop`, then run `on_signal`.
    pub fn start(
        stop: Arc<AtomicBool>,
        on_signal: impl FnOnce() + Send + 'static,
    ) -> anyhow::Result<SignalWatch> {
        let received = Arc::new(AtomicI32::new(0));
        let seen = received.clone();
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let thread = std::thread::Builder::new()
            .name("wattson-signals".into())
            .spawn(move || {
                rt.block_on(async move {
                    let Ok(mut signals) = Signals::stop() else {
                        return;
                    };
                    let signal = tokio::select! {
                        n = signals.stopped() => n,
                        _ = rx => return,
                    };
                    seen.store(signal, Ordering::SeqCst);
                    stop.store(true, Ordering::SeqCst);
                    on_signal();
                });
            })?;
        Ok(SignalWatch {
            done: Some(tx),
            thread: Some(thread),
            received,
        })
    }

    /// The signal that came, if one did.
    pub fn received(&self) -> Option<i32> {
        Some(self.received.load(Ordering::SeqCst)).filter(|&s| s != 0)
    }
}

impl Drop for SignalWatch {
    fn drop(&mut self) {
        if let Some(tx) = self.done.take() {
            let _ = tx.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

//! Why the daemon could not start, run or stop cleanly ([`RuntimeError`]).

use std::path::PathBuf;

use crate::store::StoreError;

/// Why the daemon could not start, run or stop cleanly. Each start-up step says what it was
/// doing; the store's errors name the database.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    /// The database's directory could not be made.
    #[error("creating the database directory {}", dir.display())]
    DatabaseDir {
        dir: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The store: opening it, or samples it lost while running (boxed, as a store error is
    /// large).
    #[error(transparent)]
    Store(Box<StoreError>),
    /// The store could not be flushed at the end.
    #[error("flushing the database")]
    Flush(#[source] Box<StoreError>),
    /// The ledger feed (the MQTT state's and the HTTP figures) did not start.
    #[error("starting the ledger feed")]
    LedgerFeed(#[source] Box<StoreError>),
    /// `[http] listen` could not be bound.
    #[error(transparent)]
    Http(#[from] crate::publish::http::HttpError),
    /// `[http]` could not be served.
    #[error("serving [http]")]
    ServeHttp(#[source] std::io::Error),
    /// The async runtime did not start.
    #[error("starting the async runtime")]
    AsyncRuntime(#[source] std::io::Error),
    /// The sampling thread did not start.
    #[error("starting the sampling thread")]
    SamplerThread(#[source] std::io::Error),
    /// The sampling thread did not stop.
    #[error("stopped with the sampling thread stuck: {0}")]
    SamplerStuck(String),
    /// The MQTT publisher did not start.
    #[error("starting the MQTT publisher")]
    Publisher(#[source] crate::publish::mqtt::MqttError),
    /// `[tariff] price_topic` could not be subscribed to.
    #[error("subscribing to [tariff] price_topic")]
    PriceTopic(#[source] crate::publish::mqtt::MqttError),
    /// `[prometheus] remote_write` did not start (its credential file cannot be read).
    #[error("starting [prometheus] remote write: {0}")]
    RemoteWrite(crate::publish::remote_write::CredentialError),
    /// The signal handlers could not be installed.
    #[error("installing the SIGINT, SIGTERM and SIGHUP handlers")]
    Signals(#[source] std::io::Error),
    /// The sources the config asks for could not be wired.
    #[error(transparent)]
    Sources(#[from] crate::sources::SourcesError),
}

impl From<StoreError> for RuntimeError {
    fn from(e: StoreError) -> Self {
        RuntimeError::Store(Box::new(e))
    }
}

impl RuntimeError {
    /// The exit status it stands for: the store's (74) for the database; none of its own
    /// otherwise.
    pub fn exit_status(&self) -> Option<u8> {
        match self {
            RuntimeError::Store(_) | RuntimeError::Flush(_) | RuntimeError::LedgerFeed(_) => {
                Some(crate::store::EXIT_STORE)
            }
            _ => None,
        }
    }
}

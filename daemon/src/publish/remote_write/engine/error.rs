//! Why a report could not be read from an engine ([`EngineError`]).

use crate::store::StoreError;

/// Exit status where the engine cannot be reached or fails (sysexits' `EX_UNAVAILABLE`).
pub const EXIT_UNAVAILABLE: u8 = 69;

/// Why the engine's series could not be read.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// `--prometheus` is not an `http://HOST[:PORT][/PREFIX]` URL.
    #[error("--prometheus: {0}")]
    Url(crate::config::UrlError),
    /// `[prometheus]`'s credential file cannot be read.
    #[error("{0}")]
    Credential(super::super::CredentialError),
    /// No connection.
    #[error("cannot connect to {url} (is the engine running there?)")]
    Connect {
        url: String,
        #[source]
        source: std::io::Error,
    },
    /// The HTTP exchange failed.
    #[error("{url}: {what}")]
    Http { url: String, what: String },
    /// No answer in time.
    #[error("{url} did not answer within {seconds} s")]
    Timeout { url: String, seconds: u64 },
    /// The report's queries together took longer than they may.
    #[error(
        "the report's queries to {url} did not finish within {seconds} s, the deadline of a \
         whole report (the engine answers too slowly; a shorter --since asks less)"
    )]
    Deadline { url: String, seconds: u64 },
    /// An answer larger than a report reads.
    #[error(
        "{url}'s answer to {query} is larger than {mib} MiB, more than a report reads (a day \
         of one series at 1 Hz is about 3 MB); refused"
    )]
    TooLarge {
        url: String,
        query: String,
        mib: usize,
    },
    /// An answer of more series than one host has.
    #[error(
        "{url} answered {query} with {count} series, more than one host's (at most {max}: one \
         a source, core or GPU); refused"
    )]
    TooManySeries {
        url: String,
        query: String,
        count: usize,
        max: usize,
    },
    /// A series with more samples in a day than a meter gives.
    #[error(
        "{url} holds {count} samples of {series} in one day, more than a meter gives (at most \
         {max}, 10 a second); refused"
    )]
    TooManySamples {
        url: String,
        series: String,
        count: u64,
        max: u64,
    },
    /// The answer is not the query API's JSON.
    #[error(
        "{url} answered HTTP {status} with something that is not Prometheus' query API \
         ({text:?}); give the engine's base URL, e.g. http://prometheus.lan:9090"
    )]
    NotTheApi {
        url: String,
        status: u16,
        text: String,
    },
    /// The engine refused a query.
    #[error("{url} refused a query (HTTP {status}, {kind}): {error}")]
    Refused {
        url: String,
        status: u16,
        kind: String,
        error: String,
    },
    /// An answer of the wrong shape.
    #[error("the engine's answer to {query} is not a range of samples")]
    Malformed { query: String },
    /// Two of the engine's series stand for one of wattson's.
    #[error(
        "two series stand for one of wattson's: {name}{first} and {name}{second}; the report \
         reads each host's series once (as remote write sends them), not a scrape of the same \
         host beside it"
    )]
    TwoSeries {
        name: String,
        first: String,
        second: String,
    },
    /// Nothing of the host in the window.
    #[error(
        "{url} holds no wattson series of host {host:?} in the window{}; hosts it has: {}",
        if set_aside.is_empty() { String::new() } else { format!(" that a meter could read ({})", set_aside.join("; ")) },
        if hosts.is_empty() { "none".to_owned() } else { hosts.join(", ") }
    )]
    NoSeries {
        url: String,
        host: String,
        hosts: Vec<String>,
        /// What was read and set aside, in words.
        set_aside: Vec<String>,
    },
    /// `--host` names no host.
    #[error("--host names no host: give one, or several separated by commas")]
    NoHost,
    /// Several hosts asked for in a format that holds one report.
    #[error(
        "--format {0} holds one host's report: give --host once (or use table, markdown or \
         json for several)"
    )]
    OneHostOnly(&'static str),
    /// No directory for the samples read.
    #[error("creating a temporary directory for the samples read")]
    TempDir(#[source] std::io::Error),
    /// No runtime for the requests.
    #[error("starting the HTTP client")]
    Runtime(#[source] std::io::Error),
    /// Writing the samples read.
    #[error(transparent)]
    Store(Box<StoreError>),
    /// The writer thread died.
    #[error("the store's writer stopped unexpectedly")]
    WriterPanicked,
    /// Making the report from what was read.
    #[error(transparent)]
    Report(Box<crate::report::ProduceError>),
}

impl From<StoreError> for EngineError {
    fn from(e: StoreError) -> Self {
        EngineError::Store(Box::new(e))
    }
}

impl EngineError {
    /// The exit status it stands for: 69 (unavailable) where the engine cannot be reached
    /// or fails, 78 for a credential the configuration gets wrong.
    pub fn exit_status(&self) -> Option<u8> {
        match self {
            EngineError::Connect { .. }
            | EngineError::Http { .. }
            | EngineError::Timeout { .. }
            | EngineError::Deadline { .. } => Some(EXIT_UNAVAILABLE),
            EngineError::Credential(_) => Some(crate::config::EXIT_CONFIG as u8),
            EngineError::Store(_) => Some(crate::store::EXIT_STORE),
            EngineError::Report(e) => e.exit_status(),
            _ => None,
        }
    }
}

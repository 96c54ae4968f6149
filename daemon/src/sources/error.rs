//! Why a source could not be wired ([`SourcesError`]).

/// Why a source could not be wired: a meter's port, a simulated meter, the smart plugs'
/// subscription, the calibrations of the estimated wall.
#[derive(Debug, thiserror::Error)]
pub enum SourcesError {
    /// Meters that share a port disagree on how the line is driven.
    #[error(transparent)]
    Lines(#[from] crate::config::LineError),
    /// A meter's collector could not be made.
    #[error("meter {id}")]
    Meter {
        id: String,
        #[source]
        source: wattson_collectors::meter::PortError,
    },
    /// No pseudo-terminal for a simulated meter.
    #[error("creating a pseudo-terminal for the simulated meter")]
    Pty(#[source] std::io::Error),
    /// The simulated meter's pseudo-terminal has no name to open it by.
    #[error("the pseudo-terminal has no name")]
    PtyName,
    /// The simulated meter's thread did not start.
    #[error("starting the simulated meter thread")]
    SimThread(#[source] std::io::Error),
    /// The smart plugs' subscription.
    #[error("subscribing to the smart plugs")]
    Plugs(#[source] crate::publish::mqtt::MqttError),
    /// The stored calibrations of the estimated wall.
    #[error(transparent)]
    Calibrations(#[from] crate::sweep::SweepError),
}

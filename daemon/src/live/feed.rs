//! Every sampling pass, whole, for the control socket's subscribers: a broadcast of
//! [`CLIENT_QUEUE`] passes that never blocks the sampler; with no subscriber, offering a
//! pass costs one atomic load.

use std::sync::Arc;

use tokio::sync::broadcast;
use wattson_collectors::Sample;

/// Sampling passes a subscriber may fall behind before it is dropped.
pub const CLIENT_QUEUE: usize = 64;

/// One sampling pass's samples, as the sampler took them.
pub type Pass = Arc<[Sample]>;

/// The sampler's passes for control-socket subscribers: a broadcast of
/// [`CLIENT_QUEUE`] passes that never blocks the sampler.
#[derive(Debug)]
pub struct SampleFeed {
    tx: broadcast::Sender<Pass>,
}

impl Default for SampleFeed {
    fn default() -> Self {
        SampleFeed {
            tx: broadcast::channel(CLIENT_QUEUE).0,
        }
    }
}

impl SampleFeed {
    /// Offer one pass to the subscribers (a copy only when there are some).
    pub fn publish(&self, samples: &[Sample]) {
        if self.tx.receiver_count() > 0 && !samples.is_empty() {
            let _ = self.tx.send(samples.into());
        }
    }

    /// Every pass from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<Pass> {
        self.tx.subscribe()
    }
}

//! [`Observer`]: the host's view of a turn as it happens.

use crate::record::Record;

/// Watches a turn as it happens: records as they are appended and streamed model text.
pub trait Observer: Send + Sync {
    /// A record was appended.
    fn on_record(&self, session: &str, record: &Record) {
        let _ = (session, record);
    }
    /// The model streamed text (live calls only; never journaled as such).
    fn on_delta(&self, session: &str, delta: &str) {
        let _ = (session, delta);
    }
}

impl<O: Observer + ?Sized> Observer for std::sync::Arc<O> {
    fn on_record(&self, session: &str, record: &Record) {
        (**self).on_record(session, record);
    }
    fn on_delta(&self, session: &str, delta: &str) {
        (**self).on_delta(session, delta);
    }
}

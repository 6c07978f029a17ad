//! Tailing the log across hosts: `LISTEN` on [`NOTIFY_CHANNEL`](super::NOTIFY_CHANNEL).

use harness_core::pg::{Pg, PgListener};

use super::NOTIFY_CHANNEL;
use crate::log::LogError;

/// A live tail of every append on the database ([`PgLog::listen`](super::PgLog::listen));
/// dropping it stops it.
#[derive(Debug)]
pub struct Listener(PgListener);

impl Listener {
    /// Whether the connection ended (listen again).
    pub fn is_finished(&self) -> bool {
        self.0.is_finished()
    }
}

pub(super) fn start(
    pg: &Pg,
    me: Option<String>,
    on_append: impl Fn(&str, u64) + Send + Sync + 'static,
) -> Result<Listener, LogError> {
    let err = |e: harness_core::pg::PgError| LogError::Io(e.to_string());
    // The schema the log's tables are in, as the appending statement names it.
    let schema = pg.current_schema().map_err(err)?;
    let l = pg
        .listen(NOTIFY_CHANNEL, move |payload| {
            // `<schema> <seq> <holder> <key>`: the key may hold spaces; the rest never do.
            // This host's own appends are not news to it.
            let mut parts = payload.splitn(4, ' ');
            if let (Some(s), Some(seq), Some(holder), Some(key)) =
                (parts.next(), parts.next(), parts.next(), parts.next())
            {
                if s == schema && me.as_deref() != Some(holder) {
                    if let Ok(seq) = seq.parse() {
                        on_append(key, seq);
                    }
                }
            }
        })
        .map_err(err)?;
    Ok(Listener(l))
}

//! What other hosts do, as they do it: `LISTEN` on [`NOTIFY_CHANNEL`](super::NOTIFY_CHANNEL).

use harness_core::pg::{Pg, PgError, PgListener};

use super::NOTIFY_CHANNEL;
use crate::server::store::{Change, OnChange, StoreError, Watch};

/// A running watch; dropping it closes its connection.
#[derive(Debug)]
pub(super) struct PgWatch(PgListener);

impl Watch for PgWatch {
    fn is_finished(&self) -> bool {
        self.0.is_finished()
    }
}

/// The change a payload (`<schema> <host> <kind> <id>`, or `<schema> <host> cancel <id>`)
/// reports to `me` in `schema`: none for another schema, for `me`'s own writes, or a
/// malformed payload.
pub(super) fn change(payload: &str, schema: &str, me: &str) -> Option<Change> {
    let mut parts = payload.splitn(4, ' ');
    let (s, host, kind, id) = (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
    if s != schema || host == me || id.is_empty() {
        return None;
    }
    Some(match kind {
        "cancel" => Change::Cancel {
            response_id: id.to_owned(),
        },
        "response" | "session" | "harness" | "upload" => Change::Object {
            kind: kind.to_owned(),
            id: id.to_owned(),
        },
        _ => return None,
    })
}

pub(super) fn start(pg: &Pg, me: &str, on_change: OnChange) -> Result<PgWatch, StoreError> {
    let err = |e: PgError| StoreError::Io(e.to_string());
    // The schema the tables are in, as the notifying statements name it.
    let schema = pg.current_schema().map_err(err)?;
    let me = me.to_owned();
    let l = pg
        .listen(NOTIFY_CHANNEL, move |payload| {
            if let Some(c) = change(payload, &schema, &me) {
                on_change(c);
            }
        })
        .map_err(err)?;
    Ok(PgWatch(l))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payloads_of_other_hosts_in_this_schema_only() {
        let obj = |k: &str, i: &str| {
            Some(Change::Object {
                kind: k.into(),
                id: i.into(),
            })
        };
        assert_eq!(
            change("s h2 response resp_1", "s", "h1"),
            obj("response", "resp_1")
        );
        assert_eq!(
            change("s h2 session hsess 1", "s", "h1"),
            obj("session", "hsess 1")
        );
        assert_eq!(
            change("s h2 cancel resp_1", "s", "h1"),
            Some(Change::Cancel {
                response_id: "resp_1".into()
            })
        );
        assert_eq!(
            change("s h1 response resp_1", "s", "h1"),
            None,
            "its own write"
        );
        assert_eq!(
            change("t h2 response resp_1", "s", "h1"),
            None,
            "another schema"
        );
        assert_eq!(change("s h2 widget w", "s", "h1"), None);
        assert_eq!(change("s h2 response", "s", "h1"), None);
        assert_eq!(change("", "s", "h1"), None);
    }
}

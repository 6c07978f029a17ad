//! Forwarding: an input (`POST control`, a socket's `harness.input`) or an AG-UI run
//! (`POST run`, kind `run`) that reaches a host that does not own its thread goes to the
//! owner through `harness_tanstack_inbox` (`NOTIFY` [`INBOX_CHANNEL`] with
//! `<schema> <holder>`); the owner runs it as a local one and writes its answer back
//! (`NOTIFY` [`ANSWER_CHANNEL`] with `<schema> <sender> <id>`). [`PgLog::listen_forwards`]
//! tails both.

use harness_core::pg::PgListener;

use super::{PgLog, log_err};
use crate::log::{Forward, ForwardKind, LogError};

/// The channel an input forwarded to a host is announced on.
pub const INBOX_CHANNEL: &str = "harness_tanstack_inbox";
/// The channel the owner's answer to a forwarded input is announced on.
pub const ANSWER_CHANNEL: &str = "harness_tanstack_answer";

/// How many forwarded inputs the owner takes at once.
const TAKE: i64 = 64;

/// The two `LISTEN` connections of [`PgLog::listen_forwards`]; dropping them stops both.
#[derive(Debug)]
pub struct ForwardListener(PgListener, PgListener);

impl ForwardListener {
    /// Whether a connection ended (listen again).
    pub fn is_finished(&self) -> bool {
        self.0.is_finished() || self.1.is_finished()
    }
}

impl PgLog {
    /// Listens for inputs other hosts forward to this one (`on_input()`: call
    /// [`Service::handle_forwarded`](crate::driver::Service::handle_forwarded)) and for the
    /// answers to the inputs this one forwarded (`on_answer(id)`: call
    /// [`Service::handle_forward_answer`](crate::driver::Service::handle_forward_answer)).
    /// Both run on the pool's runtime and must not block: hand them to a thread or task.
    /// `None` without leases (no owner to forward to).
    pub fn listen_forwards(
        &self,
        on_input: impl Fn() + Send + Sync + 'static,
        on_answer: impl Fn(u64) + Send + Sync + 'static,
    ) -> Result<Option<ForwardListener>, LogError> {
        let Some(l) = &self.leases else {
            return Ok(None);
        };
        let schema = self.pg.current_schema().map_err(log_err)?;
        let me = format!("{schema} {}", l.holder);
        let inbox = self
            .pg
            .listen(INBOX_CHANNEL, move |payload| {
                if payload == me {
                    on_input();
                }
            })
            .map_err(log_err)?;
        let me = format!("{schema} {} ", l.holder);
        let answers = self
            .pg
            .listen(ANSWER_CHANNEL, move |payload| {
                if let Some(id) = payload.strip_prefix(&me).and_then(|i| i.parse().ok()) {
                    on_answer(id);
                }
            })
            .map_err(log_err)?;
        Ok(Some(ForwardListener(inbox, answers)))
    }

    pub(super) fn forward_to(&self, holder: &str, f: &Forward) -> Result<Option<u64>, LogError> {
        let Some(l) = &self.leases else {
            return Ok(None);
        };
        let (holder, sender, f) = (holder.to_owned(), l.holder.clone(), f.clone());
        let kind = f.kind.as_str();
        let pool = self.pg.pool().clone();
        let id: i64 = self
            .pg
            .block_on(async move {
                let c = pool.get().await?;
                let row = c
                    .query_one(
                        "WITH i AS ( \
                           INSERT INTO harness_tanstack_inbox \
                             (holder, sender, key, request_id, user_name, body, traceparent, kind) \
                           VALUES ($1, $2, $3, $4, $5, $6, $7, $9) RETURNING id) \
                         SELECT id, pg_notify($8, current_schema() || ' ' || $1) FROM i",
                        &[
                            &holder,
                            &sender,
                            &f.key,
                            &f.request_id,
                            &f.user,
                            &f.body,
                            &f.traceparent,
                            &INBOX_CHANNEL,
                            &kind,
                        ],
                    )
                    .await?;
                Ok(row.try_get(0)?)
            })
            .map_err(log_err)?;
        Ok(u64::try_from(id).ok())
    }

    pub(super) fn take_inbox(&self) -> Result<Vec<(u64, Forward)>, LogError> {
        let Some(l) = &self.leases else {
            return Ok(Vec::new());
        };
        let holder = l.holder.clone();
        let pool = self.pg.pool().clone();
        let rows: Vec<(i64, Forward)> = self
            .pg
            .block_on(async move {
                let c = pool.get().await?;
                // Rows a sender left behind (it stopped before it read the answer).
                c.execute(
                    "DELETE FROM harness_tanstack_inbox WHERE created < now() - interval '10 minutes'",
                    &[],
                )
                .await?;
                let rows = c
                    .query(
                        "UPDATE harness_tanstack_inbox SET taken = true WHERE id IN ( \
                           SELECT id FROM harness_tanstack_inbox WHERE holder = $1 AND NOT taken \
                           ORDER BY id LIMIT $2 FOR UPDATE SKIP LOCKED) \
                         RETURNING id, key, request_id, user_name, body, traceparent, kind",
                        &[&holder, &TAKE],
                    )
                    .await?;
                rows.iter()
                    .map(|r| {
                        let kind: String = r.try_get(6)?;
                        Ok((
                            r.try_get(0)?,
                            Forward {
                                // A kind this version does not know: run as an input, whose
                                // body then does not read (a `400` answer, not a lost row).
                                kind: ForwardKind::parse(&kind).unwrap_or_default(),
                                key: r.try_get(1)?,
                                request_id: r.try_get(2)?,
                                user: r.try_get(3)?,
                                body: r.try_get(4)?,
                                traceparent: r.try_get(5)?,
                            },
                        ))
                    })
                    .collect()
            })
            .map_err(log_err)?;
        let mut out: Vec<(u64, Forward)> = rows
            .into_iter()
            .filter_map(|(id, f)| Some((u64::try_from(id).ok()?, f)))
            .collect();
        out.sort_by_key(|(id, _)| *id);
        Ok(out)
    }

    pub(super) fn answer(&self, id: u64, status: u16, body: &str) -> Result<(), LogError> {
        let id = i64::try_from(id).map_err(|_| LogError::Io("id".into()))?;
        let (status, body) = (i32::from(status), body.to_owned());
        let pool = self.pg.pool().clone();
        self.pg
            .block_on(async move {
                let c = pool.get().await?;
                c.query(
                    "WITH u AS ( \
                       UPDATE harness_tanstack_inbox SET status = $2, answer = $3 \
                       WHERE id = $1 RETURNING sender) \
                     SELECT pg_notify($4, current_schema() || ' ' || sender || ' ' || $1::bigint::text) FROM u",
                    &[&id, &status, &body, &ANSWER_CHANNEL],
                )
                .await?;
                Ok(())
            })
            .map_err(log_err)
    }

    pub(super) fn answer_of(&self, id: u64) -> Result<Option<(u16, String)>, LogError> {
        let Ok(id) = i64::try_from(id) else {
            return Ok(None);
        };
        let pool = self.pg.pool().clone();
        let row: Option<(i32, String)> = self
            .pg
            .block_on(async move {
                let c = pool.get().await?;
                let row = c
                    .query_opt(
                        "DELETE FROM harness_tanstack_inbox WHERE id = $1 AND answer IS NOT NULL \
                         RETURNING status, answer",
                        &[&id],
                    )
                    .await?;
                Ok(match row {
                    Some(r) => Some((r.try_get(0)?, r.try_get(1)?)),
                    None => None,
                })
            })
            .map_err(log_err)?;
        Ok(row.map(|(s, b)| (u16::try_from(s).unwrap_or(500), b)))
    }

    pub(super) fn withdraw(&self, id: u64) -> Result<bool, LogError> {
        let Ok(id) = i64::try_from(id) else {
            return Ok(false);
        };
        let pool = self.pg.pool().clone();
        self.pg
            .block_on(async move {
                let c = pool.get().await?;
                Ok(c.execute(
                    "DELETE FROM harness_tanstack_inbox WHERE id = $1 AND NOT taken",
                    &[&id],
                )
                .await?
                    > 0)
            })
            .map_err(log_err)
    }
}

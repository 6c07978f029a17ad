//! The server's PostgreSQL store on a real server (features `postgres` and `axum`): the shared
//! store suite, and hosts starting together on one database.
//!
//! Needs `HARNESS_PG_URL` (scripts/interop/postgres/run.sh starts a throwaway server and sets
//! it); without it every test fails, saying so. Each test works in a schema of its own.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[macro_use]
mod store_suite;

use std::sync::Arc;

use async_trait::async_trait;
use harness_core::pg::PgConfig;
use harness_uhp::server::Store;
use harness_uhp::server::postgres::PgStore;

/// A schema of this test's own; each open is a new pool (a restarted host).
struct Schema(PgConfig);

impl Schema {
    fn fresh() -> Schema {
        Schema(PgConfig::for_test("uhp").unwrap_or_else(|e| panic!("{e}")))
    }
}

#[async_trait]
impl store_suite::Backend for Schema {
    async fn open(&self) -> Arc<dyn Store> {
        let cfg = self.0.clone();
        // Connecting blocks (it migrates): off the async worker.
        let store = tokio::task::spawn_blocking(move || PgStore::with_config(&cfg))
            .await
            .unwrap()
            .unwrap();
        Arc::new(store)
    }
}

/// The shared store suite on PostgreSQL.
mod pg_store {
    use super::{Schema, store_suite};
    store_suite!(Schema::fresh());
}

/// A pool of one connection would hang every statement behind the host's marker: refused
/// at once with a message that says why.
#[test]
fn a_pool_of_one_is_refused_with_the_reason() {
    let cfg = Schema::fresh().0.pool_size(1);
    let err = PgStore::with_config(&cfg).unwrap_err().to_string();
    assert!(err.contains("at least 2 connections"), "{err}");
}

/// Two hosts on one database: what one appends, the other loads.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_host_loads_what_the_first_wrote() {
    use store_suite::Backend;
    let schema = Schema::fresh();
    let (a, b) = (schema.open().await, schema.open().await);
    let rec = harness_uhp::server::StoreRecord::ResponseDeleted { id: "r".into() };
    a.append(vec![rec]).await.unwrap();
    assert!(
        b.load().await.unwrap().is_empty(),
        "a deletion stores nothing"
    );
    let up = store_suite::upload("file_z", b"z");
    a.append(vec![up.clone()]).await.unwrap();
    assert_eq!(b.load().await.unwrap(), vec![up]);
}

/// Several hosts serving from one database, in one process: each a `UhpService` on a
/// `PgStore` of its own (its own pool, its own host id), all in one schema.
mod two_hosts {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::{Duration, Instant};

    use async_trait::async_trait;
    use futures::StreamExt;
    use harness_core::model::ScriptedModel;
    use harness_core::pg::{PgConfig, PgError};
    use harness_core::{Descriptor, EventSink, Harness, HarnessError, Start};
    use harness_uhp::server::driver::{Body, CallerAuth, UhpService};
    use harness_uhp::server::postgres::PgStore;
    use serde_json::{Value, json};

    /// Echoes its input; an input starting `wait` streams a `.` every 20 ms for up to 4 s
    /// (until cancelled). Counts its runs.
    struct Slow(Arc<AtomicUsize>);

    #[async_trait]
    impl Harness for Slow {
        async fn describe(&self) -> Result<Descriptor, HarnessError> {
            Ok(Descriptor::new("slow", "1"))
        }
        async fn run(&self, s: Start, sink: &mut dyn EventSink) -> Result<(), HarnessError> {
            self.0.fetch_add(1, Ordering::SeqCst);
            let text = s.inputs.iter().map(|m| m.text()).collect::<String>();
            if let Some(ms) = text.strip_prefix("wait") {
                let n: u64 = ms.trim().parse().unwrap_or(4000) / 20;
                for _ in 0..n {
                    sink.output(".").await?;
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                return Ok(());
            }
            sink.output(&text).await?;
            Ok(())
        }
    }

    struct Host {
        svc: UhpService,
        store: PgStore,
    }

    /// Two hosts on a fresh schema, counting the runs of the `slow` harness between them.
    async fn two_hosts() -> (Arc<AtomicUsize>, Host, Host) {
        let cfg = schema();
        let runs = Arc::new(AtomicUsize::new(0));
        let (a, b) = (host(&cfg, &runs).await, host(&cfg, &runs).await);
        (runs, a, b)
    }

    async fn host(cfg: &PgConfig, runs: &Arc<AtomicUsize>) -> Host {
        let c = cfg.clone();
        let store = tokio::task::spawn_blocking(move || PgStore::with_config(&c))
            .await
            .unwrap()
            .unwrap();
        let svc = UhpService::builder(ScriptedModel::new())
            .harness("slow", "Slow", Slow(Arc::clone(runs)))
            .models(["scripted"])
            .api_key("ka", "alice")
            .api_key("kb", "bob")
            .store(store.clone())
            .build(Instant::now, || 1_786_400_000_000)
            .await
            .unwrap();
        tokio::spawn(svc.run(tokio::time::sleep));
        Host { svc, store }
    }

    fn schema() -> PgConfig {
        PgConfig::for_test("uhp2")
            .unwrap_or_else(|e: PgError| panic!("{e}"))
            .pool_size(4)
    }

    /// One request: the status and the whole body (a stream read to its end).
    async fn call(
        h: &Host,
        token: &str,
        method: &str,
        path: &str,
        key: Option<&str>,
        body: &Value,
    ) -> (u16, String) {
        let mut req = http::Request::builder()
            .method(method)
            .uri(path)
            .header("authorization", format!("Bearer {token}"));
        if let Some(k) = key {
            req = req.header("idempotency-key", k);
        }
        let bytes = if body.is_null() {
            Vec::new()
        } else {
            serde_json::to_vec(body).unwrap()
        };
        let resp = tokio::time::timeout(
            Duration::from_secs(10),
            h.svc.handle(CallerAuth::Bearer, req.body(bytes).unwrap()),
        )
        .await
        .expect("answered within 10 s");
        let status = resp.status().as_u16();
        let text = match resp.into_body() {
            Body::Full(b) => String::from_utf8(b).unwrap(),
            Body::Stream(s) => {
                let chunks: Vec<Vec<u8>> =
                    tokio::time::timeout(Duration::from_secs(10), s.collect())
                        .await
                        .expect("the stream ended within 10 s");
                String::from_utf8(chunks.concat()).unwrap()
            }
        };
        (status, text)
    }

    /// A `GET`: the status and the whole body.
    async fn get(h: &Host, token: &str, path: &str) -> (u16, String) {
        call(h, token, "GET", path, None, &Value::Null).await
    }

    fn json_of(s: &str) -> Value {
        serde_json::from_str(s).unwrap_or_else(|e| panic!("{e}: {s}"))
    }

    /// Polls `f` until it holds (5 s at most).
    async fn eventually<F, Fut>(what: &str, mut f: F)
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = bool>,
    {
        let deadline = Instant::now() + Duration::from_secs(5);
        while !f().await {
            assert!(Instant::now() < deadline, "never: {what}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// tasks.md:215-222: for a repeated `Idempotency-Key` a server "MUST return the result of
    /// the first request" and "not start a second execution", waiting for it if it still runs;
    /// through another host on the database too. The same key with another body is refused.
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn a_key_repeated_through_another_host_names_the_first_task() {
        let (runs, a, b) = two_hosts().await;
        let body = json!({"input": "hello"});
        let (st, first) = call(&a, "ka", "POST", "/v1/responses", Some("k1"), &body).await;
        assert_eq!(st, 200, "{first}");
        let first = json_of(&first);
        assert_eq!(first["status"], "completed");
        let (st, again) = call(&b, "ka", "POST", "/v1/responses", Some("k1"), &body).await;
        assert_eq!(st, 200, "{again}");
        let again = json_of(&again);
        assert_eq!(again["id"], first["id"], "host B answers host A's task");
        assert_eq!(again["output"], first["output"]);
        assert_eq!(runs.load(Ordering::SeqCst), 1, "one execution");
        // Another body under the key: refused, through either host.
        let other = json!({"input": "something else"});
        for h in [&a, &b] {
            let (st, e) = call(h, "ka", "POST", "/v1/responses", Some("k1"), &other).await;
            assert_eq!(st, 422, "{e}");
            assert_eq!(
                json_of(&e)["error"]["code"],
                "harnessrs_idempotency_key_reused"
            );
        }
        // Still running on A: B waits for it and answers its result (tasks.md:218).
        let slow = json!({"input": "wait 400"});
        let (x, y) = tokio::join!(
            call(&a, "ka", "POST", "/v1/responses", Some("k2"), &slow),
            async {
                tokio::time::sleep(Duration::from_millis(150)).await;
                call(&b, "ka", "POST", "/v1/responses", Some("k2"), &slow).await
            },
        );
        assert_eq!((x.0, y.0), (200, 200), "{x:?} {y:?}");
        let (x, y) = (json_of(&x.1), json_of(&y.1));
        assert_eq!(y["id"], x["id"]);
        assert_eq!(y["status"], "completed", "B waited for the end: {y}");
        assert_eq!(y["output"], x["output"]);
        assert_eq!(runs.load(Ordering::SeqCst), 2);
    }

    /// Two hosts race one new key: exactly one task runs, both requests get it.
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn two_hosts_racing_one_key_run_one_task() {
        let (runs, a, b) = two_hosts().await;
        for i in 0..5 {
            let key = format!("race-{i}");
            let body = json!({"input": format!("race {i}")});
            let (x, y) = tokio::join!(
                call(&a, "ka", "POST", "/v1/responses", Some(&key), &body),
                call(&b, "ka", "POST", "/v1/responses", Some(&key), &body),
            );
            assert_eq!((x.0, y.0), (200, 200), "{x:?} {y:?}");
            let (x, y) = (json_of(&x.1), json_of(&y.1));
            assert_eq!(x["id"], y["id"], "one task for the key");
            assert_eq!(x["status"], "completed");
            assert_eq!(y["status"], "completed");
        }
        assert_eq!(runs.load(Ordering::SeqCst), 5, "one execution per key");
    }

    /// tasks.md §4 (a stored response "MUST" be returned after completion), sessions.md:91-96
    /// (a cancel "MUST reach a terminal state", `cancelled`, output kept): a task made through
    /// host A is read, listed, streamed and cancelled through host B.
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn a_task_made_on_one_host_is_read_listed_and_cancelled_through_another() {
        let (_, a, b) = two_hosts().await;
        let body = json!({"input": "wait", "background": true});
        let (_, t) = call(&a, "ka", "POST", "/v1/responses", None, &body).await;
        let t = json_of(&t);
        let id = t["id"].as_str().unwrap().to_owned();
        let sid = t["metadata"]["session_id"].as_str().unwrap().to_owned();
        // B reads it, running.
        let (st, got) = get(&b, "ka", &format!("/v1/responses/{id}")).await;
        assert_eq!(st, 200, "{got}");
        assert_eq!(json_of(&got)["status"], "in_progress");
        let (st, items) = get(&b, "ka", &format!("/v1/responses/{id}/input_items")).await;
        assert_eq!(st, 200);
        assert_eq!(json_of(&items)["data"][0]["content"][0]["text"], "wait");
        let (st, s) = get(&b, "ka", &format!("/v1/sessions/{sid}")).await;
        assert_eq!(st, 200, "{s}");
        // B lists the session (A's write reached B).
        eventually("B lists A's session", || async {
            let (_, l) = get(&b, "ka", "/v1/sessions").await;
            l.contains(&sid)
        })
        .await;
        // Continuing the session through B while A runs its task: busy (lifecycle.md §5).
        let (st, busy) = call(
            &b,
            "ka",
            "POST",
            "/v1/responses",
            None,
            &json!({"input": "next", "previous_response_id": id}),
        )
        .await;
        assert_eq!(st, 409, "{busy}");
        assert_eq!(json_of(&busy)["error"]["code"], "session_busy");
        tokio::time::sleep(Duration::from_millis(100)).await;
        // B cancels it: A stops it and B answers the cancelled task.
        let t0 = Instant::now();
        let (st, c) = call(
            &b,
            "ka",
            "POST",
            &format!("/v1/responses/{id}/cancel"),
            None,
            &Value::Null,
        )
        .await;
        assert_eq!(st, 200, "{c}");
        let c = json_of(&c);
        assert_eq!(c["status"], "cancelled", "{c}");
        assert!(
            t0.elapsed() < Duration::from_secs(1),
            "answered within a second"
        );
        let text = c["output"][0]["content"][0]["text"].as_str().unwrap_or("");
        assert!(
            text.starts_with('.'),
            "output made before the cancel is kept: {c}"
        );
        let (_, on_a) = get(&a, "ka", &format!("/v1/responses/{id}")).await;
        assert_eq!(json_of(&on_a)["status"], "cancelled");
        assert_eq!(json_of(&on_a)["output"], c["output"]);
        // Cancelling again, through either host, changes nothing (sessions.md:95).
        for h in [&a, &b] {
            let (st, again) = call(
                h,
                "ka",
                "POST",
                &format!("/v1/responses/{id}/cancel"),
                None,
                &Value::Null,
            )
            .await;
            assert_eq!(st, 200);
            assert_eq!(json_of(&again)["status"], "cancelled");
        }
        // The session continues through B now, with A's turn in its history.
        let (st, next) = call(
            &b,
            "ka",
            "POST",
            "/v1/responses",
            None,
            &json!({"input": "next", "previous_response_id": id}),
        )
        .await;
        assert_eq!(st, 200, "{next}");
        let next = json_of(&next);
        assert_eq!(next["metadata"]["session_id"], sid.as_str());
        let (_, turns) = get(&a, "ka", &format!("/v1/sessions/{sid}/turns")).await;
        assert!(turns.contains(&id), "{turns}");
        eventually("A sees B's turn", || async {
            let (_, turns) = get(&a, "ka", &format!("/v1/sessions/{sid}/turns")).await;
            turns.contains(next["id"].as_str().unwrap())
        })
        .await;
    }

    /// sessions.md:87-96 (`POST /v1/sessions/{id}/cancel` stops what runs there), sessions.md
    /// §6 (deleting a session "MUST cancel any in-flight task in the session first, and MUST
    /// make the session unreadable"), tasks.md §7 (deleting a response "MUST NOT" cancel it):
    /// through host B, of tasks running on host A.
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn sessions_and_responses_cancelled_or_deleted_through_another_host() {
        let (_, a, b) = two_hosts().await;
        let start = |h| async move {
            let (_, t) = call(
                h,
                "ka",
                "POST",
                "/v1/responses",
                None,
                &json!({"input": "wait", "background": true}),
            )
            .await;
            let t = json_of(&t);
            (
                t["id"].as_str().unwrap().to_owned(),
                t["metadata"]["session_id"].as_str().unwrap().to_owned(),
            )
        };
        let status_of = |h, id: String| async move {
            let (st, t) = get(h, "ka", &format!("/v1/responses/{id}")).await;
            (
                st,
                if st == 200 {
                    json_of(&t)["status"].as_str().unwrap().to_owned()
                } else {
                    t
                },
            )
        };
        // Cancelling the session through B stops A's task.
        let (id, sid) = start(&a).await;
        eventually("B knows A's task", || async {
            b.svc.with_server(|s, _| s.running_tasks()) == 0
                && status_of(&b, id.clone()).await.0 == 200
        })
        .await;
        let (st, c) = call(
            &b,
            "ka",
            "POST",
            &format!("/v1/sessions/{sid}/cancel"),
            None,
            &Value::Null,
        )
        .await;
        assert_eq!(st, 200, "{c}");
        assert_eq!(json_of(&c)["cancelled"][0], id.as_str());
        eventually("A's task cancelled", || async {
            status_of(&a, id.clone()).await.1 == "cancelled"
        })
        .await;
        // Deleting a response through B leaves A's task running; it is gone after.
        let (id, _) = start(&a).await;
        let (st, _) = call(
            &b,
            "ka",
            "DELETE",
            &format!("/v1/responses/{id}"),
            None,
            &Value::Null,
        )
        .await;
        assert_eq!(st, 200);
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert_eq!(
            a.svc.with_server(|s, _| s.running_tasks()),
            1,
            "still running on A"
        );
        assert_eq!(status_of(&b, id.clone()).await.0, 404);
        // Deleting a session through B cancels A's task first; the session is unreadable on both.
        let (id2, sid2) = start(&a).await;
        let (st, _) = call(
            &b,
            "ka",
            "DELETE",
            &format!("/v1/sessions/{sid2}"),
            None,
            &Value::Null,
        )
        .await;
        assert_eq!(st, 200);
        eventually("A's task stopped", || async {
            a.svc.with_server(|s, _| s.running_tasks()) == 1
        })
        .await;
        for h in [&a, &b] {
            eventually("the session unreadable", || async {
                get(h, "ka", &format!("/v1/sessions/{sid2}")).await.0 == 404
            })
            .await;
            eventually("its task unreadable", || async {
                status_of(h, id2.clone()).await.0 == 404
            })
            .await;
        }
    }

    /// lifecycle.md §5: a server "MUST NOT run two tasks concurrently in the same session";
    /// "a second task for a busy session MUST fail with 409 and code session_busy". Two
    /// continuations of one idle session through two hosts at once: one runs, one is refused.
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn two_hosts_continuing_one_session_at_once_run_one_task() {
        let (runs, a, b) = two_hosts().await;
        // Each racing task runs 1 s: the slower request claims while the faster one's task
        // still runs (on a loaded machine too).
        let mut prev = {
            let (_, t) = call(
                &a,
                "ka",
                "POST",
                "/v1/responses",
                None,
                &json!({"input": "first"}),
            )
            .await;
            json_of(&t)["id"].as_str().unwrap().to_owned()
        };
        for _ in 0..2 {
            let next =
                json!({"input": "wait 1000", "previous_response_id": prev, "background": true});
            let (x, y) = tokio::join!(
                call(&a, "ka", "POST", "/v1/responses", None, &next),
                call(&b, "ka", "POST", "/v1/responses", None, &next),
            );
            let mut codes = [x.0, y.0];
            codes.sort_unstable();
            assert_eq!(codes, [200, 409], "{x:?} {y:?}");
            let (ok, busy) = if x.0 == 200 { (x, y) } else { (y, x) };
            assert_eq!(json_of(&busy.1)["error"]["code"], "session_busy");
            prev = json_of(&ok.1)["id"].as_str().unwrap().to_owned();
            // Once it has ended, the session takes the next task, through either host.
            eventually("the task ends", || async {
                let (_, t) = get(&b, "ka", &format!("/v1/responses/{prev}")).await;
                json_of(&t)["status"] == "completed"
            })
            .await;
        }
        assert_eq!(runs.load(Ordering::SeqCst), 3);
    }

    /// streaming.md:121-124 (the terminal event carries the whole response): a finished task
    /// made on A with `stream: true` is replayed as a stream through B for its key.
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn a_finished_task_is_streamed_again_through_another_host() {
        let (runs, a, b) = two_hosts().await;
        let body = json!({"input": "stream me", "stream": true});
        let (st, live) = call(&a, "ka", "POST", "/v1/responses", Some("s1"), &body).await;
        assert_eq!(st, 200);
        assert!(live.contains("response.completed"), "{live}");
        let (st, replay) = call(&b, "ka", "POST", "/v1/responses", Some("s1"), &body).await;
        assert_eq!(st, 200);
        let last = |s: &str| -> Value {
            let data = s
                .lines()
                .filter_map(|l| l.strip_prefix("data: "))
                .next_back()
                .unwrap();
            json_of(data)
        };
        let (x, y) = (last(&live), last(&replay));
        assert_eq!(y["type"], "response.completed", "{replay}");
        assert_eq!(x["response"]["id"], y["response"]["id"]);
        assert_eq!(x["response"]["output"], y["response"]["output"]);
        assert_eq!(runs.load(Ordering::SeqCst), 1);
    }

    /// security.md §2 (a principal never reaches another's objects): through the shared
    /// store too. Bob cannot read, cancel or list Alice's task made on the other host, and
    /// the same key is his own (keys are per principal).
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn each_principal_sees_only_its_own_across_hosts() {
        let (runs, a, b) = two_hosts().await;
        let body = json!({"input": "mine"});
        let (_, t) = call(&a, "ka", "POST", "/v1/responses", Some("same"), &body).await;
        let t = json_of(&t);
        let id = t["id"].as_str().unwrap();
        let sid = t["metadata"]["session_id"].as_str().unwrap();
        for (m, path) in [
            ("GET", format!("/v1/responses/{id}")),
            ("POST", format!("/v1/responses/{id}/cancel")),
            ("GET", format!("/v1/sessions/{sid}")),
        ] {
            let (st, e) = call(&b, "kb", m, &path, None, &Value::Null).await;
            assert_eq!(st, 404, "{m} {path}: {e}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        let (_, l) = get(&b, "kb", "/v1/sessions").await;
        assert!(!l.contains(sid), "{l}");
        let (st, his) = call(&b, "kb", "POST", "/v1/responses", Some("same"), &body).await;
        assert_eq!(st, 200);
        assert_ne!(json_of(&his)["id"], t["id"], "Bob's key is not Alice's");
        assert_eq!(runs.load(Ordering::SeqCst), 2);
    }

    /// lifecycle.md §3 (every task reaches a terminal state): a task whose host is gone (its
    /// connection to the database closed) is read `failed` by the others, never run again.
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn a_task_of_a_host_that_is_gone_is_read_failed() {
        let (runs, a, b) = two_hosts().await;
        let (_, t) = call(
            &a,
            "ka",
            "POST",
            "/v1/responses",
            None,
            &json!({"input": "wait", "background": true}),
        )
        .await;
        let id = json_of(&t)["id"].as_str().unwrap().to_owned();
        let (_, got) = get(&b, "ka", &format!("/v1/responses/{id}")).await;
        assert_eq!(json_of(&got)["status"], "in_progress");
        // Host A's marker connection dies (as with a SIGKILL of its process).
        let mark = format!("harness-uhp {}", a.store.host());
        let pool = b.store.pg().pool().clone();
        b.store
            .pg()
            .run(async move {
                let c = pool.get().await?;
                c.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1",
                    &[&mark],
                )
                .await?;
                Ok(())
            })
            .await
            .unwrap();
        eventually("B reads the task failed", || async {
            let (_, got) = get(&b, "ka", &format!("/v1/responses/{id}")).await;
            json_of(&got)["status"] == "failed"
        })
        .await;
        assert_eq!(runs.load(Ordering::SeqCst), 1);
    }
}

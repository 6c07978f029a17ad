//! tasks.md §6 "Idempotency" (spec/uhp-2026-08-11) and [spec] "Retry without running the agent
//! twice": the create is sent again only with the same key, and never once the task's id is known.
//! Quotes: [spec] is spec/uhp-harnessclientprotocol.txt; [S] is the protocol digest in
//! research/uhp.md.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::time::{Duration, Instant};

use common::{client, created_with_id, events, json_head, server, sse_head};
use harness_uhp::ResponseStatus;
use harness_uhp::client::{ClientRequest, RequestKind, TaskEvent};

/// Dropped before `response.created`: the id is unknown, so the create is sent again — with
/// the same key, so the server returns the first request's task instead of running another.
#[test]
fn dropped_before_created_resends_the_create_with_the_same_key() {
    let now = Instant::now();
    let mut c = client();
    c.start(now);
    let t1 = c.poll_transmit().unwrap();
    c.handle_head(now, t1.id, 200, &sse_head());
    c.handle_data(now, t1.id, b": keep-alive\n\n");
    c.handle_transport_error(now, t1.id);
    let at = match events(&mut c).as_slice() {
        [
            TaskEvent::Retrying {
                kind: RequestKind::Create,
                at,
                ..
            },
        ] => *at,
        e => panic!("{e:?}"),
    };
    c.handle_timeout(at);
    let t2 = c.poll_transmit().unwrap();
    assert_eq!(t2.kind, RequestKind::Create);
    assert_eq!(
        t2.request.headers()["idempotency-key"],
        t1.request.headers()["idempotency-key"]
    );
    assert_eq!(c.creates_sent(), 2);
}

/// `start` is the one way in: calling it again (a retry already scheduled, or a stream open)
/// sends nothing — the backoff the policy chose is not cut short by a second create.
#[test]
fn start_twice_sends_one_create() {
    let now = Instant::now();
    let mut c = client();
    c.start(now);
    c.start(now);
    let t = c.poll_transmit().unwrap();
    assert!(c.poll_transmit().is_none());
    c.handle_transport_error(now, t.id); // a retry is scheduled
    let at = c.poll_timeout().unwrap();
    c.start(now);
    assert!(c.poll_transmit().is_none());
    assert_eq!(c.creates_sent(), 1);
    c.handle_timeout(at);
    assert_eq!(c.poll_transmit().unwrap().kind, RequestKind::Create);
    assert_eq!(c.creates_sent(), 2);
}

/// Found by `never_runs_the_task_twice`: a second head for one answer (a driver bug) turned
/// a live stream into a JSON body, and the connection's loss then re-sent the create for a
/// task whose id was known. A head is taken once; and a task whose id is known is read back,
/// never created again.
#[test]
fn a_second_head_for_one_answer_is_ignored() {
    let now = Instant::now();
    let mut c = client();
    c.start(now);
    let t = c.poll_transmit().unwrap();
    c.handle_head(now, t.id, 200, &sse_head());
    c.handle_data(now, t.id, &created_with_id("resp_1"));
    c.handle_head(now, t.id, 503, &json_head());
    c.handle_data(now, t.id, b"data: {\"type\":\"response.in_progress\"");
    c.handle_transport_error(now, t.id);
    let next = c.poll_transmit().unwrap();
    assert_eq!(next.kind, RequestKind::Retrieve);
    assert_eq!(c.creates_sent(), 1);
}

mod driven_by_anything {
    //! The task client driven by arbitrary answers in arbitrary order (to current, stale and
    //! cancel requests alike): [spec] "Retry without running the agent twice".
    use super::*;
    use proptest::prelude::*;

    #[derive(Clone, Debug)]
    enum Op {
        Start,
        Cancel,
        Head(usize, u16, bool, Option<u8>),
        Data(usize, u8, usize, usize),
        End(usize),
        TransportError(usize),
        Advance(u16),
    }

    fn op() -> impl Strategy<Value = Op> {
        let status = prop::sample::select(vec![200u16, 200, 200, 404, 409, 429, 500, 501, 503]);
        prop_oneof![
            Just(Op::Start),
            Just(Op::Cancel),
            (
                any::<usize>(),
                status,
                any::<bool>(),
                prop::option::of(0u8..120)
            )
                .prop_map(|(r, s, sse, ra)| Op::Head(r, s, sse, ra)),
            (any::<usize>(), 0u8..5, any::<usize>(), 1usize..400)
                .prop_map(|(r, w, skip, n)| Op::Data(r, w, skip, n)),
            any::<usize>().prop_map(Op::End),
            any::<usize>().prop_map(Op::TransportError),
            (0u16..200).prop_map(Op::Advance),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

        /// Whatever the network does: no create once the task's id is known (a dropped
        /// stream is finished from the stored response), every create carries the one key,
        /// at most the policy's attempts are made, and nothing is sent or timed after the
        /// task finished or failed.
        #[test]
        fn never_runs_the_task_twice(ops in prop::collection::vec(op(), 1..60)) {
            let stream = server().to_sse();
            let done = serde_json::to_vec(server().response()).unwrap();
            let mut running = server().response().clone();
            running.status = ResponseStatus::InProgress;
            let running = serde_json::to_vec(&running).unwrap();
            let env = br#"{"error":{"type":"server_error","code":"harness_unavailable","message":"x","param":null}}"#.to_vec();
            let noise: Vec<u8> = (0..255u8).cycle().take(700).collect();
            let sources = [stream, done, running, env, noise];

            let mut now = Instant::now();
            let mut c = client();
            let mut sent: Vec<ClientRequest> = Vec::new();
            let mut key: Option<String> = None;
            let mut id_known = false;
            let mut cursors = std::collections::HashMap::new();
            for op in ops {
                let pick = |r: usize, sent: &[ClientRequest]| (!sent.is_empty()).then(|| sent[r % sent.len()].id);
                match op {
                    Op::Start => c.start(now),
                    Op::Cancel => c.cancel(now),
                    Op::Head(r, status, sse, ra) => if let Some(id) = pick(r, &sent) {
                        let mut h = if sse { sse_head() } else { json_head() };
                        if let Some(s) = ra {
                            h.insert("retry-after", s.to_string().parse().unwrap());
                        }
                        c.handle_head(now, id, status, &h);
                    },
                    // Each answer's body runs on from where it stopped (its source chosen
                    // by its first piece), now and then jumping ahead (a lost piece).
                    Op::Data(r, w, skip, n) => if let Some(id) = pick(r, &sent) {
                        let (src, pos) = cursors.entry(id).or_insert((usize::from(w), 0));
                        let src = &sources[*src];
                        if skip % 8 == 0 {
                            *pos = (*pos + skip % 200).min(src.len());
                        }
                        let end = (*pos + n).min(src.len());
                        c.handle_data(now, id, &src[*pos..end]);
                        *pos = end;
                    },
                    Op::End(r) => if let Some(id) = pick(r, &sent) { c.handle_end(now, id) },
                    Op::TransportError(r) => if let Some(id) = pick(r, &sent) { c.handle_transport_error(now, id) },
                    Op::Advance(s) => {
                        now += Duration::from_millis(u64::from(s) * 500);
                        c.handle_timeout(now);
                    }
                }
                let over = c.is_finished() || c.is_failed();
                while let Some(t) = c.poll_transmit() {
                    prop_assert!(!over, "sent {:?} after the task ended", t.kind);
                    if t.kind == RequestKind::Create {
                        prop_assert!(!id_known, "a create after the task's id was known");
                        let k = t.request.headers()["idempotency-key"].to_str().unwrap().to_owned();
                        prop_assert_eq!(key.get_or_insert(k.clone()), &k);
                    } else {
                        prop_assert!(c.accumulator().response_id().is_some());
                    }
                    sent.push(t);
                }
                while c.poll_event().is_some() {}
                id_known |= c.accumulator().response_id().is_some();
                prop_assert!(c.creates_sent() <= 5);
                if over {
                    prop_assert_eq!(c.poll_timeout(), None);
                }
            }
        }
    }
}

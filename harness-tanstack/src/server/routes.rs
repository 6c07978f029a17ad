//! The HTTP routes of the router: each reads its request, asks the [`Service`], and sends
//! the answer (JSON) or the stream (SSE).

use std::convert::Infallible;
use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::Response;
use futures::StreamExt;
use http_body_util::BodyExt;

use super::RouterState;
use super::auth::{query_decodes, query_param};
use crate::driver::ConnStream;
use crate::http::{HttpAnswer, request_id};
use crate::log::EventLog;

/// The request id (`with_request_id` already put a safe one in the header).
pub(super) fn rid(headers: &HeaderMap) -> String {
    request_id(headers.get("x-request-id").and_then(|v| v.to_str().ok()))
}

/// "Every HTTP answer of the handler sends the id back in the X-Request-Id header": the
/// client's id when it is a short safe id, else a new UUID, on every answer (the WebSocket
/// upgrade, a wrong method and a bad query string included). axum's own answers (404, 405)
/// get the `{error}` body every answer of the host has.
pub(super) async fn with_request_id(mut req: Request, next: Next) -> Response {
    let id = rid(req.headers());
    let Ok(v) = HeaderValue::from_str(&id) else {
        return next.run(req).await;
    };
    req.headers_mut().insert("x-request-id", v.clone());
    let mut res = next.run(req).await;
    if res.status().as_u16() >= 400 && !is_json(res.headers()) {
        let error = res.status().canonical_reason().unwrap_or("error");
        let body = serde_json::json!({ "error": error.to_ascii_lowercase() }).to_string();
        let (mut parts, _) = res.into_parts();
        parts.headers.remove("content-length");
        parts
            .headers
            .insert("content-type", HeaderValue::from_static("application/json"));
        res = Response::from_parts(parts, Body::from(body));
    }
    res.headers_mut().entry("x-request-id").or_insert(v);
    res
}

fn is_json(headers: &HeaderMap) -> bool {
    headers
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"))
}

pub(super) fn json_answer(a: HttpAnswer) -> Response {
    let mut r = Response::new(Body::from(a.body));
    *r.status_mut() = StatusCode::from_u16(a.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    r.headers_mut()
        .insert("content-type", HeaderValue::from_static("application/json"));
    if let Ok(v) = HeaderValue::from_str(&a.request_id) {
        r.headers_mut().insert("x-request-id", v);
    }
    r
}

fn sse_answer<L: EventLog + 'static>(stream: ConnStream<L>, request_id: &str) -> Response {
    let body = Body::from_stream(stream.map(Ok::<Bytes, Infallible>));
    let mut r = Response::new(body);
    let h = r.headers_mut();
    h.insert(
        "content-type",
        HeaderValue::from_static("text/event-stream"),
    );
    h.insert("cache-control", HeaderValue::from_static("no-cache"));
    // Proxies (nginx) send each event as it comes.
    h.insert("x-accel-buffering", HeaderValue::from_static("no"));
    if let Ok(v) = HeaderValue::from_str(request_id) {
        h.insert("x-request-id", v);
    }
    r
}

/// What every route reads first: the request id, the user (or the refusal), the query.
struct Head {
    rid: String,
    user: Option<String>,
    query: String,
    parts: http::request::Parts,
}

impl Head {
    fn q(&self, name: &str) -> Option<String> {
        query_param(&self.query, name)
    }

    fn header(&self, name: &str) -> Option<&str> {
        self.parts.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

/// Reads the head; a refused user is answered here (`401`/`403 {error}`).
fn head<L: EventLog>(st: &RouterState<L>, parts: http::request::Parts) -> Result<Head, HttpAnswer> {
    let rid = rid(&parts.headers);
    let user = match &st.cfg.auth {
        None => None,
        Some(hook) => match hook(&parts) {
            Ok(u) => Some(u.as_str().to_owned()),
            Err(r) => return Err(HttpAnswer::error(r.status(), r.error(), &rid)),
        },
    };
    let query = parts.uri.query().unwrap_or("");
    // A parameter that does not decode would otherwise read as missing ("threadId is
    // required"): say what is wrong with it instead.
    if !query_decodes(query) {
        return Err(HttpAnswer::error(400, "invalid_query", &rid));
    }
    Ok(Head {
        rid,
        user,
        query: query.to_owned(),
        parts,
    })
}

/// The body, at most `max_body_bytes` (a larger one is `413 {error:"too_large"}` as soon
/// as the limit is passed, nothing more read: a client still writing is not cut off before
/// it can read the answer), each read within `body_timeout` (a body that stalls is `408`).
async fn read_body<L: EventLog>(
    st: &RouterState<L>,
    h: &Head,
    mut body: Body,
) -> Result<Vec<u8>, HttpAnswer> {
    let limit = st.cfg.max_body_bytes;
    let too_large = || HttpAnswer::error(413, "too_large", &h.rid);
    let mut buf = Vec::new();
    loop {
        match tokio::time::timeout(st.cfg.body_timeout, body.frame()).await {
            Err(_) => {
                return Err(HttpAnswer::error(408, "request_timeout", &h.rid));
            }
            Ok(None) => return Ok(buf),
            Ok(Some(Err(_))) => {
                return Err(HttpAnswer::error(400, "unreadable_body", &h.rid));
            }
            Ok(Some(Ok(frame))) => {
                if let Some(d) = frame.data_ref() {
                    if buf.len() + d.len() > limit {
                        return Err(too_large());
                    }
                    buf.extend_from_slice(d);
                }
            }
        }
    }
}

type St<L> = State<Arc<RouterState<L>>>;

macro_rules! try_head {
    ($st:expr, $parts:expr) => {
        match head(&$st, $parts) {
            Ok(h) => h,
            Err(a) => return json_answer(a),
        }
    };
}

/// `GET events?threadId=&v=&from=` (SSE; `Last-Event-ID` first, then `from`).
pub(super) async fn events<L: EventLog + 'static>(State(st): St<L>, req: Request) -> Response {
    let h = try_head!(st, req.into_parts().0);
    let (t, v, from) = (h.q("threadId"), h.q("v"), h.q("from"));
    match st.svc.open_sse(
        t.as_deref(),
        v.as_deref(),
        from.as_deref(),
        h.header("last-event-id"),
        h.user.as_deref(),
        &h.rid,
    ) {
        Ok(s) => sse_answer(s, &h.rid),
        Err(a) => json_answer(a),
    }
}

/// `GET host-events?v=` (SSE).
pub(super) async fn host_events<L: EventLog + 'static>(State(st): St<L>, req: Request) -> Response {
    let h = try_head!(st, req.into_parts().0);
    let (v, from) = (h.q("v"), h.q("from"));
    match st.svc.open_host_events(
        v.as_deref(),
        from.as_deref(),
        h.header("last-event-id"),
        h.user.as_deref(),
        &h.rid,
    ) {
        Ok(s) => sse_answer(s, &h.rid),
        Err(a) => json_answer(a),
    }
}

/// `POST control`: `{threadId, input}` → the receipt.
pub(super) async fn control<L: EventLog + 'static>(State(st): St<L>, req: Request) -> Response {
    let (parts, body) = req.into_parts();
    let h = try_head!(st, parts);
    let body = match read_body(&st, &h, body).await {
        Ok(b) => b,
        Err(a) => return json_answer(a),
    };
    let tp = h.header("traceparent");
    // An input for a thread another host owns goes to it (a shared log), and waits for its
    // answer at most `HostConfig::forward_wait`.
    let deadline = tokio::time::sleep(st.svc.forward_wait());
    json_answer(
        st.svc
            .control_forwarding(h.user.as_deref(), &body, &h.rid, tp, deadline)
            .await,
    )
}

/// `GET snapshot?threadId=`.
pub(super) async fn snapshot<L: EventLog + 'static>(State(st): St<L>, req: Request) -> Response {
    let h = try_head!(st, req.into_parts().0);
    let t = h.q("threadId").unwrap_or_default();
    json_answer(st.svc.snapshot(&t, h.user.as_deref(), &h.rid))
}

/// `GET transcript?threadId=`.
pub(super) async fn transcript<L: EventLog + 'static>(State(st): St<L>, req: Request) -> Response {
    let h = try_head!(st, req.into_parts().0);
    let t = h.q("threadId").unwrap_or_default();
    json_answer(st.svc.transcript(&t, h.user.as_deref(), &h.rid))
}

/// A path under the router that is no route: `404 {error}` (with `X-Request-Id`).
pub(super) async fn not_found(headers: HeaderMap) -> Response {
    json_answer(HttpAnswer::error(404, "not found", &rid(&headers)))
}

/// `GET capabilities` (no user needed: it says what the host is).
pub(super) async fn capabilities<L: EventLog + 'static>(
    State(st): St<L>,
    headers: HeaderMap,
) -> Response {
    json_answer(st.svc.capabilities(&st.cfg.name, &rid(&headers)))
}

/// `POST run`: an AG-UI `RunAgentInput` → the run's plain AG-UI events (SSE).
pub(super) async fn run_post<L: EventLog + 'static>(State(st): St<L>, req: Request) -> Response {
    let (parts, body) = req.into_parts();
    let h = try_head!(st, parts);
    let body = match read_body(&st, &h, body).await {
        Ok(b) => b,
        Err(a) => return json_answer(a),
    };
    // A run for a thread another host owns goes to it (a shared log); this host streams
    // the run from the log once the owner answered, within `HostConfig::forward_wait`.
    let deadline = tokio::time::sleep(st.svc.forward_wait());
    match st
        .svc
        .run_forwarding(
            &body,
            h.user.as_deref(),
            &h.rid,
            h.header("traceparent"),
            deadline,
        )
        .await
    {
        Ok(s) => sse_answer(s, &h.rid),
        Err(a) => json_answer(a),
    }
}

/// `GET run`: with `runId`, `joinRun` (the run's events from its start, SSE; `offset`
/// `-1` or `now`); else with `threadId`, `hydrate` (JSON). `@tanstack/ai-client` sends both
/// to the one URL it POSTs runs to, told apart by their query.
pub(super) async fn run_get<L: EventLog + 'static>(State(st): St<L>, req: Request) -> Response {
    let h = try_head!(st, req.into_parts().0);
    let t = h.q("threadId");
    match (h.q("runId"), t) {
        (Some(r), t) => {
            let offset = h.q("offset");
            match st.svc.join_run(
                t.as_deref(),
                &r,
                offset.as_deref(),
                h.user.as_deref(),
                &h.rid,
            ) {
                Ok(s) => sse_answer(s, &h.rid),
                Err(a) => json_answer(a),
            }
        }
        (None, Some(t)) => json_answer(st.svc.hydrate(&t, h.user.as_deref(), &h.rid)),
        (None, None) => json_answer(HttpAnswer::error(
            400,
            "runId or threadId is missing",
            &h.rid,
        )),
    }
}

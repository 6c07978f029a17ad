//! The route table: a method and a raw request target in, the endpoint it names out.
//!
//! Each path segment is percent-decoded on its own, after the path is split on `/`, and a
//! decoded segment that is empty, `.` or `..`, or holds a `/`, a `\` or a control character is
//! no id at all: the request is answered `404` before any lookup, so no id can address
//! anything outside its own object (files.md §5: "MUST NOT let a container_id / file_id pair
//! traverse outside its container"; the suite's X-08 probes `../` and `..%2f`).

use std::borrow::Cow;

/// An endpoint of the protocol, with its ids decoded.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Route {
    /// `GET /v1/uhp`.
    Discovery,
    /// `GET /v1/harnesses`.
    ListHarnesses,
    /// `POST /v1/harnesses`.
    CreateHarness,
    /// `GET /v1/harnesses/{id}`.
    GetHarness(String),
    /// `PUT /v1/harnesses/{id}`.
    UpdateHarness(String),
    /// `DELETE /v1/harnesses/{id}`.
    DeleteHarness(String),
    /// `GET /v1/harnesses/{id}/models`.
    HarnessModels(String),
    /// `GET /v1/harnesses/{id}/skills/{skill}/files`.
    SkillFiles(String, String),
    /// `GET /v1/models`.
    Models,
    /// `POST /v1/responses`.
    CreateResponse,
    /// `GET /v1/responses/{id}`.
    GetResponse(String),
    /// `DELETE /v1/responses/{id}`.
    DeleteResponse(String),
    /// `GET /v1/responses/{id}/input_items`.
    InputItems(String),
    /// `POST /v1/responses/{id}/cancel`.
    CancelResponse(String),
    /// `GET /v1/sessions`.
    ListSessions,
    /// `GET /v1/sessions/{id}`.
    GetSession(String),
    /// `DELETE /v1/sessions/{id}` and `DELETE /v1/traces/{id}`.
    DeleteSession(String),
    /// `GET /v1/sessions/{id}/turns`.
    SessionTurns(String),
    /// `POST /v1/sessions/{id}/cancel`.
    CancelSession(String),
    /// `POST /v1/sessions/{id}/share`.
    Share(String),
    /// `GET /v1/sessions/{id}/share`.
    GetShare(String),
    /// `DELETE /v1/sessions/{id}/share`: revoke.
    RevokeShare(String),
    /// `GET /v1/shared/{token}`: the read-only view of a shared session.
    Shared(String),
    /// `GET /v1/sessions/{id}/files`.
    SessionFiles(String),
    /// `GET /v1/sessions/{id}/files/archive`.
    SessionArchive(String),
    /// `POST /v1/files`.
    UploadFile,
    /// `GET /v1/files/{id}`.
    GetFile(String),
    /// `GET /v1/containers/{cid}/files/{fid}/content`.
    FileContent(String, String),
    /// `GET /v1/containers/{cid}/files/{fid}/pdf`.
    FilePdf(String, String),
}

/// Why a target names no endpoint.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RouteError {
    /// No such path (or an id that is no id).
    NotFound,
    /// The path exists but not with this method; the methods it takes.
    Method(&'static str),
}

/// The route of `method` and `target` (a path, with or without `?query`).
///
/// ```
/// use harness_uhp::server::route::{Route, RouteError, route};
///
/// assert_eq!(route("GET", "/v1/responses/resp_1?x=1"), Ok(Route::GetResponse("resp_1".into())));
/// assert_eq!(route("GET", "/v1/containers/c/files/..%2f..%2fetc%2fpasswd/content"), Err(RouteError::NotFound));
/// assert_eq!(route("GET", "/v1/containers/c/files/../../etc/passwd/content"), Err(RouteError::NotFound));
/// assert_eq!(route("PATCH", "/v1/uhp"), Err(RouteError::Method("GET")));
/// ```
pub fn route(method: &str, target: &str) -> Result<Route, RouteError> {
    let path = target.split(['?', '#']).next().unwrap_or("");
    let Some(rest) = path.strip_prefix("/v1/") else {
        return Err(RouteError::NotFound);
    };
    let rest = rest.strip_suffix('/').unwrap_or(rest);
    let raw: Vec<&str> = rest.split('/').collect();
    if raw.len() > 8 {
        return Err(RouteError::NotFound);
    }
    let mut seg = Vec::with_capacity(raw.len());
    for s in raw {
        seg.push(decode_segment(s).ok_or(RouteError::NotFound)?);
    }
    let s: Vec<&str> = seg.iter().map(|c| c.as_ref()).collect();
    let id = |i: usize| s[i].to_owned();
    let m = method;
    let pick = |allow: &'static str, r: Option<Route>| r.ok_or(RouteError::Method(allow));
    match s.as_slice() {
        ["uhp"] => pick("GET", (m == "GET").then_some(Route::Discovery)),
        ["harnesses"] => pick(
            "GET, POST",
            match m {
                "GET" => Some(Route::ListHarnesses),
                "POST" => Some(Route::CreateHarness),
                _ => None,
            },
        ),
        ["harnesses", _] => pick(
            "GET, PUT, DELETE",
            match m {
                "GET" => Some(Route::GetHarness(id(1))),
                "PUT" => Some(Route::UpdateHarness(id(1))),
                "DELETE" => Some(Route::DeleteHarness(id(1))),
                _ => None,
            },
        ),
        ["harnesses", _, "models"] => {
            pick("GET", (m == "GET").then(|| Route::HarnessModels(id(1))))
        }
        ["harnesses", _, "skills", _, "files"] => {
            pick("GET", (m == "GET").then(|| Route::SkillFiles(id(1), id(3))))
        }
        ["models"] => pick("GET", (m == "GET").then_some(Route::Models)),
        ["responses"] => pick("POST", (m == "POST").then_some(Route::CreateResponse)),
        ["responses", _] => pick(
            "GET, DELETE",
            match m {
                "GET" => Some(Route::GetResponse(id(1))),
                "DELETE" => Some(Route::DeleteResponse(id(1))),
                _ => None,
            },
        ),
        ["responses", _, "input_items"] => {
            pick("GET", (m == "GET").then(|| Route::InputItems(id(1))))
        }
        ["responses", _, "cancel"] => {
            pick("POST", (m == "POST").then(|| Route::CancelResponse(id(1))))
        }
        ["sessions"] => pick("GET", (m == "GET").then_some(Route::ListSessions)),
        ["sessions", _] => pick(
            "GET, DELETE",
            match m {
                "GET" => Some(Route::GetSession(id(1))),
                "DELETE" => Some(Route::DeleteSession(id(1))),
                _ => None,
            },
        ),
        ["traces", _] => pick(
            "DELETE",
            (m == "DELETE").then(|| Route::DeleteSession(id(1))),
        ),
        ["sessions", _, "turns"] => pick("GET", (m == "GET").then(|| Route::SessionTurns(id(1)))),
        ["sessions", _, "cancel"] => {
            pick("POST", (m == "POST").then(|| Route::CancelSession(id(1))))
        }
        ["sessions", _, "share"] => pick(
            "GET, POST, DELETE",
            match m {
                "POST" => Some(Route::Share(id(1))),
                "GET" => Some(Route::GetShare(id(1))),
                "DELETE" => Some(Route::RevokeShare(id(1))),
                _ => None,
            },
        ),
        ["shared", _] => pick("GET", (m == "GET").then(|| Route::Shared(id(1)))),
        ["sessions", _, "files"] => pick("GET", (m == "GET").then(|| Route::SessionFiles(id(1)))),
        ["sessions", _, "files", "archive"] => {
            pick("GET", (m == "GET").then(|| Route::SessionArchive(id(1))))
        }
        ["files"] => pick("POST", (m == "POST").then_some(Route::UploadFile)),
        ["files", _] => pick("GET", (m == "GET").then(|| Route::GetFile(id(1)))),
        ["containers", _, "files", _, "content"] => pick(
            "GET",
            (m == "GET").then(|| Route::FileContent(id(1), id(3))),
        ),
        ["containers", _, "files", _, "pdf"] => {
            pick("GET", (m == "GET").then(|| Route::FilePdf(id(1), id(3))))
        }
        _ => Err(RouteError::NotFound),
    }
}

/// One path segment, percent-decoded; `None` when it is not a usable name: empty, a
/// dot-segment, not UTF-8 after decoding, a bad escape, or holding `/`, `\` or a control
/// character.
pub fn decode_segment(raw: &str) -> Option<Cow<'_, str>> {
    let decoded: Cow<'_, str> = if raw.contains('%') {
        let b = raw.as_bytes();
        let mut out = Vec::with_capacity(b.len());
        let mut i = 0;
        while i < b.len() {
            if b[i] == b'%' {
                let hex = b.get(i + 1..i + 3)?;
                let hi = char::from(hex[0]).to_digit(16)?;
                let lo = char::from(hex[1]).to_digit(16)?;
                out.push(u8::try_from(hi * 16 + lo).ok()?);
                i += 3;
            } else {
                out.push(b[i]);
                i += 1;
            }
        }
        Cow::Owned(String::from_utf8(out).ok()?)
    } else {
        Cow::Borrowed(raw)
    };
    let bad = decoded.is_empty()
        || decoded == "."
        || decoded == ".."
        || decoded.len() > 256
        || decoded
            .chars()
            .any(|c| c == '/' || c == '\\' || c.is_control());
    (!bad).then_some(decoded)
}

/// The query parameter `name`, percent-decoded (`+` is a space), if present.
pub fn query_param(target: &str, name: &str) -> Option<String> {
    let q = target.split_once('?')?.1;
    let q = q.split('#').next().unwrap_or("");
    for pair in q.split('&') {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        if k == name {
            let v = v.replace('+', " ");
            return Some(match decode_segment(&v) {
                Some(d) => d.into_owned(),
                None if v.is_empty() => String::new(),
                None => return None,
            });
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_endpoint_of_the_index() {
        // index.md, "Endpoint summary".
        let table = [
            ("GET", "/v1/uhp", Route::Discovery),
            ("GET", "/v1/harnesses", Route::ListHarnesses),
            ("GET", "/v1/harnesses/h", Route::GetHarness("h".into())),
            ("GET", "/v1/models", Route::Models),
            (
                "GET",
                "/v1/harnesses/h/models",
                Route::HarnessModels("h".into()),
            ),
            ("POST", "/v1/responses", Route::CreateResponse),
            ("GET", "/v1/responses/r", Route::GetResponse("r".into())),
            (
                "GET",
                "/v1/responses/r/input_items",
                Route::InputItems("r".into()),
            ),
            (
                "POST",
                "/v1/responses/r/cancel",
                Route::CancelResponse("r".into()),
            ),
            (
                "DELETE",
                "/v1/responses/r",
                Route::DeleteResponse("r".into()),
            ),
            (
                "POST",
                "/v1/sessions/s/cancel",
                Route::CancelSession("s".into()),
            ),
            ("GET", "/v1/sessions", Route::ListSessions),
            ("GET", "/v1/sessions/s", Route::GetSession("s".into())),
            (
                "GET",
                "/v1/sessions/s/turns",
                Route::SessionTurns("s".into()),
            ),
            ("POST", "/v1/files", Route::UploadFile),
            (
                "GET",
                "/v1/sessions/s/files",
                Route::SessionFiles("s".into()),
            ),
            (
                "GET",
                "/v1/sessions/s/files/archive",
                Route::SessionArchive("s".into()),
            ),
            (
                "GET",
                "/v1/containers/c/files/f/content",
                Route::FileContent("c".into(), "f".into()),
            ),
            (
                "GET",
                "/v1/containers/c/files/f/pdf",
                Route::FilePdf("c".into(), "f".into()),
            ),
            ("POST", "/v1/harnesses", Route::CreateHarness),
            ("PUT", "/v1/harnesses/h", Route::UpdateHarness("h".into())),
            (
                "DELETE",
                "/v1/harnesses/h",
                Route::DeleteHarness("h".into()),
            ),
            ("POST", "/v1/sessions/s/share", Route::Share("s".into())),
            ("GET", "/v1/sessions/s/share", Route::GetShare("s".into())),
            ("DELETE", "/v1/traces/s", Route::DeleteSession("s".into())),
        ];
        for (m, p, want) in table {
            assert_eq!(route(m, p), Ok(want), "{m} {p}");
        }
    }

    #[test]
    fn traversal_is_no_id() {
        for p in [
            "/v1/containers/c/files/../content",
            "/v1/containers/c/files/%2e%2e/content",
            "/v1/containers/c/files/..%2f..%2fetc%2fpasswd/content",
            "/v1/containers/c/files/a%5cb/content",
            "/v1/containers/c/files/a%00/content",
            "/v1/containers/c/files/%zz/content",
            "/v1/containers/c/files//content",
        ] {
            assert_eq!(route("GET", p), Err(RouteError::NotFound), "{p}");
        }
    }

    #[test]
    fn query_params() {
        assert_eq!(
            query_param("/v1/sessions?limit=5&cursor=", "limit"),
            Some("5".into())
        );
        assert_eq!(
            query_param("/v1/sessions?limit=5&cursor=", "cursor"),
            Some(String::new())
        );
        assert_eq!(
            query_param("/v1/sessions?harness=a%20b", "harness"),
            Some("a b".into())
        );
        assert_eq!(query_param("/v1/sessions", "limit"), None);
    }
}

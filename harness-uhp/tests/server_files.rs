//! The server against files.md (spec/uhp-2026-08-11): §1 files in (inline, upload), §2
//! artifacts out, §3 downloading, §3.1 previews, §4 the archive, §5 retention and scope.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod server_rig;

use base64::Engine;
use harness_core::message::Part;
use http::HeaderMap;
use serde_json::json;
use server_rig::{ALICE, BOB, Rig};

fn upload(r: &mut Rig, token: &str, name: &str, bytes: &[u8]) -> server_rig::Answer {
    let mut h = HeaderMap::new();
    h.insert("authorization", format!("Bearer {token}").parse().unwrap());
    h.insert(
        "content-type",
        "multipart/form-data; boundary=BOUND".parse().unwrap(),
    );
    let mut body = format!(
        "--BOUND\r\nContent-Disposition: form-data; name=\"file\"; filename=\"{name}\"\r\nContent-Type: text/plain\r\n\r\n"
    )
    .into_bytes();
    body.extend_from_slice(bytes);
    body.extend_from_slice(b"\r\n--BOUND--\r\n");
    r.send_with("POST", "/v1/files", &h, &body).now()
}

/// §1: "A server MUST accept both forms": inline data URLs and uploads by `file_id`, each
/// reaching the agent as a file part.
#[test]
fn files_in_inline_and_by_upload() {
    let mut r = Rig::new();
    let data = base64::engine::general_purpose::STANDARD.encode("The secret token is t-1.");
    let (_, turn) = r.start(json!({"input": [{"role": "user", "content": [
        {"type": "input_text", "text": "Read it."},
        {"type": "input_file", "filename": "token.txt", "file_data": format!("data:text/plain;base64,{data}")},
        {"type": "input_image", "image_url": "data:image/png;base64,iVBORw0KGgo="}
    ]}]}));
    let files: Vec<_> = turn.start.inputs[0]
        .parts
        .iter()
        .filter_map(|p| match p {
            Part::File(f) => Some(f),
            _ => None,
        })
        .collect();
    assert_eq!(files[0].name, "token.txt");
    assert_eq!(
        files[0].bytes.as_deref(),
        Some(&b"The secret token is t-1."[..])
    );
    assert_eq!(files[1].mime, "image/png");

    let up = upload(&mut r, ALICE, "q3.txt", b"quarterly");
    assert_eq!(up.status, 200);
    let f = up.json();
    assert!(f["id"].as_str().unwrap().starts_with("file_"));
    assert_eq!(
        (f["object"].as_str(), f["bytes"].as_u64()),
        (Some("file"), Some(9))
    );
    let (_, turn) = r.start(json!({"input": [{"role": "user", "content": [
        {"type": "input_text", "text": "Summarise"}, {"type": "input_file", "file_id": f["id"]}]}]}));
    assert!(
        matches!(&turn.start.inputs[0].parts[1], Part::File(p) if p.bytes.as_deref() == Some(&b"quarterly"[..]))
    );
    // Scope: Bob cannot name Alice's upload (security.md §2).
    let bob = r
        .send_as(
            BOB,
            "POST",
            "/v1/responses",
            Some(json!({"input": [{"role": "user", "content": [
        {"type": "input_file", "file_id": f["id"]}]}]})),
        )
        .now();
    assert_eq!((bob.status, bob.code().as_str()), (404, "file_not_found"));
}

/// §1.2: "MUST reject an oversized upload with 413 and code: file_too_large rather than
/// truncating"; `detail.max_bytes` states the limit (errors.md §3.1).
#[test]
fn an_oversized_upload_is_refused_whole() {
    let mut cfg = server_rig::config();
    cfg.max_upload_bytes = 1000;
    let mut r = Rig::with(cfg);
    let a = upload(&mut r, ALICE, "big.bin", &[7u8; 1001]);
    assert_eq!((a.status, a.code().as_str()), (413, "file_too_large"));
    assert_eq!(a.json()["error"]["detail"]["max_bytes"], 1000);
    assert_eq!(upload(&mut r, ALICE, "ok.bin", &[7u8; 1000]).status, 200);
    let mut h = HeaderMap::new();
    h.insert("authorization", format!("Bearer {ALICE}").parse().unwrap());
    h.insert("content-type", "application/json".parse().unwrap());
    assert_eq!(
        r.send_with("POST", "/v1/files", &h, b"{}").now().code(),
        "invalid_input"
    );
}

/// §2: artifacts as annotations on the message and in the session's listing, "including
/// files from earlier tasks"; §3: raw bytes, the file's own type, `Content-Disposition`,
/// "MUST set X-Content-Type-Options: nosniff"; §3.1: `501 preview_unavailable`; §4 the archive.
#[test]
fn artifacts_out() {
    let mut r = Rig::new();
    let (a, _) = r.start(json!({"input": "write"}));
    let now = r.now();
    r.server
        .turn_write_file(now, &a, "notes/x.html", b"<script>1</script>".to_vec())
        .unwrap();
    r.text(&a, "Wrote it.");
    r.end(&a);
    let first = r.call("GET", &format!("/v1/responses/{a}"), None).json();
    let ann = &first["output"][0]["content"][0]["annotations"][0];
    assert_eq!(ann["type"], "container_file_citation");
    assert_eq!(ann["filename"], "notes/x.html");
    let (b, _) = r.start(json!({"input": "more", "previous_response_id": a}));
    let now = r.now();
    r.server
        .turn_write_file(now, &b, "y.txt", b"why".to_vec())
        .unwrap();
    r.end(&b);
    let sid = first["metadata"]["session_id"].as_str().unwrap();
    let files = r
        .call("GET", &format!("/v1/sessions/{sid}/files"), None)
        .json();
    let names: Vec<&str> = files["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["filename"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["notes/x.html", "y.txt"], "earlier tasks' files too");
    let f = &files["files"][0];
    let (cid, fid) = (
        f["container_id"].as_str().unwrap(),
        f["id"].as_str().unwrap(),
    );
    assert_eq!(
        ann["download_url"].as_str().unwrap(),
        format!("/v1/containers/{cid}/files/{fid}/content")
    );
    let d = r.call(
        "GET",
        &format!("/v1/containers/{cid}/files/{fid}/content"),
        None,
    );
    assert_eq!(d.status, 200);
    assert_eq!(d.body, b"<script>1</script>", "raw, never JSON");
    assert_eq!(d.header("content-type"), "text/html; charset=utf-8");
    assert_eq!(d.header("x-content-type-options"), "nosniff");
    assert!(
        d.header("content-disposition")
            .starts_with("attachment; filename=\"x.html\"")
    );
    assert!(d.header("content-security-policy").contains("sandbox"));
    let p = r.call(
        "GET",
        &format!("/v1/containers/{cid}/files/{fid}/pdf"),
        None,
    );
    assert_eq!((p.status, p.code().as_str()), (501, "preview_unavailable"));
    let t = r.call("GET", &format!("/v1/sessions/{sid}/files/archive"), None);
    assert_eq!(t.header("content-type"), "application/x-tar");
    assert!(t.body.windows(6).any(|w| w == b"y.txt\0") && t.body.windows(3).any(|w| w == b"why"));
}

/// §5: "A file_id from another principal MUST return 404, never the bytes"; "MUST NOT let a
/// container_id / file_id pair traverse outside its container" (the suite's X-08 probes and
/// more); the agent cannot write outside its folder either.
#[test]
fn scope_and_traversal() {
    let mut r = Rig::new();
    let (a, _) = r.start(json!({"input": "write"}));
    let now = r.now();
    let f = r
        .server
        .turn_write_file(now, &a, "secret.txt", b"alice's".to_vec())
        .unwrap();
    let (cid, fid) = (
        f["container_id"].as_str().unwrap().to_owned(),
        f["id"].as_str().unwrap().to_owned(),
    );
    let bob = r
        .send_as(
            BOB,
            "GET",
            &format!("/v1/containers/{cid}/files/{fid}/content"),
            None,
        )
        .now();
    assert_eq!((bob.status, bob.code().as_str()), (404, "file_not_found"));
    assert!(!String::from_utf8_lossy(&bob.body).contains("alice's"));
    for probe in [
        "../../etc/passwd",
        "..%2f..%2fetc%2fpasswd",
        "%2e%2e%2f%2e%2e%2fetc%2fpasswd",
        "..%5c..%5cwin.ini",
        "secret.txt",
        "%00",
    ] {
        let a = r.call(
            "GET",
            &format!("/v1/containers/{cid}/files/{probe}/content"),
            None,
        );
        assert!([400, 403, 404].contains(&a.status), "{probe}: {}", a.status);
        assert!(
            !String::from_utf8_lossy(&a.body).contains("alice's"),
            "{probe}"
        );
    }
    for bad in ["../escape.txt", "/etc/passwd", "a/../../b", "a\\b", ""] {
        let now = r.now();
        assert!(
            r.server
                .turn_write_file(now, &a, bad, b"x".to_vec())
                .is_err(),
            "{bad}"
        );
    }
}

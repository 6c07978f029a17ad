//! The server against harnesses.md (spec/uhp-2026-08-11): §1 discovering, §2 the object,
//! §3 models, §4 tools and skills, §5 managing.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod server_rig;

use serde_json::{Value, json};
use server_rig::{BOB, Rig};

fn skill() -> Value {
    json!({"name": "manual", "enabled": true, "files": [
        {"path": "SKILL.md", "content": "---\nname: manual\n---\n"},
        {"path": "references/deep/codes.md", "content": "codes"},
        {"path": "assets/logo.png", "content_b64": "iVBORw0KGgo="}
    ]})
}

/// §1–§2: the list and each object (`chrn_`, `object`, `name`, `base`, `createdAt`, camelCase
/// fields); §3: `available` is a boolean, computed from what the model serves.
#[test]
fn discovering_harnesses_and_models() {
    let mut r = Rig::new();
    let list = r.call("GET", "/v1/harnesses", None).json();
    let hs = list["harnesses"].as_array().unwrap();
    assert_eq!(hs.len(), 2);
    for h in hs {
        assert!(h["id"].as_str().unwrap().starts_with("chrn_"));
        assert_eq!(h["object"], "harness");
        for f in [
            "name",
            "base",
            "baseLabel",
            "defaultModel",
            "systemPrompt",
            "mcpServers",
            "skills",
            "disabledTools",
            "createdAt",
        ] {
            assert!(h.get(f).is_some(), "{f}");
        }
        let one = r
            .call(
                "GET",
                &format!("/v1/harnesses/{}", h["id"].as_str().unwrap()),
                None,
            )
            .json();
        assert_eq!(&one, h);
        let m = r
            .call(
                "GET",
                &format!("/v1/harnesses/{}/models", h["id"].as_str().unwrap()),
                None,
            )
            .json();
        assert_eq!(m["default"], "scripted");
        assert!(
            m["models"]
                .as_array()
                .unwrap()
                .iter()
                .all(|x| x["available"].is_boolean())
        );
    }
    let cat = r.call("GET", "/v1/models", None).json();
    let models = cat["backends"]["harness-rs"]["models"].as_array().unwrap();
    assert_eq!(models.len(), 2);
    assert_eq!(models[0]["default"], true);
}

/// §5.1: create; "base is REQUIRED and MUST be one the server supports; otherwise 422 with
/// code: unsupported_base" (with `detail.supported`); §5.2 update: "MUST NOT change id, base,
/// or createdAt"; §5.3 delete: "MUST NOT delete the sessions or responses that used the
/// harness"; built-in harnesses are read-only; settings reach the agent as `Start.config`.
#[test]
fn managing_harnesses() {
    let mut r = Rig::new();
    let bad = r.call(
        "POST",
        "/v1/harnesses",
        Some(json!({"name": "x", "base": "claude-code"})),
    );
    assert_eq!((bad.status, bad.code().as_str()), (422, "unsupported_base"));
    assert_eq!(
        bad.json()["error"]["detail"]["supported"],
        json!(["faq", "echo"])
    );
    assert_eq!(
        r.call("POST", "/v1/harnesses", Some(json!({"name": "x"})))
            .status,
        400
    );
    let h = r
        .call("POST", "/v1/harnesses", Some(json!({"name": "Research", "base": "echo",
            "system_prompt": "Be brief.", "default_model": "scripted-large", "max_step": 3, "disabled_tools": ["write_file"]})))
        .json();
    let id = h["id"].as_str().unwrap().to_owned();
    assert_eq!(
        (
            h["base"].as_str(),
            h["defaultModel"].as_str(),
            h["maxStep"].as_u64()
        ),
        (Some("echo"), Some("scripted-large"), Some(3))
    );
    let (task, turn) = r.start(json!({"input": "hi", "metadata": {"harness_id": id}}));
    let cfg: Value = serde_json::from_slice(&turn.start.config).unwrap();
    assert_eq!(
        (cfg["system_prompt"].as_str(), cfg["max_step"].as_u64()),
        (Some("Be brief."), Some(3))
    );
    assert_eq!(turn.disabled_tools, ["write_file"]);
    assert_eq!(
        (turn.model.as_str(), turn.base.as_str(), turn.max_step),
        ("scripted-large", "echo", Some(3))
    );
    r.end(&task);
    let changed = r.call(
        "PUT",
        &format!("/v1/harnesses/{id}"),
        Some(json!({"base": "faq"})),
    );
    assert_eq!(changed.status, 400, "the base never changes");
    let up = r
        .call(
            "PUT",
            &format!("/v1/harnesses/{id}"),
            Some(json!({"name": "Renamed", "id": "chrn_other", "createdAt": 1})),
        )
        .json();
    assert_eq!(
        (
            up["id"].as_str(),
            up["name"].as_str(),
            up["createdAt"].clone()
        ),
        (Some(id.as_str()), Some("Renamed"), h["createdAt"].clone())
    );
    assert_eq!(up["systemPrompt"], "Be brief.", "fields not given are kept");
    let d = r.call("DELETE", &format!("/v1/harnesses/{id}"), None);
    assert_eq!(d.status, 200);
    assert_eq!(
        r.call("GET", &format!("/v1/harnesses/{id}"), None).status,
        404
    );
    assert_eq!(
        r.call("GET", &format!("/v1/responses/{task}"), None).status,
        200,
        "history stays"
    );
    let builtin = r.call("GET", "/v1/harnesses", None).json()["harnesses"][0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(
        r.call("DELETE", &format!("/v1/harnesses/{builtin}"), None)
            .code(),
        "insufficient_scope"
    );
    assert_eq!(
        r.send_as(BOB, "GET", "/v1/harnesses", None).now().json()["harnesses"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
}

/// §4.2: "A skill is a folder": nested paths, `content` and `content_b64` kept byte for byte,
/// "MUST reject a path that escapes the folder", "MUST contain a SKILL.md … at configuration
/// time", the whole folder from the skill files endpoint, and a GET/PUT round trip "MUST NOT
/// lose skill contents"; the agent can read the folder (`skills/<name>/…`).
#[test]
fn skills_are_folders() {
    let mut r = Rig::new();
    let h = r
        .call(
            "POST",
            "/v1/harnesses",
            Some(json!({"base": "faq", "skills": [skill()]})),
        )
        .json();
    let id = h["id"].as_str().unwrap().to_owned();
    let files = r
        .call(
            "GET",
            &format!("/v1/harnesses/{id}/skills/manual/files"),
            None,
        )
        .json();
    assert_eq!(files["files"], skill()["files"]);
    let got = r.call("GET", &format!("/v1/harnesses/{id}"), None).json();
    let put = r.call(
        "PUT",
        &format!("/v1/harnesses/{id}"),
        Some(json!({"name": "x", "skills": got["skills"]})),
    );
    assert_eq!(put.status, 200);
    let r2 = r.call(
        "PUT",
        &format!("/v1/harnesses/{id}"),
        Some(json!({"name": "y"})),
    );
    assert_eq!(
        r2.json()["skills"],
        json!([skill()]),
        "an unrelated edit keeps the folder"
    );
    for (bad, why) in [
        (
            json!({"name": "s", "files": [{"path": "notes.md", "content": "x"}]}),
            "no SKILL.md",
        ),
        (
            json!({"name": "s", "files": [{"path": "SKILL.md", "content": "x"}, {"path": "../x", "content": "x"}]}),
            "escapes",
        ),
        (
            json!({"name": "s", "files": [{"path": "/etc/passwd", "content": "x"}, {"path": "SKILL.md"}]}),
            "absolute",
        ),
        (
            json!({"name": "s", "files": [{"path": "SKILL.md", "content_b64": "!!"}]}),
            "not base64",
        ),
        (
            json!({"name": "../s", "files": [{"path": "SKILL.md"}]}),
            "bad name",
        ),
    ] {
        let a = r.call(
            "POST",
            "/v1/harnesses",
            Some(json!({"base": "faq", "skills": [bad]})),
        );
        assert_eq!(
            (a.status, a.code().as_str()),
            (400, "invalid_input"),
            "{why}"
        );
    }
    let short = r
        .call(
            "POST",
            "/v1/harnesses",
            Some(json!({"base": "faq", "skills": [{"name": "one", "content": "# one"}]})),
        )
        .json();
    assert_eq!(short["skills"][0]["files"][0]["path"], "SKILL.md");
    let (task, _) = r.start(json!({"input": "x", "metadata": {"harness_id": id}}));
    assert_eq!(
        r.server
            .turn_read_file(&task, "skills/manual/references/deep/codes.md")
            .as_deref(),
        Some(&b"codes"[..])
    );
    assert_eq!(
        r.server.turn_read_file(&task, "skills/manual/../../x"),
        None
    );
}

/// §4.1: entries kept with `enabled: false` and transport, a disabled one never contacted; an
/// enabled one this server cannot reach does not fail the task and is reported, not silent;
/// credentials never read back (security.md §1); §4.3 `disabledTools` kept.
#[test]
fn mcp_servers_and_disabled_tools() {
    let mut r = Rig::new();
    let h = r
        .call("POST", "/v1/harnesses", Some(json!({"base": "faq", "disabled_tools": ["WebSearch"], "mcp_servers": [
            {"name": "off", "url": "https://a.invalid/mcp", "transport": "http", "enabled": false},
            {"name": "vault", "url": "https://b.invalid/mcp", "auth": "sk-live-123", "headers": {"Authorization": "Bearer z"}}
        ]})))
        .json();
    let text = h.to_string();
    assert!(
        !text.contains("sk-live-123") && !text.contains("Bearer z"),
        "{text}"
    );
    assert_eq!(h["mcpServers"][0]["enabled"], false);
    assert_eq!(h["disabledTools"], json!(["WebSearch"]));
    assert_eq!(
        r.call(
            "POST",
            "/v1/harnesses",
            Some(json!({"base": "faq", "mcp_servers": [{"name": "x"}]}))
        )
        .status,
        400
    );
    let mut body = json!({"input": "x", "metadata": {"harness_id": h["id"]}, "stream": true});
    body["stream"] = json!(true);
    let server_rig::Got::Stream(_, sid) =
        r.send_as(server_rig::ALICE, "POST", "/v1/responses", Some(body))
    else {
        panic!()
    };
    let (turn_id, cfg) = {
        let t = r.turns.last().unwrap();
        (
            t.response_id.clone(),
            serde_json::from_slice::<Value>(&t.start.config).unwrap(),
        )
    };
    assert_eq!(
        cfg["mcp_servers"].as_array().unwrap().len(),
        1,
        "only enabled entries reach the turn"
    );
    r.end(&turn_id);
    let events = server_rig::values(&r.read_stream(sid).0);
    let notices: Vec<&Value> = events.iter().filter(|e| e["type"] == "error").collect();
    assert_eq!(notices.len(), 1);
    assert!(notices[0]["message"].as_str().unwrap().contains("vault"));
    assert_eq!(
        events.last().unwrap()["response"]["status"],
        "completed",
        "not failed"
    );
}

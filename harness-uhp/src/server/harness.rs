//! The harness registry (harnesses.md): the bases this server runs, one built-in configured
//! harness per base (listed first, visible to every principal, read-only), and the
//! configured harnesses principals create, update and delete (class Full).
//!
//! A configured harness is a base plus its settings; the settings reach the agent as its
//! `Start.config` ([`HarnessObject::start_config`]). Enforced here, at configuration time:
//! a base the server supports (`422 unsupported_base`, `detail.supported` listing them), a
//! default model it serves (`422 model_unavailable`), skills that are folders with a
//! `SKILL.md` and no path escaping them (§4.2), MCP entries with a name and a URL (§4.1),
//! `id`, `base` and `createdAt` never changed by an update (§5.2). A credential in an MCP
//! entry (`auth`, or a header that carries one) is kept but never returned (security.md §1):
//! it reads back as `"[redacted]"`, and writing `"[redacted]"` back keeps the stored value.

use std::collections::HashMap;

use base64::Engine;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use super::auth::Principal;
use super::error::ApiError;

/// What a credential reads back as.
pub const REDACTED: &str = "[redacted]";

/// A harness runtime the server can run: its `base` (opaque to clients) and display label.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Base {
    /// The stable id, e.g. `faq`.
    pub base: String,
    /// Its display name.
    pub label: String,
}

/// A skill (schema `Skill`): a folder of files, one of which is `SKILL.md`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Skill {
    /// Its name (the `{skill_id}` of the skill files endpoint).
    pub name: String,
    /// `false` suppresses it.
    #[serde(default = "yes")]
    pub enabled: bool,
    /// The folder's files.
    #[serde(default)]
    pub files: Vec<SkillFile>,
    /// Fields this version does not define, kept.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

fn yes() -> bool {
    true
}

/// One file of a skill folder (schema `SkillFile`): text in `content`, binary in
/// `content_b64`, both kept byte for byte.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SkillFile {
    /// Relative to the skill's folder; nested directories allowed.
    pub path: String,
    /// Text content.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    /// Base64 of binary content.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_b64: Option<String>,
    /// Fields this version does not define, kept.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl SkillFile {
    /// The file's bytes.
    pub fn bytes(&self) -> Vec<u8> {
        match (&self.content, &self.content_b64) {
            (Some(t), _) => t.as_bytes().to_vec(),
            (None, Some(b)) => base64::engine::general_purpose::STANDARD
                .decode(b)
                .unwrap_or_default(),
            (None, None) => Vec::new(),
        }
    }
}

/// A configured harness (schema `Harness`), as the API shows it (camelCase, as the spec
/// keeps it).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HarnessObject {
    /// `chrn_…`.
    pub id: String,
    /// Always `harness`.
    pub object: String,
    /// A label, not an identifier.
    pub name: String,
    /// The runtime.
    pub base: String,
    /// The runtime's display name.
    pub base_label: String,
    /// The model used when a task names none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_model: Option<String>,
    /// Standing instructions.
    #[serde(default)]
    pub system_prompt: String,
    /// MCP servers (kept as given, credentials redacted when shown).
    #[serde(default)]
    pub mcp_servers: Vec<Map<String, Value>>,
    /// Skill folders.
    #[serde(default)]
    pub skills: Vec<Skill>,
    /// Tools withheld from the agent (a hard block: the host refuses them).
    #[serde(default)]
    pub disabled_tools: Vec<String>,
    /// Default step budget.
    #[serde(default)]
    pub max_step: Option<u64>,
    /// Default wall-clock budget.
    #[serde(default)]
    pub timeout_seconds: Option<u64>,
    /// Unix milliseconds.
    pub created_at: i64,
}

impl HarnessObject {
    /// A harness of `base` with no settings: its name is the base's label.
    pub fn bare(id: String, base: &Base, created_at: i64) -> Self {
        HarnessObject {
            id,
            object: "harness".into(),
            name: base.label.clone(),
            base: base.base.clone(),
            base_label: base.label.clone(),
            default_model: None,
            system_prompt: String::new(),
            mcp_servers: Vec::new(),
            skills: Vec::new(),
            disabled_tools: Vec::new(),
            max_step: None,
            timeout_seconds: None,
            created_at,
        }
    }

    /// The object as a client sees it: credentials redacted.
    pub fn shown(&self) -> Value {
        let mut h = self.clone();
        for s in &mut h.mcp_servers {
            redact(s);
        }
        serde_json::to_value(&h).unwrap_or(Value::Null)
    }

    /// What the agent gets as `Start.config`: this harness's settings (enabled skills and
    /// MCP servers only) and the task's `instructions`, as one JSON object in snake_case.
    /// `system_prompt` is the field `harness_sessions`' chat harness reads.
    pub fn start_config(&self, instructions: Option<&str>) -> Vec<u8> {
        let skills: Vec<&Skill> = self.skills.iter().filter(|s| s.enabled).collect();
        let mcp: Vec<&Map<String, Value>> = self
            .mcp_servers
            .iter()
            .filter(|m| m.get("enabled") != Some(&Value::Bool(false)))
            .collect();
        let mut cfg = json!({
            "harness_id": self.id,
            "name": self.name,
            "base": self.base,
            "skills": skills,
            "mcp_servers": mcp,
            "disabled_tools": self.disabled_tools,
            "max_step": self.max_step,
            "timeout_seconds": self.timeout_seconds,
        });
        if !self.system_prompt.is_empty() {
            cfg["system_prompt"] = Value::from(self.system_prompt.as_str());
        }
        if let Some(m) = &self.default_model {
            cfg["default_model"] = Value::from(m.as_str());
        }
        if let Some(i) = instructions {
            cfg["instructions"] = Value::from(i);
        }
        serde_json::to_vec(&cfg).unwrap_or_default()
    }

    /// The enabled MCP servers' names (each is reported unreachable on a turn: this server
    /// does not speak MCP, and says so rather than dropping them silently, §4.1).
    pub fn enabled_mcp_names(&self) -> Vec<String> {
        self.mcp_servers
            .iter()
            .filter(|m| m.get("enabled") != Some(&Value::Bool(false)))
            .filter_map(|m| m.get("name").and_then(Value::as_str).map(str::to_owned))
            .collect()
    }
}

fn is_secret_header(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    ["auth", "key", "token", "secret", "cookie", "password"]
        .iter()
        .any(|w| n.contains(w))
}

fn redact(server: &mut Map<String, Value>) {
    if server.contains_key("auth") {
        server.insert("auth".into(), Value::from(REDACTED));
    }
    if let Some(Value::Object(h)) = server.get_mut("headers") {
        for (k, v) in h.iter_mut() {
            if is_secret_header(k) {
                *v = Value::from(REDACTED);
            }
        }
    }
}

/// Keeps the stored credential where the client wrote back the redacted marker.
fn unredact(new: &mut Map<String, Value>, old: Option<&Map<String, Value>>) {
    let Some(old) = old else { return };
    if new.get("auth").and_then(Value::as_str) == Some(REDACTED) {
        match old.get("auth") {
            Some(v) => new.insert("auth".into(), v.clone()),
            None => new.remove("auth"),
        };
    }
    if let (Some(Value::Object(h)), Some(Value::Object(oh))) =
        (new.get_mut("headers"), old.get("headers"))
    {
        for (k, v) in h.iter_mut() {
            if v.as_str() == Some(REDACTED) {
                if let Some(o) = oh.get(k) {
                    *v = o.clone();
                }
            }
        }
    }
}

/// The registry.
#[derive(Debug)]
pub(crate) struct Registry {
    bases: Vec<Base>,
    builtin: Vec<HarnessObject>,
    owned: HashMap<String, (Principal, HarnessObject)>,
    max_per_principal: usize,
}

/// A harness id derived from a base name: stable across restarts.
fn builtin_id(base: &str) -> String {
    use sha2::{Digest, Sha256};
    let d = Sha256::digest(format!("harness-rs builtin harness {base}").as_bytes());
    let mut id = String::from("chrn_");
    for b in &d[..16] {
        id.push_str(&format!("{b:02x}"));
    }
    id
}

/// A field by its snake_case name or its camelCase one (clients send either).
fn field<'a>(obj: &'a Map<String, Value>, snake: &str, camel: &str) -> Option<&'a Value> {
    obj.get(snake).or_else(|| obj.get(camel))
}

impl Registry {
    pub(crate) fn new(
        bases: Vec<Base>,
        default_model: Option<&str>,
        max_per_principal: usize,
    ) -> Self {
        let builtin = bases
            .iter()
            .map(|b| {
                let mut h = HarnessObject::bare(builtin_id(&b.base), b, 0);
                h.default_model = default_model.map(str::to_owned);
                h
            })
            .collect();
        Registry {
            bases,
            builtin,
            owned: HashMap::new(),
            max_per_principal,
        }
    }

    /// The default harness: the first built-in one.
    pub(crate) fn default_harness(&self) -> Option<&HarnessObject> {
        self.builtin.first()
    }

    /// Every harness `p` can see: the built-in ones, then its own, oldest first.
    pub(crate) fn list(&self, p: &Principal) -> Vec<&HarnessObject> {
        let mut own: Vec<&HarnessObject> = self
            .owned
            .values()
            .filter(|(o, _)| o == p)
            .map(|(_, h)| h)
            .collect();
        own.sort_by(|a, b| (a.created_at, &a.id).cmp(&(b.created_at, &b.id)));
        self.builtin.iter().chain(own).collect()
    }

    pub(crate) fn get(&self, p: &Principal, id: &str) -> Option<&HarnessObject> {
        self.builtin
            .iter()
            .find(|h| h.id == id)
            .or_else(|| self.owned.get(id).filter(|(o, _)| o == p).map(|(_, h)| h))
    }

    fn is_builtin(&self, id: &str) -> bool {
        self.builtin.iter().any(|h| h.id == id)
    }

    fn unsupported_base(&self, base: &str) -> ApiError {
        let supported: Vec<&str> = self.bases.iter().map(|b| b.base.as_str()).collect();
        ApiError::new(
            "unsupported_base",
            format!(
                "This server does not run the harness base '{}'.",
                super::error::shown(base)
            ),
        )
        .param("base")
        .detail(json!({ "supported": supported }))
    }

    /// `POST /v1/harnesses`.
    pub(crate) fn create(
        &mut self,
        p: &Principal,
        body: &Value,
        id: String,
        created_at: i64,
        models: &[String],
    ) -> Result<&HarnessObject, ApiError> {
        let obj = body
            .as_object()
            .ok_or_else(|| ApiError::invalid_input("The body must be a JSON object."))?;
        let base = field(obj, "base", "base")
            .and_then(Value::as_str)
            .ok_or_else(|| ApiError::invalid_input("`base` is required.").param("base"))?;
        let label = match self.bases.iter().find(|b| b.base == base) {
            Some(b) => b.label.clone(),
            None => return Err(self.unsupported_base(base)),
        };
        if self.owned.values().filter(|(o, _)| o == p).count() >= self.max_per_principal {
            return Err(ApiError::new(
                "quota_exhausted",
                "This principal has reached its limit of configured harnesses.",
            ));
        }
        let base = Base {
            base: base.to_owned(),
            label,
        };
        let mut h = HarnessObject::bare(id.clone(), &base, created_at);
        apply(&mut h, obj, models)?;
        self.owned.insert(id.clone(), (p.clone(), h));
        self.owned
            .get(&id)
            .map(|(_, h)| h)
            .ok_or_else(|| ApiError::harness_not_found(&id))
    }

    /// `PUT /v1/harnesses/{id}`: the fields given replace the stored ones; `id`, `base` and
    /// `createdAt` never change (a different `base` is refused).
    pub(crate) fn update(
        &mut self,
        p: &Principal,
        id: &str,
        body: &Value,
        models: &[String],
    ) -> Result<&HarnessObject, ApiError> {
        if self.is_builtin(id) {
            return Err(builtin_is_read_only());
        }
        let obj = body
            .as_object()
            .ok_or_else(|| ApiError::invalid_input("The body must be a JSON object."))?;
        let Some((_, stored)) = self.owned.get(id).filter(|(o, _)| o == p) else {
            return Err(ApiError::harness_not_found(id));
        };
        if let Some(b) = field(obj, "base", "base") {
            if b.as_str() != Some(stored.base.as_str()) {
                return Err(ApiError::invalid_input(
                    "A harness's base cannot change; create a new harness instead.",
                )
                .param("base"));
            }
        }
        let mut h = stored.clone();
        apply(&mut h, obj, models)?;
        // Credentials written back redacted keep their stored values.
        for (i, s) in h.mcp_servers.iter_mut().enumerate() {
            let name = s.get("name").cloned();
            let old = stored
                .mcp_servers
                .iter()
                .find(|o| o.get("name") == name.as_ref())
                .or(stored.mcp_servers.get(i));
            unredact(s, old);
        }
        let slot = self
            .owned
            .get_mut(id)
            .ok_or_else(|| ApiError::harness_not_found(id))?;
        slot.1 = h;
        Ok(&slot.1)
    }

    /// `DELETE /v1/harnesses/{id}`. Sessions and responses that used it stay (§5.3).
    pub(crate) fn delete(&mut self, p: &Principal, id: &str) -> Result<(), ApiError> {
        if self.is_builtin(id) {
            return Err(builtin_is_read_only());
        }
        match self.owned.get(id) {
            Some((o, _)) if o == p => {
                self.owned.remove(id);
                Ok(())
            }
            _ => Err(ApiError::harness_not_found(id)),
        }
    }

    /// Forgets a configured harness another host deleted.
    pub(crate) fn forget(&mut self, id: &str) {
        self.owned.remove(id);
    }

    /// Restores a harness from the store.
    pub(crate) fn restore(&mut self, p: Principal, h: HarnessObject) {
        if !self.is_builtin(&h.id) {
            self.owned.insert(h.id.clone(), (p, h));
        }
    }

    /// Every principal's configured harnesses (for a store snapshot).
    pub(crate) fn owned(&self) -> impl Iterator<Item = (&Principal, &HarnessObject)> {
        self.owned.values().map(|(p, h)| (p, h))
    }
}

fn builtin_is_read_only() -> ApiError {
    ApiError::new(
        "insufficient_scope",
        "Built-in harnesses cannot be changed; create a configured harness instead.",
    )
}

fn int_or_null(v: &Value, param: &str) -> Result<Option<u64>, ApiError> {
    match v {
        Value::Null => Ok(None),
        v => v.as_u64().map(Some).ok_or_else(|| {
            ApiError::invalid_input(format!("`{param}` must be a non-negative integer or null."))
                .param(param)
        }),
    }
}

fn string(v: &Value, param: &str) -> Result<String, ApiError> {
    v.as_str()
        .map(str::to_owned)
        .ok_or_else(|| ApiError::invalid_input(format!("`{param}` must be a string.")).param(param))
}

/// Applies the settings present in `obj` to `h`, validating each.
fn apply(
    h: &mut HarnessObject,
    obj: &Map<String, Value>,
    models: &[String],
) -> Result<(), ApiError> {
    if let Some(v) = field(obj, "name", "name") {
        h.name = string(v, "name")?;
    }
    if let Some(v) = field(obj, "default_model", "defaultModel") {
        h.default_model = match v {
            Value::Null => None,
            v => {
                let m = string(v, "default_model")?;
                if !models.contains(&m) {
                    return Err(ApiError::new(
                        "model_unavailable",
                        format!(
                            "The model '{}' is not available on this server.",
                            super::error::shown(&m)
                        ),
                    )
                    .param("default_model"));
                }
                Some(m)
            }
        };
    }
    if let Some(v) = field(obj, "system_prompt", "systemPrompt") {
        h.system_prompt = match v {
            Value::Null => String::new(),
            v => string(v, "system_prompt")?,
        };
    }
    if let Some(v) = field(obj, "disabled_tools", "disabledTools") {
        h.disabled_tools = match v {
            Value::Null => Vec::new(),
            Value::Array(a) => a
                .iter()
                .map(|t| string(t, "disabled_tools[]"))
                .collect::<Result<_, _>>()?,
            _ => {
                return Err(
                    ApiError::invalid_input("`disabled_tools` must be a list of names.")
                        .param("disabled_tools"),
                );
            }
        };
    }
    if let Some(v) = field(obj, "max_step", "maxStep") {
        h.max_step = int_or_null(v, "max_step")?;
    }
    if let Some(v) = field(obj, "timeout_seconds", "timeoutSeconds") {
        h.timeout_seconds = int_or_null(v, "timeout_seconds")?;
    }
    if let Some(v) = field(obj, "mcp_servers", "mcpServers") {
        h.mcp_servers = parse_mcp(v)?;
    }
    if let Some(v) = field(obj, "skills", "skills") {
        h.skills = parse_skills(v)?;
    }
    Ok(())
}

fn parse_mcp(v: &Value) -> Result<Vec<Map<String, Value>>, ApiError> {
    let list = match v {
        Value::Null => return Ok(Vec::new()),
        Value::Array(a) => a,
        _ => {
            return Err(
                ApiError::invalid_input("`mcp_servers` must be a list.").param("mcp_servers")
            );
        }
    };
    let mut out = Vec::with_capacity(list.len());
    for (i, s) in list.iter().enumerate() {
        let param = format!("mcp_servers[{i}]");
        let m = s.as_object().ok_or_else(|| {
            ApiError::invalid_input("Each MCP server must be an object.").param(param.as_str())
        })?;
        for f in ["name", "url"] {
            if m.get(f).and_then(Value::as_str).is_none_or(str::is_empty) {
                return Err(
                    ApiError::invalid_input(format!("An MCP server needs a `{f}`."))
                        .param(format!("{param}.{f}")),
                );
            }
        }
        if let Some(t) = m.get("transport") {
            if !matches!(t.as_str(), Some("http" | "sse")) {
                return Err(ApiError::invalid_input("`transport` is `http` or `sse`.")
                    .param(format!("{param}.transport")));
            }
        }
        if let Some(e) = m.get("enabled") {
            if !e.is_boolean() {
                return Err(ApiError::invalid_input("`enabled` is a boolean.")
                    .param(format!("{param}.enabled")));
            }
        }
        out.push(m.clone());
    }
    Ok(out)
}

/// Whether `path` stays inside its folder: relative, no `.`/`..`/empty segment, no `\`, no
/// control character.
pub(crate) fn is_contained_path(path: &str) -> bool {
    !path.is_empty()
        && path.len() <= 1024
        && !path.starts_with('/')
        && !path.chars().any(|c| c == '\\' || c.is_control())
        && path
            .split('/')
            .all(|s| !s.is_empty() && s != "." && s != "..")
}

fn parse_skills(v: &Value) -> Result<Vec<Skill>, ApiError> {
    let list = match v {
        Value::Null => return Ok(Vec::new()),
        Value::Array(a) => a,
        _ => return Err(ApiError::invalid_input("`skills` must be a list.").param("skills")),
    };
    let mut out: Vec<Skill> = Vec::with_capacity(list.len());
    for (i, s) in list.iter().enumerate() {
        let param = format!("skills[{i}]");
        let mut skill: Skill = Skill::deserialize(s).map_err(|_| {
            ApiError::invalid_input("A skill needs a `name` and a list of `files`.")
                .param(param.as_str())
        })?;
        if skill.name.is_empty() || !is_contained_path(&skill.name) || skill.name.contains('/') {
            return Err(
                ApiError::invalid_input("A skill's name must be a plain name.")
                    .param(format!("{param}.name")),
            );
        }
        if out.iter().any(|o| o.name == skill.name) {
            return Err(ApiError::invalid_input("Two skills have the same name.")
                .param(format!("{param}.name")));
        }
        // `content` alone is shorthand for a bundle whose only member is SKILL.md.
        if skill.files.is_empty() {
            if let Some(Value::String(c)) = skill.extra.remove("content") {
                skill.files.push(SkillFile {
                    path: "SKILL.md".into(),
                    content: Some(c),
                    content_b64: None,
                    extra: Map::new(),
                });
            }
        }
        for (j, f) in skill.files.iter().enumerate() {
            let fp = format!("{param}.files[{j}]");
            if !is_contained_path(&f.path) {
                return Err(ApiError::invalid_input(
                    "A skill file's path must stay inside the skill's folder.",
                )
                .param(format!("{fp}.path")));
            }
            if let Some(b) = &f.content_b64 {
                if base64::engine::general_purpose::STANDARD.decode(b).is_err() {
                    return Err(ApiError::invalid_input("`content_b64` is not base64.")
                        .param(format!("{fp}.content_b64")));
                }
            }
            if skill.files[..j].iter().any(|o| o.path == f.path) {
                return Err(
                    ApiError::invalid_input("Two files of a skill have the same path.")
                        .param(format!("{fp}.path")),
                );
            }
        }
        if !skill.files.iter().any(|f| f.path == "SKILL.md") {
            return Err(
                ApiError::invalid_input("A skill bundle must contain a SKILL.md.")
                    .param(format!("{param}.files")),
            );
        }
        out.push(skill);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reg() -> Registry {
        Registry::new(
            vec![Base {
                base: "faq".into(),
                label: "FAQ".into(),
            }],
            Some("m"),
            10,
        )
    }

    #[test]
    fn contained_paths() {
        for ok in ["SKILL.md", "references/a.md", "a/b/c"] {
            assert!(is_contained_path(ok), "{ok}");
        }
        for bad in ["", "/etc", "../x", "a/../b", "a//b", "a\\b", "./a", "a/"] {
            assert!(!is_contained_path(bad), "{bad}");
        }
    }

    #[test]
    fn credentials_never_read_back_and_survive_a_put() {
        let mut r = reg();
        let p = Principal::new("a");
        let body = json!({"base": "faq", "mcp_servers": [{"name": "v", "url": "https://x", "auth": "sekrit",
            "headers": {"X-Api-Key": "k2", "Accept": "json"}}]});
        let h = r
            .create(&p, &body, "chrn_1".into(), 1, &["m".into()])
            .unwrap()
            .clone();
        let shown = h.shown().to_string();
        assert!(
            !shown.contains("sekrit") && !shown.contains("k2"),
            "{shown}"
        );
        assert!(shown.contains("json"));
        let back: Value = serde_json::from_str(&shown).unwrap();
        let h2 = r
            .update(
                &p,
                "chrn_1",
                &json!({"name": "n", "mcpServers": back["mcpServers"]}),
                &[],
            )
            .unwrap();
        assert_eq!(h2.mcp_servers[0]["auth"], "sekrit");
        assert_eq!(h2.mcp_servers[0]["headers"]["X-Api-Key"], "k2");
    }
}

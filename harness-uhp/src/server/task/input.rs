//! A task's `input`: a string or a list of items, as the agent's messages (tasks.md §2,
//! files.md §1.1).

use harness_core::message::{FilePart, Message, Part, Role};
use serde_json::{Value, json};

use crate::server::UhpServer;
use crate::server::auth::Principal;
use crate::server::error::ApiError;
use crate::server::file::decode_data_url;

impl UhpServer {
    /// `input` as messages for the agent, as items for `input_items`, and as text (a turn's
    /// title). A bare string is one user message (tasks.md §2).
    pub(super) fn parse_input(
        &self,
        p: &Principal,
        input: &Value,
    ) -> Result<(Vec<Message>, Vec<Value>, String), ApiError> {
        let items: Vec<Value> = match input {
            Value::String(s) => vec![json!({"type": "message", "role": "user",
                "content": [{"type": "input_text", "text": s}]})],
            Value::Array(a) => a.clone(),
            _ => {
                return Err(ApiError::invalid_input(
                    "`input` must be a string or a list of items.",
                )
                .param("input"));
            }
        };
        if items.len() > 10_000 {
            return Err(ApiError::invalid_input("`input` has too many items.").param("input"));
        }
        let mut messages = Vec::new();
        let mut loose = Vec::new(); // content items given without a message around them
        let mut text = String::new();
        for (i, item) in items.iter().enumerate() {
            let param = format!("input[{i}]");
            let Some(obj) = item.as_object() else {
                return Err(
                    ApiError::invalid_input("Each input item must be an object.").param(param),
                );
            };
            let ty = obj.get("type").and_then(Value::as_str);
            if obj.contains_key("content") || obj.contains_key("role") || ty == Some("message") {
                let role = obj.get("role").and_then(Value::as_str).unwrap_or("user");
                let role = match role {
                    "developer" | "system" => Role::System,
                    r => Role::from(r),
                };
                let parts = match obj.get("content") {
                    Some(Value::String(s)) => vec![Part::text(s.clone())],
                    Some(Value::Array(parts)) => {
                        let mut out = Vec::new();
                        for (j, part) in parts.iter().enumerate() {
                            if let Some(pt) =
                                self.parse_part(p, part, &format!("{param}.content[{j}]"))?
                            {
                                out.push(pt);
                            }
                        }
                        out
                    }
                    None | Some(Value::Null) => Vec::new(),
                    Some(_) => {
                        return Err(ApiError::invalid_input(
                            "`content` must be a string or a list.",
                        )
                        .param(format!("{param}.content")));
                    }
                };
                if parts.is_empty() {
                    continue;
                }
                if role == Role::User {
                    text.push_str(
                        &Message {
                            role: role.clone(),
                            parts: parts.clone(),
                        }
                        .text(),
                    );
                }
                messages.push(Message { role, parts });
            } else if let Some(pt) = self.parse_part(p, item, &param)? {
                if let Part::Text(t) = &pt {
                    text.push_str(&t.text);
                }
                loose.push(pt);
            }
        }
        if !loose.is_empty() {
            messages.push(Message {
                role: Role::User,
                parts: loose,
            });
        }
        let has_content = messages.iter().any(|m| {
            m.parts.iter().any(|p| match p {
                Part::Text(t) => !t.text.trim().is_empty(),
                _ => true,
            })
        });
        if !has_content {
            return Err(ApiError::invalid_input("`input` is empty.").param("input"));
        }
        Ok((messages, items, text))
    }

    /// One content part; `None` for a type the server does not use (ignored, tasks.md §1.1).
    fn parse_part(
        &self,
        p: &Principal,
        part: &Value,
        param: &str,
    ) -> Result<Option<Part>, ApiError> {
        let Some(obj) = part.as_object() else {
            return Err(
                ApiError::invalid_input("Each content part must be an object.").param(param),
            );
        };
        let ty = obj.get("type").and_then(Value::as_str).unwrap_or("");
        match ty {
            "input_text" | "output_text" | "text" => {
                let t = obj.get("text").and_then(Value::as_str).ok_or_else(|| {
                    ApiError::invalid_input("A text part needs `text`.")
                        .param(format!("{param}.text"))
                })?;
                Ok(Some(Part::text(t)))
            }
            "input_file" | "input_image" => {
                let url_key = if ty == "input_file" {
                    "file_data"
                } else {
                    "image_url"
                };
                let name = obj
                    .get("filename")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_owned();
                if let Some(url) = obj.get(url_key).and_then(Value::as_str) {
                    let (mime, bytes) = decode_data_url(url).ok_or_else(|| {
                        ApiError::invalid_input(format!("`{url_key}` must be a data: URL."))
                            .param(format!("{param}.{url_key}"))
                    })?;
                    return Ok(Some(Part::File(FilePart {
                        mime,
                        bytes: Some(bytes),
                        name,
                        ..FilePart::default()
                    })));
                }
                if let Some(fid) = obj.get("file_id").and_then(Value::as_str) {
                    let f = self.file_for_input(p, fid).ok_or_else(|| {
                        ApiError::file_not_found(fid).param(format!("{param}.file_id"))
                    })?;
                    return Ok(Some(Part::File(FilePart {
                        mime: f.media_type.clone(),
                        bytes: Some(f.bytes.clone()),
                        name: if name.is_empty() {
                            f.filename.clone()
                        } else {
                            name
                        },
                        ..FilePart::default()
                    })));
                }
                Err(
                    ApiError::invalid_input(format!("A file part needs `{url_key}` or `file_id`."))
                        .param(param),
                )
            }
            _ => Ok(None),
        }
    }
}

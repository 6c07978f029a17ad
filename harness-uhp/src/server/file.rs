//! Files (files.md): uploads (`POST /v1/files`, multipart), inline `data:` URLs, a session's
//! container of artifacts, downloads with the headers artifacts need, and the archive.
//!
//! Artifacts are attacker-influenced content (security.md §3): a download carries its own
//! media type, `Content-Disposition: attachment` with the original name, and
//! `X-Content-Type-Options: nosniff` (files.md §3, MUST), plus a sandboxing
//! `Content-Security-Policy`. A name is a relative path that stays in its container
//! (`is_contained_path`); ids are looked up, never
//! joined into a path, and nothing here touches a file system.

use base64::Engine;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::auth::Principal;
use super::error::ApiError;
use super::harness::is_contained_path;
use super::store::StoreRecord;
use super::{Now, Request, UhpServer, bytes_response, json_response};

/// A file: an upload, or an artifact of a session's container.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StoredFile {
    /// `file_…`.
    pub id: String,
    /// Its name (an artifact's relative path in its container).
    pub filename: String,
    /// The media type it is served with.
    pub media_type: String,
    /// Unix seconds.
    pub created_at: i64,
    /// The content.
    #[serde(with = "b64")]
    pub bytes: Vec<u8>,
}

impl StoredFile {
    /// The schema's `File` object, in `container_id` when it is an artifact.
    pub fn object(&self, container_id: Option<&str>) -> Value {
        let mut v = json!({
            "id": self.id,
            "object": "file",
            "filename": self.filename,
            "bytes": self.bytes.len(),
            "created_at": self.created_at,
        });
        if let Some(c) = container_id {
            v["container_id"] = Value::from(c);
        }
        v
    }
}

mod b64 {
    use base64::Engine;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(b: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&base64::engine::general_purpose::STANDARD.encode(b))
    }
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        let s = String::deserialize(d)?;
        base64::engine::general_purpose::STANDARD
            .decode(s)
            .map_err(serde::de::Error::custom)
    }
}

/// The media type of a file name, by its extension (`application/octet-stream` when unknown).
pub fn media_type(filename: &str) -> &'static str {
    let ext = filename
        .rsplit_once('.')
        .map(|(_, e)| e.to_ascii_lowercase())
        .unwrap_or_default();
    match ext.as_str() {
        "txt" | "log" => "text/plain; charset=utf-8",
        "md" => "text/markdown; charset=utf-8",
        "csv" => "text/csv; charset=utf-8",
        "json" => "application/json",
        "html" | "htm" => "text/html; charset=utf-8",
        "pdf" => "application/pdf",
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "gif" => "image/gif",
        "svg" => "image/svg+xml",
        "zip" => "application/zip",
        "tar" => "application/x-tar",
        _ => "application/octet-stream",
    }
}

/// `Content-Disposition: attachment` naming `filename` (RFC 6266: an ASCII fallback and the
/// UTF-8 name percent-encoded).
pub fn content_disposition(filename: &str) -> String {
    let base = filename.rsplit('/').next().unwrap_or(filename);
    let ascii: String = base
        .chars()
        .map(|c| {
            if c.is_ascii_graphic() && c != '"' && c != '\\' && c != '%' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let mut enc = String::new();
    for b in base.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            enc.push(char::from(b));
        } else {
            enc.push_str(&format!("%{b:02X}"));
        }
    }
    format!("attachment; filename=\"{ascii}\"; filename*=UTF-8''{enc}")
}

/// A `data:` URL's media type and bytes (`;base64` or percent-encoded); `None` when it is not
/// one.
pub fn decode_data_url(url: &str) -> Option<(String, Vec<u8>)> {
    let rest = url.strip_prefix("data:")?;
    let (meta, data) = rest.split_once(',')?;
    let (mime, is_b64) = match meta.strip_suffix(";base64") {
        Some(m) => (m, true),
        None => (meta, false),
    };
    let mime = if mime.is_empty() { "text/plain" } else { mime };
    let bytes = if is_b64 {
        let cleaned: String = data.chars().filter(|c| !c.is_ascii_whitespace()).collect();
        base64::engine::general_purpose::STANDARD
            .decode(cleaned)
            .ok()?
    } else {
        percent_decode(data)?
    };
    Some((mime.to_owned(), bytes))
}

fn percent_decode(s: &str) -> Option<Vec<u8>> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = std::str::from_utf8(b.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    Some(out)
}

/// The file part of a `multipart/form-data` body (RFC 7578): the part named `file`, or the
/// first part with a filename.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Upload<'a> {
    /// The part's filename.
    pub filename: String,
    /// The part's `Content-Type`, if given.
    pub media_type: Option<String>,
    /// Its bytes.
    pub bytes: &'a [u8],
}

/// Parses a multipart body; `None` when it is malformed or has no file part.
pub fn parse_multipart<'a>(content_type: &str, body: &'a [u8]) -> Option<Upload<'a>> {
    let (mime, params) = content_type.split_once(';')?;
    if !mime.trim().eq_ignore_ascii_case("multipart/form-data") {
        return None;
    }
    let boundary = params.split(';').find_map(|p| {
        let (k, v) = p.split_once('=')?;
        k.trim()
            .eq_ignore_ascii_case("boundary")
            .then(|| v.trim().trim_matches('"').to_owned())
    })?;
    if boundary.is_empty() || boundary.len() > 70 {
        return None;
    }
    let delim = format!("--{boundary}");
    let finder = memchr::memmem::Finder::new(delim.as_bytes());
    let mut positions = finder.find_iter(body);
    let mut start = positions.next()? + delim.len();
    let mut fallback: Option<Upload<'a>> = None;
    for next in positions {
        let part = body.get(start..next)?;
        start = next + delim.len();
        // Each part: CRLF, headers, CRLF CRLF, content, CRLF (before the next delimiter).
        let part = part.strip_prefix(b"\r\n")?;
        let split = memchr::memmem::find(part, b"\r\n\r\n")?;
        let head = std::str::from_utf8(&part[..split]).ok()?;
        let content = &part[split + 4..];
        let content = content.strip_suffix(b"\r\n").unwrap_or(content);
        let mut name = None;
        let mut filename = None;
        let mut ctype = None;
        for line in head.split("\r\n") {
            let Some((k, v)) = line.split_once(':') else {
                continue;
            };
            if k.trim().eq_ignore_ascii_case("content-disposition") {
                for p in v.split(';') {
                    if let Some((pk, pv)) = p.split_once('=') {
                        let pv = pv.trim().trim_matches('"').to_owned();
                        match pk.trim().to_ascii_lowercase().as_str() {
                            "name" => name = Some(pv),
                            "filename" => filename = Some(pv),
                            _ => {}
                        }
                    }
                }
            } else if k.trim().eq_ignore_ascii_case("content-type") {
                ctype = Some(v.trim().to_owned());
            }
        }
        let is_file = name.as_deref() == Some("file");
        if let Some(filename) = filename.or_else(|| is_file.then(|| "upload".to_owned())) {
            let up = Upload {
                filename,
                media_type: ctype,
                bytes: content,
            };
            if is_file {
                return Some(up);
            }
            fallback.get_or_insert(up);
        }
    }
    fallback
}

/// A `ustar` archive of `files` (name, bytes, unix seconds), as `GET …/files/archive` serves
/// it. A name longer than the format holds is shortened to its last 100 bytes.
pub fn tar(files: &[(&str, &[u8], i64)]) -> Vec<u8> {
    let mut out = Vec::new();
    for (name, bytes, mtime) in files {
        let mut h = [0u8; 512];
        let (prefix, short) = split_name(name);
        put(&mut h[0..100], short.as_bytes());
        put(&mut h[100..108], b"0000644\0");
        put(&mut h[108..116], b"0000000\0");
        put(&mut h[116..124], b"0000000\0");
        put(
            &mut h[124..136],
            format!("{:011o}\0", bytes.len()).as_bytes(),
        );
        put(
            &mut h[136..148],
            format!("{:011o}\0", (*mtime).max(0)).as_bytes(),
        );
        h[148..156].copy_from_slice(b"        ");
        h[156] = b'0';
        put(&mut h[257..263], b"ustar\0");
        put(&mut h[263..265], b"00");
        put(&mut h[345..500], prefix.as_bytes());
        let sum: u32 = h.iter().map(|b| u32::from(*b)).sum();
        put(&mut h[148..156], format!("{sum:06o}\0 ").as_bytes());
        out.extend_from_slice(&h);
        out.extend_from_slice(bytes);
        let pad = (512 - bytes.len() % 512) % 512;
        out.extend(std::iter::repeat_n(0u8, pad));
    }
    out.extend(std::iter::repeat_n(0u8, 1024));
    out
}

fn put(dst: &mut [u8], src: &[u8]) {
    let n = dst.len().min(src.len());
    dst[..n].copy_from_slice(&src[..n]);
}

/// Splits a name into ustar's prefix (≤155) and name (≤100) at a `/`.
fn split_name(name: &str) -> (&str, &str) {
    if name.len() <= 100 {
        return ("", name);
    }
    for (i, _) in name.match_indices('/') {
        let (p, n) = (&name[..i], &name[i + 1..]);
        if p.len() <= 155 && n.len() <= 100 && !n.is_empty() {
            return (p, n);
        }
    }
    let mut cut = name.len() - 100;
    while !name.is_char_boundary(cut) {
        cut += 1;
    }
    ("", &name[cut..])
}

/// Why the agent's file write was refused (the tool call's error result says it).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FileError {
    /// The task is no longer running.
    #[error("the task is no longer running")]
    TurnGone,
    /// The name is not a relative path inside the container.
    #[error("the file name must be a relative path inside the session's folder")]
    BadPath,
    /// The session's artifact bound is reached.
    #[error("the session has reached its limit of files")]
    TooMany,
}

impl UhpServer {
    /// A file an input may name by `file_id`: the principal's upload or one of its artifacts.
    pub(crate) fn file_for_input(&self, p: &Principal, id: &str) -> Option<&StoredFile> {
        if let Some((o, f)) = self.uploads.get(id) {
            return (o == p).then_some(f);
        }
        self.sessions
            .values()
            .filter(|s| &s.principal == p)
            .find_map(|s| s.files.iter().find(|f| f.id == id))
    }

    /// An artifact by container and file id, in `p`'s scope.
    pub(crate) fn artifact(
        &self,
        p: &Principal,
        cid: &str,
        fid: &str,
    ) -> Result<&StoredFile, ApiError> {
        self.containers
            .get(cid)
            .and_then(|sid| self.sessions.get(sid))
            .filter(|s| &s.principal == p)
            .and_then(|s| s.files.iter().find(|f| f.id == fid))
            .ok_or_else(|| ApiError::file_not_found(fid))
    }

    /// `GET /v1/containers/{cid}/files/{fid}/content`: the raw bytes, never JSON.
    pub(crate) fn download(
        &self,
        p: &Principal,
        cid: &str,
        fid: &str,
    ) -> Result<http::Response<Vec<u8>>, ApiError> {
        let f = self.artifact(p, cid, fid)?;
        let mut r = bytes_response(200, &f.media_type, f.bytes.clone());
        artifact_headers(r.headers_mut(), &f.filename);
        Ok(r)
    }

    /// `GET /v1/sessions/{id}/files/archive`: every artifact of the session, one tar.
    pub(crate) fn archive(
        &self,
        p: &Principal,
        sid: &str,
    ) -> Result<http::Response<Vec<u8>>, ApiError> {
        let s = self.session(p, sid)?;
        let files: Vec<(&str, &[u8], i64)> = s
            .files
            .iter()
            .map(|f| (f.filename.as_str(), f.bytes.as_slice(), f.created_at))
            .collect();
        let mut r = bytes_response(200, "application/x-tar", tar(&files));
        artifact_headers(r.headers_mut(), &format!("{sid}.tar"));
        Ok(r)
    }

    /// `GET /v1/files/{id}`.
    pub(crate) fn file_metadata(
        &self,
        p: &Principal,
        id: &str,
    ) -> Result<http::Response<Vec<u8>>, ApiError> {
        if let Some((o, f)) = self.uploads.get(id) {
            if o == p {
                return Ok(json_response(200, &f.object(None)));
            }
        }
        for s in self.sessions.values().filter(|s| &s.principal == p) {
            if let Some(f) = s.files.iter().find(|f| f.id == id) {
                return Ok(json_response(200, &f.object(Some(&s.container_id))));
            }
        }
        Err(ApiError::file_not_found(id))
    }

    /// `POST /v1/files` (multipart): an upload, refused whole past the limit (files.md §1.2).
    pub(crate) fn upload(
        &mut self,
        now: Now,
        p: &Principal,
        req: &Request<'_>,
    ) -> Result<http::Response<Vec<u8>>, ApiError> {
        let max = self.cfg.max_upload_bytes;
        if req.body.len() > max + (64 << 10) {
            return Err(ApiError::too_large(max));
        }
        let ct = req.header("content-type").unwrap_or("");
        let up = parse_multipart(ct, req.body).ok_or_else(|| {
            ApiError::invalid_input("Upload a file as multipart/form-data, in a part named `file`.")
                .param("file")
        })?;
        if up.bytes.len() > max {
            return Err(ApiError::too_large(max));
        }
        let name = up.filename.rsplit(['/', '\\']).next().unwrap_or("upload");
        let name: String = name.chars().filter(|c| !c.is_control()).take(255).collect();
        let name = if name.is_empty() || name == "." || name == ".." {
            "upload".to_owned()
        } else {
            name
        };
        let media_type = up
            .media_type
            .clone()
            .unwrap_or_else(|| media_type(&name).to_owned());
        let f = StoredFile {
            id: self.new_id("file_"),
            filename: name,
            media_type,
            created_at: now.unix_ms.div_euclid(1000),
            bytes: up.bytes.to_vec(),
        };
        let v = f.object(None);
        self.upload_order.push_back(f.id.clone());
        self.uploads.insert(f.id.clone(), (p.clone(), f.clone()));
        let mine = self.uploads.values().filter(|(o, _)| o == p).count();
        if mine > self.cfg.max_uploads_per_principal {
            if let Some(pos) = self
                .upload_order
                .iter()
                .position(|id| self.uploads.get(id).is_some_and(|(o, _)| o == p))
            {
                if let Some(old) = self.upload_order.remove(pos) {
                    self.uploads.remove(&old);
                    self.persist(|| StoreRecord::UploadDeleted { id: old });
                }
            }
        }
        self.persist(|| StoreRecord::Upload {
            principal: p.clone(),
            file: Box::new(f),
        });
        Ok(json_response(200, &v))
    }

    /// Writes `path` in the container of task `rid`'s session (the host's `write_file`
    /// tool): an artifact, cited on the task's final message. A second write of one path
    /// replaces its content under the same file id.
    pub fn turn_write_file(
        &mut self,
        now: Now,
        rid: &str,
        path: &str,
        bytes: Vec<u8>,
    ) -> Result<Value, FileError> {
        if !self.running.contains(rid) {
            return Err(FileError::TurnGone);
        }
        if !is_contained_path(path) {
            return Err(FileError::BadPath);
        }
        let sid = self
            .tasks
            .get(rid)
            .map(|t| t.session_id.clone())
            .ok_or(FileError::TurnGone)?;
        let new_id = self.new_id("file_");
        let (max_files, max_bytes) = (
            self.cfg.max_files_per_session,
            self.cfg.max_session_file_bytes,
        );
        let s = self.sessions.get_mut(&sid).ok_or(FileError::TurnGone)?;
        let others: usize = s
            .files
            .iter()
            .filter(|f| f.filename != path)
            .map(|f| f.bytes.len())
            .sum();
        let exists = s.files.iter().any(|f| f.filename == path);
        if (!exists && s.files.len() >= max_files) || others + bytes.len() > max_bytes {
            return Err(FileError::TooMany);
        }
        let created_at = now.unix_ms.div_euclid(1000);
        let f = match s.files.iter_mut().find(|f| f.filename == path) {
            Some(f) => {
                f.bytes = bytes;
                f.created_at = created_at;
                f.clone()
            }
            None => {
                let f = StoredFile {
                    id: new_id,
                    filename: path.to_owned(),
                    media_type: media_type(path).to_owned(),
                    created_at,
                    bytes,
                };
                s.files.push(f.clone());
                f
            }
        };
        let cid = s.container_id.clone();
        let v = f.object(Some(&cid));
        let path = crate::protocol::endpoints::file_content(&cid, &f.id);
        let download_url = match &self.cfg.public_url {
            Some(base) => format!("{}{path}", base.trim_end_matches('/')),
            None => path,
        };
        self.cite(
            rid,
            crate::response::ContainerFileCitation {
                container_id: cid.clone(),
                file_id: f.id.clone(),
                filename: f.filename.clone(),
                download_url: Some(download_url),
                start_index: None,
                end_index: None,
                extra: Default::default(),
            },
        );
        Ok(v)
    }

    /// Reads `path` for task `rid` (the host's `read_file` tool): a file of its session's
    /// container, or `skills/<skill>/<path>` of its harness's enabled skills (the whole
    /// folder is readable, harnesses.md §4.2).
    pub fn turn_read_file(&self, rid: &str, path: &str) -> Option<Vec<u8>> {
        if !is_contained_path(path) {
            return None;
        }
        let t = self.tasks.get(rid)?;
        let s = self.sessions.get(&t.session_id)?;
        if let Some(f) = s.files.iter().find(|f| f.filename == path) {
            return Some(f.bytes.clone());
        }
        let (skill, rest) = path.strip_prefix("skills/")?.split_once('/')?;
        let h = self.registry.get(&t.principal, &t.harness_id)?;
        let sk = h.skills.iter().find(|s| s.enabled && s.name == skill)?;
        sk.files.iter().find(|f| f.path == rest).map(|f| f.bytes())
    }
}

fn artifact_headers(h: &mut http::HeaderMap, filename: &str) {
    if let Ok(v) = http::HeaderValue::from_str(&content_disposition(filename)) {
        h.insert(http::header::CONTENT_DISPOSITION, v);
    }
    h.insert(
        "x-content-type-options",
        http::HeaderValue::from_static("nosniff"),
    );
    h.insert(
        http::header::CONTENT_SECURITY_POLICY,
        http::HeaderValue::from_static("default-src 'none'; sandbox"),
    );
    h.insert("x-frame-options", http::HeaderValue::from_static("DENY"));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_urls() {
        assert_eq!(
            decode_data_url("data:text/plain;base64,aGk="),
            Some(("text/plain".into(), b"hi".to_vec()))
        );
        assert_eq!(
            decode_data_url("data:,a%20b"),
            Some(("text/plain".into(), b"a b".to_vec()))
        );
        assert_eq!(decode_data_url("https://x"), None);
        assert_eq!(decode_data_url("data:;base64,@@@"), None);
    }

    #[test]
    fn multipart() {
        let body = b"--XX\r\nContent-Disposition: form-data; name=\"purpose\"\r\n\r\nassistants\r\n--XX\r\nContent-Disposition: form-data; name=\"file\"; filename=\"q3.txt\"\r\nContent-Type: text/plain\r\n\r\nline1\r\nline2\r\n--XX--\r\n";
        let up = parse_multipart("multipart/form-data; boundary=XX", body).unwrap();
        assert_eq!(up.filename, "q3.txt");
        assert_eq!(up.bytes, b"line1\r\nline2");
        assert_eq!(up.media_type.as_deref(), Some("text/plain"));
        assert_eq!(parse_multipart("application/json", body), None);
        assert_eq!(
            parse_multipart("multipart/form-data; boundary=YY", body),
            None
        );
    }

    #[test]
    fn tar_headers_checksum() {
        let t = tar(&[("a.txt", b"hello", 1)]);
        assert_eq!(t.len(), 512 + 512 + 1024);
        assert_eq!(&t[257..262], b"ustar");
        let mut h = t[..512].to_vec();
        let stored = std::str::from_utf8(&h[148..154]).unwrap().to_owned();
        h[148..156].copy_from_slice(b"        ");
        let sum: u32 = h.iter().map(|b| u32::from(*b)).sum();
        assert_eq!(u32::from_str_radix(&stored, 8).unwrap(), sum);
    }

    #[test]
    fn disposition_is_safe() {
        assert_eq!(
            content_disposition("dir/re\"port.md"),
            "attachment; filename=\"re_port.md\"; filename*=UTF-8''re%22port.md"
        );
    }
}

//! Every public type name is unique across the workspace (issue 12 item 5: "no two public
//! types share a name with different meanings across the crates").
//!
//! A user reads `Server`, `Event` or `TurnOutcome` without the module path, in an import list,
//! an error message or a doc page; two types of one name in the SDK are two things they must
//! tell apart by path. This test scans the library crates' sources (`harness-*/src/**/*.rs`,
//! std only) for `pub struct|enum|trait|type NAME` and fails listing every name defined in
//! two crates, or in two modules (files) of one crate.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

/// Names allowed to be defined more than once, each with its reason. Empty: no case so far
/// is justified (the same concept in two crates is one type in harness-core instead).
const ALLOWED: &[(&str, &str)] = &[];

/// The public type name a line of Rust defines, if any: `pub struct|enum|trait|type NAME`,
/// also with generics (`pub struct Service<L>`) and in a macro body
/// (`pub struct Transcript [as_given] …`). `pub(crate)` and other restricted items are not
/// public API and are not counted.
fn defined_name(line: &str) -> Option<&str> {
    let rest = line.trim_start().strip_prefix("pub ")?.trim_start();
    let rest = ["struct ", "enum ", "trait ", "type "]
        .iter()
        .find_map(|kw| rest.strip_prefix(kw))?
        .trim_start();
    let end = rest
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(rest.len());
    let name = &rest[..end];
    // A type name starts upper-case (`$name` in a macro, or a keyword, is not one).
    name.starts_with(|c: char| c.is_ascii_uppercase())
        .then_some(name)
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<_> = entries.filter_map(Result::ok).map(|e| e.path()).collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
}

/// Every public type name of the workspace's library crates, with where each is defined
/// (`crate/src/file.rs:line`, one entry per file).
fn definitions(root: &Path) -> BTreeMap<String, Vec<String>> {
    let mut crates: Vec<PathBuf> = fs::read_dir(root)
        .expect("the workspace root")
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("harness-"))
                && p.join("src").is_dir()
        })
        .collect();
    crates.sort();
    let mut defs: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for krate in &crates {
        let mut files = Vec::new();
        rust_files(&krate.join("src"), &mut files);
        for file in files {
            let text = fs::read_to_string(&file).expect("a source file");
            let shown = file
                .strip_prefix(root)
                .unwrap_or(&file)
                .display()
                .to_string();
            let mut seen_here: Vec<&str> = Vec::new();
            for (i, line) in text.lines().enumerate() {
                let Some(name) = defined_name(line) else {
                    continue;
                };
                // One file may define a name twice under exclusive `cfg`s: one definition.
                if seen_here.contains(&name) {
                    continue;
                }
                seen_here.push(name);
                defs.entry(name.to_owned())
                    .or_default()
                    .push(format!("{shown}:{}", i + 1));
            }
        }
    }
    defs
}

#[test]
fn every_public_type_name_is_defined_once() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let defs = definitions(root);
    // The scan found the workspace (a scan of nothing would pass for the wrong reason).
    for known in [
        "Harness",
        "HarnessCall",
        "Host",
        "StreamEvent",
        "Controller",
    ] {
        assert!(
            defs.contains_key(known),
            "the scan did not find `{known}`: {} names",
            defs.len()
        );
    }
    let clashes: Vec<String> = defs
        .iter()
        .filter(|(name, at)| at.len() > 1 && !ALLOWED.iter().any(|(a, _)| a == name))
        .map(|(name, at)| format!("{name}: {}", at.join(", ")))
        .collect();
    assert!(
        clashes.is_empty(),
        "public type names defined more than once (rename one, or make them one type in \
         harness-core):\n  {}",
        clashes.join("\n  ")
    );
}

#[test]
fn the_scanner_sees_each_form_of_definition() {
    assert_eq!(defined_name("pub struct Server {"), Some("Server"));
    assert_eq!(
        defined_name("pub struct Service<L: EventLog> {"),
        Some("Service")
    );
    assert_eq!(defined_name("    pub enum Event {"), Some("Event"));
    assert_eq!(defined_name("pub trait Store: Send {"), Some("Store"));
    assert_eq!(defined_name("pub type Seq = u64;"), Some("Seq"));
    assert_eq!(
        defined_name("    pub struct Transcript [as_given] [skip \"type\"] {"),
        Some("Transcript")
    );
    assert_eq!(defined_name("pub(crate) struct Inner {"), None);
    assert_eq!(defined_name("pub fn server() -> Server {"), None);
    assert_eq!(defined_name("struct Private;"), None);
    assert_eq!(defined_name("pub struct $name {"), None);
}

#[test]
fn a_clash_is_reported() {
    // Two crates of a scratch workspace define `Event`: the scan lists both.
    let root = std::env::temp_dir().join(format!("harness-names-{}", std::process::id()));
    for (krate, body) in [
        ("harness-a", "pub struct Event;\npub enum OnlyA {}\n"),
        ("harness-b", "mod x {\n    pub enum Event { A }\n}\n"),
    ] {
        fs::create_dir_all(root.join(krate).join("src")).unwrap();
        fs::write(root.join(krate).join("src/lib.rs"), body).unwrap();
    }
    let defs = definitions(&root);
    fs::remove_dir_all(&root).unwrap();
    assert_eq!(
        defs["Event"],
        ["harness-a/src/lib.rs:1", "harness-b/src/lib.rs:2"]
    );
    assert_eq!(defs["OnlyA"].len(), 1);
}

//! The root README's code is what a user copies: each Rust block is a doc test of this crate
//! (`src/lib.rs`), but a doc test also sees the dev-dependencies, where `harness_core::…`
//! resolves though a user who followed the README's "Use it" (`harness-rs = {…}`) would get
//! "unresolved import". So: every crate a block names must be one the "Use it" block lists,
//! and the SDK's crates are named through the umbrella (`harness_rs::core::…`), the way that
//! dependency exposes them (issue 12, "Docs that mislead").
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

const README: &str = include_str!("../README.md");

/// Crates a block could name at the root of a path, as `crate_name` → package name.
const KNOWN: &[(&str, &str)] = &[
    ("harness_rs", "harness-rs"),
    ("harness_core", "harness-core"),
    ("harness_jambonz", "harness-jambonz"),
    ("harness_tanstack", "harness-tanstack"),
    ("harness_uhp", "harness-uhp"),
    ("harness_sessions", "harness-sessions"),
    ("async_trait", "async-trait"),
    ("futures", "futures"),
    ("serde_json", "serde_json"),
    ("serde", "serde"),
    ("tokio", "tokio"),
    ("http", "http"),
    ("bytes", "bytes"),
    ("hyper", "hyper"),
    ("axum", "axum"),
];

/// The fenced blocks of `md` whose info string starts with `lang`.
fn blocks<'a>(md: &'a str, lang: &str) -> Vec<&'a str> {
    let mut out = Vec::new();
    let mut rest = md;
    while let Some(i) = rest.find("```") {
        let after = &rest[i + 3..];
        let info_end = after.find('\n').unwrap();
        let info = &after[..info_end];
        let body = &after[info_end + 1..];
        let end = body.find("```").unwrap();
        if info.split(',').next() == Some(lang) {
            out.push(&body[..end]);
        }
        rest = &body[end + 3..];
    }
    out
}

/// The packages the first `toml` block after `## Use it` lists under `[dependencies]`.
fn listed() -> Vec<String> {
    let use_it = &README[README.find("## Use it").expect("a Use it section")..];
    blocks(use_it, "toml")[0]
        .lines()
        .map(|l| l.split('#').next().unwrap().trim())
        .filter(|l| l.contains('='))
        .map(|l| l.split('=').next().unwrap().trim().to_owned())
        .collect()
}

/// The known crates a block names at the root of a path (`name::`, not after `::`).
fn named(block: &str) -> Vec<&'static str> {
    let mut out = Vec::new();
    for (krate, _) in KNOWN {
        let pat = format!("{krate}::");
        let mut from = 0;
        while let Some(i) = block[from..].find(&pat) {
            let at = from + i;
            let before = block[..at].chars().next_back();
            let rooted = !matches!(before, Some(c) if c.is_alphanumeric() || c == '_' || c == ':');
            if rooted && !out.contains(krate) {
                out.push(*krate);
            }
            from = at + pat.len();
        }
    }
    out
}

#[test]
fn every_crate_a_readme_block_names_is_in_the_use_it_dependencies() {
    let deps = listed();
    assert!(deps.iter().any(|d| d == "harness-rs"), "{deps:?}");
    let rust = blocks(README, "rust");
    assert!(rust.len() >= 8, "only {} Rust blocks found", rust.len());
    for (n, block) in rust.iter().enumerate() {
        for krate in named(block) {
            let package = KNOWN.iter().find(|(k, _)| *k == krate).unwrap().1;
            assert!(
                deps.iter().any(|d| d == package),
                "README Rust block {n} names `{krate}::`, but \"Use it\" does not list `{package}` \
                 (listed: {deps:?}); with `harness-rs` the path is `harness_rs::…`"
            );
        }
    }
}

/// The checker itself: a block that names `harness_core::` is caught, one that names
/// `harness_rs::core::` is not, and a `tokio::` root is a crate but `core::` after
/// `harness_rs::` is not `harness_core`.
#[test]
fn the_check_catches_a_crate_the_dependencies_do_not_list() {
    assert_eq!(
        named("use harness_core::agent::ToolLoopAgent;"),
        ["harness_core"]
    );
    assert_eq!(
        named("use harness_rs::core::agent::ToolLoopAgent;\n#[tokio::main]"),
        ["harness_rs", "tokio"]
    );
    assert!(named("let x = my_futures::x();").is_empty());
}

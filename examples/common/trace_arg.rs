//! `--trace` for the examples, in one place: the spans of the protocol crates (see each
//! crate's `telemetry` module) printed on stderr by a `tracing-subscriber` fmt layer, one
//! line per event and per closed span (with its fields and time), at `debug` level with
//! `--trace=debug` (the protocol errors a peer causes), else `info`.

/// Installs the fmt subscriber when the command line has `--trace` or `--trace=LEVEL`.
pub fn install_if_asked() {
    let Some(flag) = std::env::args().find(|a| a == "--trace" || a.starts_with("--trace=")) else {
        return;
    };
    let level = match flag.strip_prefix("--trace=") {
        Some("debug") => tracing::Level::DEBUG,
        Some("trace") => tracing::Level::TRACE,
        _ => tracing::Level::INFO,
    };
    let subscriber = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_span_events(tracing_subscriber::fmt::format::FmtSpan::CLOSE)
        .with_max_level(level)
        .finish();
    // A subscriber set already (none is, in the examples) wins.
    let _ = tracing::subscriber::set_global_default(subscriber);
}

/// Whether `arg` is the `--trace` flag (the examples' parsers skip it).
pub fn is_trace_flag(arg: &str) -> bool {
    arg == "--trace" || arg.starts_with("--trace=")
}

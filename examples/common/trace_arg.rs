//! `--trace` and `--otlp URL` for the examples, in one place.
//!
//! - `--trace` (or `--trace=debug`): the spans of the protocol crates (see each crate's
//!   `telemetry` module) printed on stderr by a `tracing-subscriber` fmt layer, one line per
//!   event and per closed span (with its fields and time), at `info`, or at `debug` with the
//!   protocol errors a peer causes.
//! - `--otlp URL`: the same spans exported to an OpenTelemetry collector as OTLP/HTTP JSON
//!   (`http://HOST:4318`, or the full `…/v1/traces` URL), in batches from a thread of their
//!   own; the TanStack turn's `harness.operation` span carries its link to the input's
//!   `traceparent`.

#![allow(dead_code)] // each example that includes this file takes what it needs

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing_subscriber::layer::SubscriberExt;

/// Flushes the exporter when dropped (the end of `main`).
pub struct Guard(Option<SdkTracerProvider>);

impl Drop for Guard {
    fn drop(&mut self) {
        if let Some(p) = self.0.take() {
            // Off the runtime: the blocking HTTP client must not be dropped inside it.
            let _ = std::thread::spawn(move || p.shutdown()).join();
        }
    }
}

/// Installs what the command line asks for (`--trace[=LEVEL]`, `--otlp URL`), if anything.
pub fn install_if_asked() -> Guard {
    let args: Vec<String> = std::env::args().collect();
    let trace = args.iter().find(|a| is_trace_flag(a));
    let otlp = args
        .iter()
        .position(|a| a == "--otlp")
        .and_then(|i| args.get(i + 1).cloned())
        .or_else(|| {
            args.iter()
                .find_map(|a| a.strip_prefix("--otlp=").map(str::to_owned))
        });
    if trace.is_none() && otlp.is_none() {
        return Guard(None);
    }
    let level = match trace.and_then(|t| t.strip_prefix("--trace=")) {
        Some("debug") => tracing::Level::DEBUG,
        Some("trace") => tracing::Level::TRACE,
        _ => tracing::Level::INFO,
    };
    let fmt = trace.map(|_| {
        tracing_subscriber::fmt::layer()
            .with_writer(std::io::stderr)
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
            .with_span_events(tracing_subscriber::fmt::format::FmtSpan::CLOSE)
    });
    let provider = otlp.and_then(|url| match otlp_provider(&url) {
        Ok(p) => Some(p),
        Err(e) => {
            eprintln!("--otlp {url}: {e}");
            None
        }
    });
    let otel = provider
        .as_ref()
        .map(|p| tracing_opentelemetry::layer().with_tracer(p.tracer("harness-rs")));
    let subscriber = tracing_subscriber::registry()
        .with(tracing_subscriber::filter::LevelFilter::from_level(level))
        .with(fmt)
        .with(otel);
    // A subscriber set already (none is, in the examples) wins.
    let _ = tracing::subscriber::set_global_default(subscriber);
    Guard(provider)
}

/// A tracer provider exporting OTLP/HTTP JSON to `url` (its `/v1/traces` added when the URL
/// names no path), in batches. Built on a thread of its own: the blocking HTTP client it
/// makes must not be made inside an async runtime.
pub fn otlp_provider(url: &str) -> Result<SdkTracerProvider, String> {
    use opentelemetry_otlp::{Protocol, SpanExporter, WithExportConfig};
    let endpoint = match url.split_once("://") {
        Some((_, rest)) if !rest.trim_end_matches('/').contains('/') => {
            format!("{}/v1/traces", url.trim_end_matches('/'))
        }
        _ => url.to_owned(),
    };
    std::thread::spawn(move || {
        let exporter = SpanExporter::builder()
            .with_http()
            .with_protocol(Protocol::HttpJson)
            .with_endpoint(endpoint)
            .build()
            .map_err(|e| e.to_string())?;
        let resource = opentelemetry_sdk::Resource::builder()
            .with_service_name("harness-rs")
            .build();
        Ok(SdkTracerProvider::builder()
            .with_batch_exporter(exporter)
            .with_resource(resource)
            .build())
    })
    .join()
    .map_err(|_| "the exporter could not be built".to_owned())?
}

/// Whether `arg` is the `--trace` flag (the examples' parsers skip it).
pub fn is_trace_flag(arg: &str) -> bool {
    arg == "--trace" || arg.starts_with("--trace=")
}

/// Whether `arg` is `--otlp` or `--otlp=URL` (the examples' parsers skip it, and the URL
/// after a bare `--otlp`).
pub fn is_otlp_flag(arg: &str) -> bool {
    arg == "--otlp" || arg.starts_with("--otlp=")
}

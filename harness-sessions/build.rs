//! With the `proto` feature, compiles `proto/agentsessions.proto` into prost messages (and,
//! with `grpc`, the tonic `Harness` service and client). The parser is protox, a protobuf
//! compiler written in Rust: no system `protoc` is needed on a fresh machine or in CI.
//! Without those features (the default) this does nothing.

fn main() {
    #[cfg(feature = "proto")]
    {
        if let Err(e) = compile() {
            println!("cargo::error=compiling proto/agentsessions.proto: {e}");
        }
    }
}

#[cfg(feature = "proto")]
fn compile() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo::rerun-if-changed=proto/agentsessions.proto");
    let fds = protox::compile(["agentsessions.proto"], ["proto"])?;
    let grpc = std::env::var_os("CARGO_FEATURE_GRPC").is_some();
    tonic_prost_build::configure()
        .build_server(grpc)
        .build_client(grpc)
        // The generated `connect(dst)` constructor would clash with the `Connect` rpc.
        .build_transport(false)
        .compile_fds(fds)?;
    Ok(())
}

//! The prost messages of `proto/agentsessions.proto` (feature `proto`), generated at build
//! time, with the `grpc` feature's tonic service and client in them.
#![allow(
    missing_docs,
    clippy::all,
    clippy::pedantic,
    unreachable_pub,
    rust_2018_idioms
)]

include!(concat!(env!("OUT_DIR"), "/agentsessions.v1.rs"));

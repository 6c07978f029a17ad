//! # harness-jambonz
//!
//! The jambonz harness protocol: JSON text frames over one WebSocket per phone call (subprotocol harness.jambonz.org), both sides, sans-IO.
//!
//! This crate is being built; its issue fills it in. It depends on
//! [`harness_core`] for the shared codecs, cursors and the `Harness` trait.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub use harness_core;

//! # harness-jambonz
//!
//! The jambonz harness protocol: JSON text frames over one WebSocket per phone call
//! (subprotocol `harness.jambonz.org`), both sides, sans-IO.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub use harness_core;

pub mod command;
pub mod driver;
pub mod early_start;
pub mod event;
pub mod frame;
pub mod harness_side;
pub mod history;
pub mod reply;
pub mod session;
pub mod simulator;
pub mod testing;
pub mod tool;
pub mod turn;
pub mod turn_record;
pub mod upgrade;
mod wire;

//! The axum adapter.

//! Shared helpers for the integration tests; each test binary declares
//! `mod support;` and uses what it needs.

pub mod app_options;
pub mod control_plane;
pub mod informers;
pub mod proxy;

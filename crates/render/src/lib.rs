//! # tokenscope-render
//!
//! Rendering: reports to what people read. Pure functions, data in, text out.
//!
//! - [`fmt`]: numbers and escaped text; [`table`]: the one table builder (text,
//!   Markdown, HTML);
//! - [`client`]: the client report's level table, terminal summary, Markdown, CSV;
//! - [`kernels`]: the kernels report's tables and terminal text; [`kv_plan`]: the
//!   KV-cache plan;
//! - [`combined`]: the combined report as Markdown and self-contained HTML, with
//!   its [`glossary`];
//! - [`charts`]: SVG charts (sweeps, distributions, requests, kernels);
//! - [`server`]: the server view's tables; [`turns`]: conversations per turn and
//!   the prefix cache; [`tiers`]: input and output tiers side by side; [`rum`]:
//!   real users' levels, where their painted TTFT went;
//! - [`compare`]: runs compared, change by change; [`quality`]: a candidate
//!   server's answers against a reference's.
//! - [`page`]: what the web page computes, here so that it is tested natively.

pub mod answers;
pub mod charts;
pub mod client;
pub mod combined;
pub mod compare;
pub mod connection;
pub mod cost;
pub use tokenscope_stats::fmt;
pub mod glossary;
pub mod history;
pub mod images;
pub mod kernels;
pub mod kv_plan;
pub mod page;
pub mod quality;
pub mod rum;
pub mod server;
pub mod table;
pub mod tiers;
pub mod turns;

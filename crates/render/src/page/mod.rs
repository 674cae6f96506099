//! The page is one wasm module that loads two more only when they are needed, so
//! neither weighs on its first load: the GPU harness (`web-gpu/`, when the GPU view
//! opens) and the report renderer (`web-report/`, when there is a report to
//! analyse). Separate wasm modules talk in JSON strings; these are the shapes of
//! those strings, shared so that neither side spells them twice ([`view`]: what
//! both yew apps render with).

pub mod compare;
pub mod gpu;
pub mod report;
pub mod scrape;
pub mod transport;
pub mod view;
pub mod workload;

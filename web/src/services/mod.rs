//! The page's work, outside the components: the clock and timers, the request and
//! response types, the `fetch` transport, the in-page simulator, the paint probe
//! and stream view, the runner, and small browser chores.

pub mod browser;
pub mod clock;
pub mod exchange;
pub mod fetch;
pub mod gpu;
pub mod lazy_run;
pub mod paint;
pub mod records;
pub mod report;
pub mod requests;
pub mod rum_demo;
pub mod runner;
pub mod scrape;
pub mod sim;
pub mod tokens;
pub mod transport;
pub mod watch;
pub mod worker;

//! The server's own view: which engine a `/metrics` scrape comes from
//! ([`engines`]), the series read from it and the server-side histograms
//! ([`reading`]), a scrape as a run records it ([`scrape`]), a load level
//! summarised from its scrapes ([`level`]), and the level's and the run's server
//! view in the report ([`view`]), and the diagnosis rules that read it
//! ([`diagnosis`]).

#[cfg(feature = "server-view")]
pub mod diagnosis;
pub mod engines;
pub mod level;
pub mod reading;
pub mod scrape;
pub mod view;

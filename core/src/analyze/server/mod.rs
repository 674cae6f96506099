//! The server's own view: which engine a `/metrics` scrape comes from
//! ([`engines`]), the series read from it and the server-side histograms
//! ([`reading`]), a scrape as a run records it ([`scrape`]), a load level
//! summarised from its scrapes ([`level`]), and the level's and the run's server
//! view in the report ([`view`]; a level's built with the client's level report
//! in `level_view`), and the diagnosis rules that read it ([`diagnosis`]).
pub mod diagnosis;
pub mod engines;
pub mod level;
mod level_view;
pub mod reading;
pub mod scrape;
pub mod view;

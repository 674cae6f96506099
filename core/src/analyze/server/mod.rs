//! The server's own view: which engine a `/metrics` scrape comes from
//! ([`engines`]), the series read from it and the server-side histograms
//! ([`reading`]), and a load level summarised from its scrapes ([`level`]).

pub mod engines;
pub mod level;
pub mod reading;

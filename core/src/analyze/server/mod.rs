//! The server's own view: which engine a `/metrics` scrape comes from
//! ([`engines`]), the series read from it and the server-side histograms
//! ([`reading`]).

pub mod engines;
pub mod reading;

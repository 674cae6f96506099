//! The server view's place in the report: the types a level's and the run's
//! server side have in a build with the feature `server-view`, and a placeholder
//! without it.

#[cfg(feature = "server-view")]
use crate::analyze::server::view::{ServerLevel, ServerRun};

/// A level's server view in the report: [`ServerLevel`] with the feature
/// `server-view`, else a placeholder that is never present (the page's main
/// module, which neither scrapes nor reads the view, carries none of its code).
#[cfg(feature = "server-view")]
pub type LevelServer = ServerLevel;
/// A level's server view in the report (see the `server-view` build).
#[cfg(not(feature = "server-view"))]
pub type LevelServer = NoServerView;
/// The run's server side in the report ([`ServerRun`] with `server-view`).
#[cfg(feature = "server-view")]
pub type RunServer = ServerRun;
/// The run's server side in the report (see the `server-view` build).
#[cfg(not(feature = "server-view"))]
pub type RunServer = NoServerView;

/// Stands in for the server view in a build without it: it has no value.
#[cfg(not(feature = "server-view"))]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoServerView {}

//! The load generator's one error type. Each variant says whose the fault is,
//! so a caller can tell a user's option from an endpoint that cannot be
//! benchmarked; each message names the option or endpoint concerned, never a
//! key, a header's value or a prompt.

use std::path::Path;

/// What stopped the load generator.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An option names something that cannot be used: a certificate that is
    /// not one, a proxy URL, a tokenizer, a tier, an address already in use.
    /// The message names the flag.
    #[error("{0}")]
    Option(String),
    /// A file an option names could not be read or written (`what` names the
    /// flag and the file; `source` says why).
    #[error("{what}")]
    File {
        /// `--ca-cert ca.pem: cannot read it`.
        what: String,
        /// The operating system's reason.
        #[source]
        source: std::io::Error,
    },
    /// The endpoint cannot be benchmarked: unreachable, failing, or not the
    /// server the options describe (the message says what it answered).
    #[error("{0}")]
    Endpoint(String),
    /// The run's own machinery failed (a recording thread panicked, the HTTP
    /// client could not be built).
    #[error("{0}")]
    Internal(String),
}

/// A result with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// A file `flag path` names could not be read or written: `doing` is
    /// "cannot read it", "cannot create the file".
    pub fn file(flag: &str, path: &Path, doing: &str, source: std::io::Error) -> Self {
        Self::File {
            what: format!("{flag} {}: {doing}", path.display()),
            source,
        }
    }
}

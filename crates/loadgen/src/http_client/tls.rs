//! A TLS failure told plainly: the host, the reason, and the flag that fixes
//! it, for every client [`super::HttpOptions`] builds (the bench's requests,
//! the quality checks', the scrapes').

/// A TLS failure told plainly: the host, the reason, and the flag that fixes
/// it; `None` when the error is not about TLS.
pub fn tls_problem(err: &(dyn std::error::Error + 'static), host: &str) -> Option<String> {
    use rustls::{AlertDescription, CertificateError, Error as TlsError};
    let mut src = Some(err);
    while let Some(e) = src {
        // An I/O error's `source()` skips the error it wraps (and reqwest nests
        // them): look inside each.
        let mut inner: Option<&TlsError> = None;
        let mut cur: &(dyn std::error::Error + 'static) = e;
        while let Some(wrapped) = cur
            .downcast_ref::<std::io::Error>()
            .and_then(|io| io.get_ref())
        {
            cur = wrapped;
            if let Some(t) = cur.downcast_ref::<TlsError>() {
                inner = Some(t);
                break;
            }
        }
        if let Some(t) = e.downcast_ref::<TlsError>().or(inner) {
            return Some(match t {
                TlsError::InvalidCertificate(c) => match c {
                    CertificateError::UnknownIssuer => format!(
                        "TLS: the certificate of {host} is signed by an unknown issuer (a private CA?): trust its CA with --ca-cert FILE"
                    ),
                    CertificateError::Expired | CertificateError::ExpiredContext { .. } => {
                        format!(
                            "TLS: the certificate of {host} has expired: renew it on the server (or, for a test server only, --insecure)"
                        )
                    }
                    CertificateError::NotValidYet | CertificateError::NotValidYetContext { .. } => {
                        format!(
                            "TLS: the certificate of {host} is not valid yet (is this machine's clock right?)"
                        )
                    }
                    CertificateError::NotValidForName
                    | CertificateError::NotValidForNameContext { .. } => format!(
                        "TLS: the certificate of {host} is not valid for the name {host}: use a name it was issued for in --url (or, for a test server only, --insecure)"
                    ),
                    other => format!(
                        "TLS: the certificate of {host} was refused ({other:?}): check it, or trust its CA with --ca-cert FILE"
                    ),
                },
                TlsError::AlertReceived(
                    AlertDescription::CertificateRequired
                    | AlertDescription::HandshakeFailure
                    | AlertDescription::BadCertificate
                    | AlertDescription::UnknownCA,
                ) => format!(
                    "TLS: {host} refused the handshake ({t}): it may want a client certificate its CA signed: --client-cert FILE --client-key FILE"
                ),
                TlsError::NoApplicationProtocol
                | TlsError::AlertReceived(AlertDescription::NoApplicationProtocol) => format!(
                    "TLS: {host} offers none of the HTTP versions asked for by ALPN (with --http2: it does not speak HTTP/2; try without it)"
                ),
                other => format!("TLS with {host} failed: {other}"),
            });
        }
        src = e.source();
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustls::{AlertDescription, CertificateError, Error as TlsError};

    /// A TLS error as reqwest hands it over: an I/O error in an I/O error.
    fn wrapped(e: TlsError) -> std::io::Error {
        std::io::Error::other(std::io::Error::new(std::io::ErrorKind::InvalidData, e))
    }

    #[test]
    fn certificate_problems_name_the_host_the_reason_and_the_fix() {
        let host = "api.internal:443";
        for (e, needles) in [
            (
                TlsError::InvalidCertificate(CertificateError::UnknownIssuer),
                &["unknown issuer", "--ca-cert"][..],
            ),
            (
                TlsError::InvalidCertificate(CertificateError::Expired),
                &["has expired"][..],
            ),
            (
                TlsError::InvalidCertificate(CertificateError::NotValidForName),
                &["not valid for the name", "--url"][..],
            ),
            (
                TlsError::AlertReceived(AlertDescription::CertificateRequired),
                &["--client-cert", "--client-key"][..],
            ),
            (TlsError::NoApplicationProtocol, &["HTTP/2"][..]),
            (
                TlsError::AlertReceived(AlertDescription::NoApplicationProtocol),
                &["HTTP/2"][..],
            ),
        ] {
            let msg = tls_problem(&wrapped(e), host).unwrap();
            assert!(msg.contains(host), "{msg}");
            for n in needles {
                assert!(msg.contains(n), "{msg} lacks {n}");
            }
        }
        assert_eq!(tls_problem(&std::io::Error::other("refused"), host), None);
    }
}

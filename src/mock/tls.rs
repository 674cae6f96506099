//! TLS for `tokenscope mock`: a server configuration from PEM files (rustls with
//! the ring provider), optionally requiring client certificates (mutual TLS),
//! and a throwaway CA with a server and a client certificate for demos
//! (`--tls-self-signed DIR`).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

/// A TLS setup that cannot be built, naming the file or flag at fault.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A file could not be read.
    #[error("{flag} {path}: cannot read the file ({error})")]
    Read {
        flag: &'static str,
        path: PathBuf,
        error: std::io::Error,
    },
    /// A file holds no PEM item of the kind asked for.
    #[error("{flag} {path}: {problem}")]
    Pem {
        flag: &'static str,
        path: PathBuf,
        problem: String,
    },
    /// rustls refused the certificates or key (a key that does not match, ...).
    #[error("{what}: {error}")]
    Rustls {
        what: &'static str,
        error: rustls::Error,
    },
    /// The client CA file's certificates make no verifier.
    #[error("--tls-client-ca {path}: {problem}")]
    ClientCa { path: PathBuf, problem: String },
    /// `--tls-self-signed DIR`: generating or writing the files failed.
    #[error("--tls-self-signed {dir}: {problem}")]
    SelfSigned { dir: PathBuf, problem: String },
}

/// Where the certificate, its key and the optional client CA are.
#[derive(Debug, Clone)]
pub struct TlsFiles {
    /// PEM certificate (chain: the server's first).
    pub cert: PathBuf,
    /// PEM private key (PKCS#8, PKCS#1 or SEC1).
    pub key: PathBuf,
    /// PEM CA certificates that client certificates must chain to (mutual TLS).
    pub client_ca: Option<PathBuf>,
}

/// The server's rustls configuration: ALPN `h2`, `http/1.1` (only `http/1.1`
/// with `http1_only`).
pub fn server_config(files: &TlsFiles, http1_only: bool) -> Result<rustls::ServerConfig, TlsError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let certs = read_certs("--tls-cert", &files.cert)?;
    let key = read_key("--tls-key", &files.key)?;
    let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|error| TlsError::Rustls {
            what: "TLS versions",
            error,
        })?;
    let builder = match &files.client_ca {
        Some(path) => {
            let mut roots = rustls::RootCertStore::empty();
            for cert in read_certs("--tls-client-ca", path)? {
                roots.add(cert).map_err(|e| TlsError::ClientCa {
                    path: path.clone(),
                    problem: e.to_string(),
                })?;
            }
            let verifier =
                rustls::server::WebPkiClientVerifier::builder_with_provider(roots.into(), provider)
                    .build()
                    .map_err(|e| TlsError::ClientCa {
                        path: path.clone(),
                        problem: e.to_string(),
                    })?;
            builder.with_client_cert_verifier(verifier)
        }
        None => builder.with_no_client_auth(),
    };
    let mut config = builder
        .with_single_cert(certs, key)
        .map_err(|error| TlsError::Rustls {
            what: "--tls-cert/--tls-key",
            error,
        })?;
    config.alpn_protocols = if http1_only {
        vec![b"http/1.1".to_vec()]
    } else {
        vec![b"h2".to_vec(), b"http/1.1".to_vec()]
    };
    Ok(config)
}

fn read(flag: &'static str, path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|error| TlsError::Read {
        flag,
        path: path.to_owned(),
        error,
    })
}

/// Every certificate of a PEM file (at least one).
fn read_certs(flag: &'static str, path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let bytes = read(flag, path)?;
    let pem_err = |problem: String| TlsError::Pem {
        flag,
        path: path.to_owned(),
        problem,
    };
    let certs = CertificateDer::pem_slice_iter(&bytes)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| pem_err(format!("not a PEM certificate file ({e})")))?;
    if certs.is_empty() {
        return Err(pem_err(
            "holds no PEM certificate (-----BEGIN CERTIFICATE-----)".into(),
        ));
    }
    Ok(certs)
}

/// The private key of a PEM file.
fn read_key(flag: &'static str, path: &Path) -> Result<PrivateKeyDer<'static>, TlsError> {
    let bytes = read(flag, path)?;
    PrivateKeyDer::from_pem_slice(&bytes).map_err(|e| TlsError::Pem {
        flag,
        path: path.to_owned(),
        problem: match e {
            rustls::pki_types::pem::Error::NoItemsFound => {
                "holds no PEM private key (-----BEGIN PRIVATE KEY-----)".into()
            }
            e => format!("not a PEM private key file ({e})"),
        },
    })
}

/// The files `--tls-self-signed DIR` writes (or reuses).
#[derive(Debug, Clone)]
pub struct SelfSigned {
    /// The CA certificate to give clients (`--ca-cert`).
    pub ca: PathBuf,
    /// The server's certificate and key, and the client CA for mutual TLS.
    pub files: TlsFiles,
    /// Whether the files were there already.
    pub reused: bool,
}

/// The names of the files in `DIR`, in the order written.
const SELF_SIGNED_FILES: [&str; 6] = [
    "ca.pem",
    "ca-key.pem",
    "server.pem",
    "server-key.pem",
    "client.pem",
    "client-key.pem",
];

/// Generate in `dir` (created if needed) a CA (`ca.pem`, `ca-key.pem`), a server
/// certificate it signed for `localhost`, `127.0.0.1` and `::1` (`server.pem`,
/// `server-key.pem`) and a client certificate it signed (`client.pem`,
/// `client-key.pem`), or reuse them if all are there (a restarted server stays
/// trusted). Keys are written with mode 0600.
pub fn self_signed(dir: &Path) -> Result<SelfSigned, TlsError> {
    let err = |problem: String| TlsError::SelfSigned {
        dir: dir.to_owned(),
        problem,
    };
    let path = |name: &str| dir.join(name);
    let reused = SELF_SIGNED_FILES.iter().all(|f| path(f).is_file());
    if !reused {
        std::fs::create_dir_all(dir).map_err(|e| err(format!("cannot create it ({e})")))?;
        let pems = generate().map_err(|e| err(format!("cannot generate certificates ({e})")))?;
        for (name, pem) in SELF_SIGNED_FILES.iter().zip(pems) {
            write_pem(&path(name), &pem, name.ends_with("-key.pem"))
                .map_err(|e| err(format!("cannot write {name} ({e})")))?;
        }
    }
    Ok(SelfSigned {
        ca: path("ca.pem"),
        files: TlsFiles {
            cert: path("server.pem"),
            key: path("server-key.pem"),
            client_ca: None,
        },
        reused,
    })
}

/// The six PEM texts, in [`SELF_SIGNED_FILES`] order.
fn generate() -> Result<[String; 6], rcgen::Error> {
    use rcgen::{
        BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer,
        KeyPair, KeyUsagePurpose,
    };
    let ca_key = KeyPair::generate()?;
    // A name of its own (from its key), so that a client trusting another
    // generated CA finds no issuer at all rather than one with the same name.
    let tag: String = ca_key
        .public_key_raw()
        .iter()
        .skip(1)
        .take(4)
        .map(|b| format!("{b:02x}"))
        .collect();
    let mut ca = CertificateParams::new(Vec::<String>::new())?;
    ca.distinguished_name
        .push(DnType::CommonName, format!("tokenscope mock CA {tag}"));
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let ca_cert = ca.self_signed(&ca_key)?;
    let ca_pem = ca_cert.pem();
    let ca_key_pem = ca_key.serialize_pem();
    let issuer = Issuer::new(ca, ca_key);

    let leaf = |names: Vec<String>, cn: &str, eku: ExtendedKeyUsagePurpose| {
        let mut params = CertificateParams::new(names)?;
        params.distinguished_name.push(DnType::CommonName, cn);
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![eku];
        params.use_authority_key_identifier_extension = true;
        let key = KeyPair::generate()?;
        let cert = params.signed_by(&key, &issuer)?;
        Ok::<_, rcgen::Error>((cert.pem(), key.serialize_pem()))
    };
    let (server, server_key) = leaf(
        vec!["localhost".into(), "127.0.0.1".into(), "::1".into()],
        "localhost",
        ExtendedKeyUsagePurpose::ServerAuth,
    )?;
    let (client, client_key) = leaf(
        Vec::new(),
        "tokenscope client",
        ExtendedKeyUsagePurpose::ClientAuth,
    )?;
    Ok([ca_pem, ca_key_pem, server, server_key, client, client_key])
}

/// Write a PEM file; a key only its owner can read (on Unix).
fn write_pem(path: &Path, pem: &str, secret: bool) -> std::io::Result<()> {
    use std::io::Write as _;
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create(true).truncate(true);
    #[cfg(unix)]
    if secret {
        use std::os::unix::fs::OpenOptionsExt as _;
        opts.mode(0o600);
    }
    #[cfg(not(unix))]
    let _ = secret;
    let mut file = opts.open(path)?;
    file.write_all(pem.as_bytes())?;
    // A key file that existed before keeps its old mode through `open`: set it.
    #[cfg(unix)]
    if secret {
        use std::os::unix::fs::PermissionsExt as _;
        file.set_permissions(std::fs::Permissions::from_mode(0o600))?;
    }
    Ok(())
}

//! TLS for the gateway (`serve --tls-cert/--tls-key`, wss://): the acceptor built from PEM
//! files, and the byte stream a connection runs on, plain TCP or TLS alike.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::ServerConfig;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio::io::{AsyncRead, AsyncWrite};
pub use tokio_rustls::TlsAcceptor;

/// What a connection reads and writes: a `TcpStream`, or TLS over one.
pub trait Io: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Io for T {}

/// The stream under a connection's WebSocket.
pub type Stream = Box<dyn Io>;

/// A PEM file larger than this is not a certificate chain or a key (and `/dev/zero` does not
/// hang the start).
const MAX_PEM_FILE: u64 = 1024 * 1024;

/// Why the TLS files could not be used.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("cannot read {what} {}: {source}", path.display())]
    Read {
        what: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{what} {} is larger than {MAX_PEM_FILE} bytes", path.display())]
    TooLarge { what: &'static str, path: PathBuf },
    #[error("{what} {} holds no PEM {expected} ({reason})", path.display())]
    NoPem {
        what: &'static str,
        path: PathBuf,
        expected: &'static str,
        reason: String,
    },
    #[error("the certificate and key cannot be used together: {0}")]
    KeyMismatch(String),
    #[error("TLS setup failed: {0}")]
    Config(String),
}

/// The file's bytes, bounded.
fn read_bounded(what: &'static str, path: &Path) -> Result<Vec<u8>, TlsError> {
    let read = |source| TlsError::Read {
        what,
        path: path.to_path_buf(),
        source,
    };
    let file = std::fs::File::open(path).map_err(read)?;
    let mut bytes = Vec::new();
    file.take(MAX_PEM_FILE + 1)
        .read_to_end(&mut bytes)
        .map_err(read)?;
    if bytes.len() as u64 > MAX_PEM_FILE {
        return Err(TlsError::TooLarge {
            what,
            path: path.to_path_buf(),
        });
    }
    Ok(bytes)
}

/// Every certificate in a PEM file (at least one).
pub fn read_certs(
    what: &'static str,
    path: &Path,
) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let bytes = read_bounded(what, path)?;
    let no_pem = |reason: String| TlsError::NoPem {
        what,
        path: path.to_path_buf(),
        expected: "CERTIFICATE",
        reason,
    };
    let certs = CertificateDer::pem_slice_iter(&bytes)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| no_pem(e.to_string()))?;
    if certs.is_empty() {
        return Err(no_pem("no CERTIFICATE section found".into()));
    }
    Ok(certs)
}

/// The private key in a PEM file (PKCS#8, PKCS#1 or SEC1).
fn read_key(path: &Path) -> Result<PrivateKeyDer<'static>, TlsError> {
    let bytes = read_bounded("the TLS key", path)?;
    PrivateKeyDer::from_pem_slice(&bytes).map_err(|e| TlsError::NoPem {
        what: "the TLS key",
        path: path.to_path_buf(),
        expected: "PRIVATE KEY",
        reason: e.to_string(),
    })
}

/// The acceptor for `cert` (the chain, leaf first) and its `key`, with the `ring` provider.
pub fn acceptor(cert: &Path, key: &Path) -> Result<TlsAcceptor, TlsError> {
    let certs = read_certs("the TLS certificate", cert)?;
    let key = read_key(key)?;
    let config =
        ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .map_err(|e| TlsError::Config(e.to_string()))?
            .with_no_client_auth()
            .with_single_cert(certs, key)
            .map_err(|e| TlsError::KeyMismatch(e.to_string()))?;
    Ok(TlsAcceptor::from(Arc::new(config)))
}

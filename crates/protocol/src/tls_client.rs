//! The rustls client settings every outgoing TLS connection shares (the remote link's wss://
//! dials, the model client's https:// requests): the `ring` provider (aws-lc needs cmake),
//! TLS 1.2 and 1.3, and the public web roots plus any extra ones the caller trusts.

use std::sync::Arc;

use rustls::{ClientConfig, RootCertStore};

/// The public web roots (webpki's), to which a caller may add its own.
pub fn web_roots() -> RootCertStore {
    let mut roots = RootCertStore::empty();
    roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    roots
}

/// A client configuration trusting `roots`.
pub fn config(roots: RootCertStore) -> Result<ClientConfig, rustls::Error> {
    Ok(
        ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()?
            .with_root_certificates(roots)
            .with_no_client_auth(),
    )
}

//! TLS for `--connect wss://…`: the rustls connector the WebSocket dial uses, trusting the
//! public web roots plus, for a self-signed gateway, the CA file the user names.

use std::path::Path;
use std::sync::Arc;

use tokio_tungstenite::Connector;

use switchboard_protocol::tls::{TlsError, read_certs};

/// The connector for wss:// dials: webpki roots, plus every certificate in `ca` (PEM) when
/// given. Uses the `ring` provider.
pub fn connector(ca: Option<&Path>) -> Result<Connector, TlsError> {
    let mut roots = switchboard_protocol::tls_client::web_roots();
    if let Some(path) = ca {
        for cert in read_certs("the CA file", path)? {
            roots
                .add(cert)
                .map_err(|e| TlsError::Config(format!("{}: {e}", path.display())))?;
        }
    }
    let config = switchboard_protocol::tls_client::config(roots)
        .map_err(|e| TlsError::Config(e.to_string()))?;
    Ok(Connector::Rustls(Arc::new(config)))
}

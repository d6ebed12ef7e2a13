//! The client's device identity for `--connect`: one Ed25519 key per state folder
//! (`<state>/device.json`), signing each connection's challenge.

use std::path::{Path, PathBuf};

use super::link::DeviceSigner;
use switchboard_protocol::device::{DeviceError, DeviceIdentity};
use switchboard_protocol::{ClientInfo, DeviceAuth};

/// The key file's name inside the state folder.
pub const KEY_FILE: &str = "device.json";

impl DeviceSigner for DeviceIdentity {
    fn sign(
        &self,
        client: &ClientInfo,
        role: &str,
        scopes: &[String],
        token: Option<&str>,
        nonce: &str,
        ts: u64,
    ) -> DeviceAuth {
        // OpenClaw signs an absent token as the empty string.
        DeviceIdentity::sign(self, client, role, scopes, token.unwrap_or(""), nonce, ts)
    }
}

/// Where the console keeps its device key.
pub fn key_path(state_dir: &Path) -> PathBuf {
    state_dir.join(KEY_FILE)
}

/// The console's device identity, created on first use.
pub fn load_or_create(state_dir: &Path) -> Result<DeviceIdentity, DeviceError> {
    DeviceIdentity::load_or_create(&key_path(state_dir))
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchboard_protocol::device::verify;

    #[test]
    fn the_state_folders_key_signs_what_the_gateway_verifies() {
        let dir = tempfile::tempdir().expect("tempdir");
        let identity = load_or_create(dir.path()).expect("identity");
        assert!(dir.path().join("device.json").is_file());
        let signer: &dyn DeviceSigner = &identity;
        let client = ClientInfo {
            id: "cli".into(),
            version: "1".into(),
            platform: "linux".into(),
            mode: "cli".into(),
            display_name: None,
            extra: serde_json::Map::new(),
        };
        let scopes = vec!["operator.read".to_string()];
        let ts = u64::try_from(chrono::Utc::now().timestamp_millis()).expect("clock");
        let device = signer.sign(&client, "operator", &scopes, Some("t"), "n1", ts);
        let id = verify(&device, &client, "operator", &scopes, "t", "n1").expect("verifies");
        assert_eq!(id, identity.id());
        let again = load_or_create(dir.path()).expect("reloaded");
        assert_eq!(again.id(), identity.id());
    }
}

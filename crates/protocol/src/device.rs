//! Ed25519 device identity as OpenClaw's `connect.device` carries it: the key file, the signed
//! v3 payload string, signing (client side) and verifying (gateway side).
//!
//! Byte for byte OpenClaw's algorithm: the device id is the hex SHA-256 of the raw 32-byte
//! public key, `publicKey` and `signature` are base64url without padding, `signedAt` and `nonce`
//! are the challenge's. The key file is `{"privateKeyRaw": <standard base64 of the 32-byte
//! seed>}`, the shape OpenClaw's Python client (`pyclient-device.json`) reads, so one key can
//! serve both.

use std::fmt;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use ed25519_dalek::{Signature, Signer, SigningKey, VerifyingKey};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::handshake::{ClientInfo, DeviceAuth};

/// How far `signedAt` may be from the verifier's clock: 2 minutes, as OpenClaw
/// (`DEVICE_SIGNATURE_SKEW_MS`). The challenge's `ts` is the gateway's own clock and the nonce
/// pins the connection, so this only bounds how long an unanswered challenge stays usable.
pub const MAX_SIGNATURE_AGE_MS: u64 = 2 * 60 * 1000;

/// A key file larger than this is not ours (the real one is under 100 bytes).
const MAX_KEY_FILE: u64 = 64 * 1024;
/// OpenClaw's bound on a base64 field before decoding.
const MAX_BASE64_INPUT: usize = 4096;

/// Why a device identity could not be loaded, or a `connect.device` was refused.
#[derive(Debug, thiserror::Error)]
pub enum DeviceError {
    #[error("cannot read the device key {}: {source}", path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("the device key {} is not a valid key file ({reason}); move it away to create a new identity", path.display())]
    Corrupt { path: PathBuf, reason: String },
    #[error("cannot write the device key {}: {source}", path.display())]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("no randomness for a new device key: {0}")]
    Random(String),
    #[error("device nonce mismatch (not this connection's challenge)")]
    NonceMismatch,
    #[error("device nonce required")]
    NonceMissing,
    #[error("device identity mismatch (id is not the sha256 of the public key)")]
    IdMismatch,
    #[error("device public key invalid")]
    BadPublicKey,
    #[error("device signature expired (signedAt {signed_at}, now {now})")]
    Stale { signed_at: u64, now: u64 },
    #[error("signature does not match the connect request")]
    BadSignature,
}

/// An Ed25519 device key and its id. `Debug` never shows the secret.
pub struct DeviceIdentity {
    key: SigningKey,
    id: String,
}

impl fmt::Debug for DeviceIdentity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DeviceIdentity")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

/// The key file's contents.
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct KeyFile {
    /// Standard base64 (padded) of the 32-byte Ed25519 seed, as OpenClaw's client writes it.
    private_key_raw: String,
    /// For the owner's eyes only; the id is always derived from the key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    device_id: Option<String>,
}

impl DeviceIdentity {
    /// The identity from a 32-byte Ed25519 seed.
    pub fn from_seed(seed: [u8; 32]) -> DeviceIdentity {
        let key = SigningKey::from_bytes(&seed);
        let id = device_id(key.verifying_key().as_bytes());
        DeviceIdentity { key, id }
    }

    /// A fresh identity from the operating system's randomness.
    pub fn generate() -> Result<DeviceIdentity, DeviceError> {
        let mut seed = [0u8; 32];
        getrandom::fill(&mut seed).map_err(|e| DeviceError::Random(e.to_string()))?;
        Ok(DeviceIdentity::from_seed(seed))
    }

    /// The identity kept in `path`, created there (0600, published atomically) when absent.
    /// Two processes creating it at once end up with the same key: the second one's file is
    /// not published and it loads the first one's.
    pub fn load_or_create(path: &Path) -> Result<DeviceIdentity, DeviceError> {
        match DeviceIdentity::load(path) {
            Err(DeviceError::Read { source, .. })
                if source.kind() == std::io::ErrorKind::NotFound => {}
            other => return other,
        }
        let identity = DeviceIdentity::generate()?;
        match identity.publish(path) {
            Ok(()) => Ok(identity),
            Err(DeviceError::Write { source, .. })
                if source.kind() == std::io::ErrorKind::AlreadyExists =>
            {
                DeviceIdentity::load(path)
            }
            Err(e) => Err(e),
        }
    }

    /// The identity kept in `path`; a missing, unreadable or malformed file is an error.
    pub fn load(path: &Path) -> Result<DeviceIdentity, DeviceError> {
        let read_err = |source| DeviceError::Read {
            path: path.to_path_buf(),
            source,
        };
        let corrupt = |reason: String| DeviceError::Corrupt {
            path: path.to_path_buf(),
            reason,
        };
        let file = std::fs::File::open(path).map_err(read_err)?;
        let mut text = String::new();
        file.take(MAX_KEY_FILE + 1)
            .read_to_string(&mut text)
            .map_err(|e| match e.kind() {
                std::io::ErrorKind::InvalidData => corrupt("not UTF-8 text".into()),
                _ => read_err(e),
            })?;
        if text.len() as u64 > MAX_KEY_FILE {
            return Err(corrupt(format!("larger than {MAX_KEY_FILE} bytes")));
        }
        let parsed: KeyFile = serde_json::from_str(&text).map_err(|e| {
            // serde_json's message can quote the input; the input is a secret.
            corrupt(format!(
                "not the expected JSON at line {} column {}",
                e.line(),
                e.column()
            ))
        })?;
        let seed = STANDARD
            .decode(parsed.private_key_raw.trim())
            .or_else(|_| URL_SAFE_NO_PAD.decode(parsed.private_key_raw.trim()))
            .map_err(|_| corrupt("privateKeyRaw is not base64".into()))?;
        let seed: [u8; 32] = seed.try_into().map_err(|v: Vec<u8>| {
            corrupt(format!("privateKeyRaw holds {} bytes, not 32", v.len()))
        })?;
        #[cfg(unix)]
        warn_if_shared(path);
        Ok(DeviceIdentity::from_seed(seed))
    }

    /// Writes the key to a private temporary file beside `path`, then links it into place,
    /// which fails (`AlreadyExists`) rather than replace a key someone else published.
    fn publish(&self, path: &Path) -> Result<(), DeviceError> {
        let write_err = |source| DeviceError::Write {
            path: path.to_path_buf(),
            source,
        };
        let dir = match path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        std::fs::create_dir_all(dir).map_err(write_err)?;
        let body = serde_json::to_string(&KeyFile {
            private_key_raw: STANDARD.encode(self.key.to_bytes()),
            device_id: Some(self.id.clone()),
        })
        .map_err(|e| write_err(std::io::Error::other(e)))?;
        let tmp = dir.join(format!(
            ".{}.{}.tmp",
            path.file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_else(|| "device.json".into()),
            uuid::Uuid::new_v4().simple()
        ));
        let written =
            write_private_new(&tmp, body.as_bytes()).and_then(|()| std::fs::hard_link(&tmp, path));
        let _ = std::fs::remove_file(&tmp);
        written.map_err(write_err)?;
        // The link's directory entry must survive a crash too.
        if let Ok(d) = std::fs::File::open(dir) {
            let _ = d.sync_all();
        }
        Ok(())
    }

    /// Hex SHA-256 of the raw public key.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The raw public key, base64url without padding.
    pub fn public_key(&self) -> String {
        URL_SAFE_NO_PAD.encode(self.key.verifying_key().as_bytes())
    }

    /// `connect.device` for this connection: the v3 payload signed with this key.
    /// `nonce` and `signed_at` are the challenge's.
    pub fn sign(
        &self,
        client: &ClientInfo,
        role: &str,
        scopes: &[String],
        token: &str,
        nonce: &str,
        signed_at: u64,
    ) -> DeviceAuth {
        let payload = v3_payload(&self.id, client, role, scopes, signed_at, token, nonce);
        let signature = self.key.sign(payload.as_bytes());
        DeviceAuth {
            id: self.id.clone(),
            public_key: self.public_key(),
            signature: URL_SAFE_NO_PAD.encode(signature.to_bytes()),
            signed_at,
            nonce: nonce.to_string(),
            extra: serde_json::Map::new(),
        }
    }
}

/// Creates `path` (which must not exist) readable by its owner only, with `bytes`, synced.
fn write_private_new(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let mut file = options.open(path)?;
    file.write_all(bytes)?;
    file.sync_all()
}

#[cfg(unix)]
fn warn_if_shared(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    if let Ok(meta) = std::fs::metadata(path)
        && meta.permissions().mode() & 0o077 != 0
    {
        tracing::warn!(path = %path.display(), "the device key is readable by other users; chmod 600 it");
    }
}

/// Hex SHA-256 of a raw public key: the device id.
pub fn device_id(public_key: &[u8]) -> String {
    let digest = Sha256::digest(public_key);
    let mut hex = String::with_capacity(64);
    for b in digest {
        hex.push_str(&format!("{b:02x}"));
    }
    hex
}

/// OpenClaw's `normalizeDeviceMetadataForAuth`: trimmed, ASCII letters lower-cased only.
fn normalize_metadata(value: Option<&str>) -> String {
    value.map(str::trim).unwrap_or("").to_ascii_lowercase()
}

fn device_family(client: &ClientInfo) -> Option<&str> {
    client
        .extra
        .get("deviceFamily")
        .and_then(serde_json::Value::as_str)
}

/// The string a device signs (OpenClaw's `buildDeviceAuthPayloadV3`):
/// `v3|deviceId|clientId|clientMode|role|scope1,scope2|signedAtMs|token|nonce|platform|deviceFamily`.
pub fn v3_payload(
    device_id: &str,
    client: &ClientInfo,
    role: &str,
    scopes: &[String],
    signed_at: u64,
    token: &str,
    nonce: &str,
) -> String {
    [
        "v3",
        device_id,
        &client.id,
        &client.mode,
        role,
        &scopes.join(","),
        &signed_at.to_string(),
        token,
        nonce,
        &normalize_metadata(Some(&client.platform)),
        &normalize_metadata(device_family(client)),
    ]
    .join("|")
}

/// The older v2 string (no platform or family), which OpenClaw still accepts as a fallback.
fn v2_payload(
    device_id: &str,
    client: &ClientInfo,
    role: &str,
    scopes: &[String],
    signed_at: u64,
    token: &str,
    nonce: &str,
) -> String {
    [
        "v2",
        device_id,
        &client.id,
        &client.mode,
        role,
        &scopes.join(","),
        &signed_at.to_string(),
        token,
        nonce,
    ]
    .join("|")
}

/// Base64url with or without padding, or standard base64, as OpenClaw accepts; bounded.
fn decode_b64(input: &str) -> Option<Vec<u8>> {
    if input.is_empty() || input.len() > MAX_BASE64_INPUT {
        return None;
    }
    let url: String = input
        .trim_end_matches('=')
        .chars()
        .map(|c| match c {
            '+' => '-',
            '/' => '_',
            c => c,
        })
        .collect();
    URL_SAFE_NO_PAD.decode(url).ok()
}

/// Checks a `connect.device` against this connection's challenge nonce and the rest of the
/// `connect` request; the verified device id on success.
pub fn verify(
    device: &DeviceAuth,
    client: &ClientInfo,
    role: &str,
    scopes: &[String],
    token: &str,
    expected_nonce: &str,
) -> Result<String, DeviceError> {
    let now = u64::try_from(chrono::Utc::now().timestamp_millis()).unwrap_or(0);
    verify_at(device, client, role, scopes, token, expected_nonce, now)
}

/// `verify` with the clock given (milliseconds since the Unix epoch).
pub fn verify_at(
    device: &DeviceAuth,
    client: &ClientInfo,
    role: &str,
    scopes: &[String],
    token: &str,
    expected_nonce: &str,
    now_ms: u64,
) -> Result<String, DeviceError> {
    let key: [u8; 32] = decode_b64(&device.public_key)
        .and_then(|k| k.try_into().ok())
        .ok_or(DeviceError::BadPublicKey)?;
    if device_id(&key) != device.id {
        return Err(DeviceError::IdMismatch);
    }
    if now_ms.abs_diff(device.signed_at) > MAX_SIGNATURE_AGE_MS {
        return Err(DeviceError::Stale {
            signed_at: device.signed_at,
            now: now_ms,
        });
    }
    let nonce = device.nonce.trim();
    if nonce.is_empty() {
        return Err(DeviceError::NonceMissing);
    }
    if nonce != expected_nonce {
        return Err(DeviceError::NonceMismatch);
    }
    let key = VerifyingKey::from_bytes(&key).map_err(|_| DeviceError::BadPublicKey)?;
    let signature: [u8; 64] = decode_b64(&device.signature)
        .and_then(|s| s.try_into().ok())
        .ok_or(DeviceError::BadSignature)?;
    let signature = Signature::from_bytes(&signature);
    let args = (
        &device.id[..],
        client,
        role,
        scopes,
        device.signed_at,
        token,
        nonce,
    );
    let signed = [v3_payload, v2_payload].into_iter().any(|build| {
        let payload = build(args.0, args.1, args.2, args.3, args.4, args.5, args.6);
        key.verify_strict(payload.as_bytes(), &signature).is_ok()
    });
    if signed {
        Ok(device.id.clone())
    } else {
        Err(DeviceError::BadSignature)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client() -> ClientInfo {
        ClientInfo {
            id: "cli".into(),
            version: "0.1.0".into(),
            platform: "linux".into(),
            mode: "cli".into(),
            display_name: Some("pyclient".into()),
            extra: serde_json::Map::new(),
        }
    }

    fn scopes() -> Vec<String> {
        vec!["operator.admin".into(), "operator.read".into()]
    }

    const NONCE: &str = "13d3d7ac-0000-4000-8000-000000000001";
    const TS: u64 = 1_795_353_364_780;

    fn signed(identity: &DeviceIdentity) -> DeviceAuth {
        identity.sign(&client(), "operator", &scopes(), "tok", NONCE, TS)
    }

    fn check(device: &DeviceAuth) -> Result<String, DeviceError> {
        verify_at(
            device,
            &client(),
            "operator",
            &scopes(),
            "tok",
            NONCE,
            TS + 1000,
        )
    }

    /// Made with client.py's own code (Python `cryptography`) from seed 0x01..0x20:
    /// `load_identity` + the `connect` payload with token "tok", the nonce and ts above.
    #[test]
    fn matches_openclaws_python_client_byte_for_byte() {
        let seed: [u8; 32] = std::array::from_fn(|i| i as u8 + 1);
        let identity = DeviceIdentity::from_seed(seed);
        assert_eq!(identity.id(), PY_DEVICE_ID);
        assert_eq!(identity.public_key(), PY_PUBLIC_KEY);
        let payload = v3_payload(
            identity.id(),
            &client(),
            "operator",
            &scopes(),
            TS,
            "tok",
            NONCE,
        );
        assert_eq!(payload, PY_PAYLOAD);
        let device = signed(&identity);
        assert_eq!(device.signature, PY_SIGNATURE);
        let from_python = DeviceAuth {
            id: PY_DEVICE_ID.into(),
            public_key: PY_PUBLIC_KEY.into(),
            signature: PY_SIGNATURE.into(),
            signed_at: TS,
            nonce: NONCE.into(),
            extra: serde_json::Map::new(),
        };
        assert_eq!(
            check(&from_python).expect("python's signature verifies"),
            PY_DEVICE_ID
        );
    }

    const PY_DEVICE_ID: &str = "65b60673d6ed884bf01c2c222d82ada0740f29ac3355d6a925c81f17f47a27b8";
    const PY_PUBLIC_KEY: &str = "ebVWLo_mVPlAeLES6KmLp5AfhTrmlb7X4OORC60ElmQ";
    const PY_PAYLOAD: &str = "v3|65b60673d6ed884bf01c2c222d82ada0740f29ac3355d6a925c81f17f47a27b8|\
cli|cli|operator|operator.admin,operator.read|1795353364780|tok|13d3d7ac-0000-4000-8000-000000000001|linux|";
    const PY_SIGNATURE: &str =
        "sVH0tXi2LgYu64SSya-pKFv9eQ-4rUVDcfxb0879QOo_GCl2EpbV6nnCVDvtakjCOwpfVgNAPQuYM_bGjjXDBA";

    #[test]
    fn platform_and_family_are_trimmed_and_ascii_lowercased() {
        let mut c = client();
        c.platform = " Linux ".into();
        c.extra
            .insert("deviceFamily".into(), serde_json::json!("iPhone"));
        let p = v3_payload("id", &c, "operator", &[], 5, "", "n");
        assert_eq!(p, "v3|id|cli|cli|operator||5||n|linux|iphone");
    }

    #[test]
    fn a_good_signature_verifies_and_gives_the_id() {
        let identity = DeviceIdentity::generate().expect("random");
        assert_eq!(check(&signed(&identity)).expect("valid"), identity.id());
    }

    #[test]
    fn any_change_to_the_signed_fields_is_refused() {
        let identity = DeviceIdentity::generate().expect("random");
        let device = signed(&identity);
        let mut other_scopes = scopes();
        other_scopes.push("operator.write".into());
        let now = TS + 1000;
        let cases: Vec<Result<String, DeviceError>> = vec![
            verify_at(&device, &client(), "node", &scopes(), "tok", NONCE, now),
            verify_at(
                &device,
                &client(),
                "operator",
                &other_scopes,
                "tok",
                NONCE,
                now,
            ),
            verify_at(
                &device,
                &client(),
                "operator",
                &scopes(),
                "tok2",
                NONCE,
                now,
            ),
            {
                let mut c = client();
                c.platform = "darwin".into();
                verify_at(&device, &c, "operator", &scopes(), "tok", NONCE, now)
            },
        ];
        for r in cases {
            assert!(matches!(r, Err(DeviceError::BadSignature)), "{r:?}");
        }
    }

    #[test]
    fn a_flipped_signature_bit_is_refused() {
        let identity = DeviceIdentity::generate().expect("random");
        let mut device = signed(&identity);
        let mut raw = URL_SAFE_NO_PAD.decode(&device.signature).expect("b64");
        raw[10] ^= 1;
        device.signature = URL_SAFE_NO_PAD.encode(raw);
        assert!(matches!(check(&device), Err(DeviceError::BadSignature)));
        device.signature = "not base64!".into();
        assert!(matches!(check(&device), Err(DeviceError::BadSignature)));
    }

    #[test]
    fn another_connections_nonce_is_refused() {
        let identity = DeviceIdentity::generate().expect("random");
        let device = signed(&identity);
        let r = verify_at(
            &device,
            &client(),
            "operator",
            &scopes(),
            "tok",
            "other",
            TS,
        );
        assert!(matches!(r, Err(DeviceError::NonceMismatch)), "{r:?}");
    }

    #[test]
    fn an_id_that_is_not_the_keys_hash_is_refused() {
        let identity = DeviceIdentity::generate().expect("random");
        let other = DeviceIdentity::generate().expect("random");
        let mut device = signed(&identity);
        device.id = other.id().to_string();
        assert!(matches!(check(&device), Err(DeviceError::IdMismatch)));
        device.public_key = "AAAA".into();
        assert!(matches!(check(&device), Err(DeviceError::BadPublicKey)));
    }

    #[test]
    fn an_old_or_future_signature_is_refused() {
        let identity = DeviceIdentity::generate().expect("random");
        let device = signed(&identity);
        for now in [TS + MAX_SIGNATURE_AGE_MS + 1, TS - MAX_SIGNATURE_AGE_MS - 1] {
            let r = verify_at(&device, &client(), "operator", &scopes(), "tok", NONCE, now);
            assert!(matches!(r, Err(DeviceError::Stale { .. })), "{r:?}");
        }
        let r = verify_at(
            &device,
            &client(),
            "operator",
            &scopes(),
            "tok",
            NONCE,
            TS + MAX_SIGNATURE_AGE_MS,
        );
        assert!(r.is_ok(), "{r:?}");
    }

    #[test]
    fn the_key_file_is_created_private_once_and_reloaded() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("sub").join("device.json");
        let first = DeviceIdentity::load_or_create(&path).expect("created");
        let again = DeviceIdentity::load_or_create(&path).expect("loaded");
        assert_eq!(first.id(), again.id());
        assert_eq!(first.public_key(), again.public_key());
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).expect("meta").permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        let leftovers: Vec<_> = std::fs::read_dir(path.parent().expect("dir"))
            .expect("ls")
            .filter_map(Result::ok)
            .map(|e| e.file_name())
            .collect();
        assert_eq!(leftovers, vec![std::ffi::OsString::from("device.json")]);
        let text = std::fs::read_to_string(&path).expect("read");
        let v: serde_json::Value = serde_json::from_str(&text).expect("json");
        assert!(v["privateKeyRaw"].as_str().is_some_and(|s| s.len() == 44));
        assert!(!format!("{first:?}").contains(v["privateKeyRaw"].as_str().unwrap_or("x")));
    }

    #[test]
    fn processes_creating_the_key_at_once_all_get_the_same_one() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("device.json");
        let ids: Vec<String> = std::thread::scope(|s| {
            let workers: Vec<_> = (0..8)
                .map(|_| {
                    s.spawn(|| DeviceIdentity::load_or_create(&path).map(|d| d.id().to_string()))
                })
                .collect();
            workers
                .into_iter()
                .map(|w| w.join().expect("no panic").expect("identity"))
                .collect()
        });
        assert!(ids.iter().all(|i| i == &ids[0]), "{ids:?}");
        assert_eq!(DeviceIdentity::load(&path).expect("load").id(), ids[0]);
    }

    #[test]
    fn a_corrupt_key_file_is_a_clear_error_and_is_not_replaced() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("device.json");
        for (body, says) in [
            ("{not json", "not the expected JSON"),
            (r#"{"privateKeyRaw": "!!"}"#, "not base64"),
            (r#"{"privateKeyRaw": "AAAA"}"#, "3 bytes, not 32"),
        ] {
            std::fs::write(&path, body).expect("write");
            let e = DeviceIdentity::load_or_create(&path).expect_err("corrupt");
            let msg = e.to_string();
            assert!(msg.contains(says) && msg.contains("device.json"), "{msg}");
            assert_eq!(std::fs::read_to_string(&path).expect("kept"), body);
        }
    }

    #[test]
    fn an_unreadable_key_file_is_an_error_not_a_new_key() {
        let dir = tempfile::tempdir().expect("tempdir");
        // A directory where the file should be: unreadable as a file, even for root.
        let path = dir.path().join("device.json");
        std::fs::create_dir(&path).expect("mkdir");
        let e = DeviceIdentity::load_or_create(&path).expect_err("unreadable");
        assert!(e.to_string().contains("cannot read the device key"), "{e}");
        assert!(path.is_dir());
    }

    #[test]
    fn a_key_written_by_openclaws_python_client_loads() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("pyclient-device.json");
        let seed: [u8; 32] = std::array::from_fn(|i| i as u8 + 1);
        std::fs::write(
            &path,
            format!(r#"{{"privateKeyRaw": "{}"}}"#, STANDARD.encode(seed)),
        )
        .expect("write");
        let identity = DeviceIdentity::load(&path).expect("loads");
        assert_eq!(identity.id(), PY_DEVICE_ID);
    }
}

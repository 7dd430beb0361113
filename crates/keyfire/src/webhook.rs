//! Standard Webhooks (v1) signatures: what the `http` handler puts on every delivery, and
//! [`verify`] for a Rust receiver.
//!
//! A delivery carries three headers:
//!
//! - `webhook-id`: the firing id, the same on every attempt (an idempotency key);
//! - `webhook-timestamp`: when the attempt was sent, in Unix seconds;
//! - `webhook-signature`: `v1,<base64 of HMAC-SHA256 over "{id}.{timestamp}.{body}">`, one per
//!   active secret, separated by spaces (two during a rotation).
//!
//! A secret is written `whsec_<base64 of 24 to 64 random bytes>`, as the spec's libraries
//! (`standardwebhooks` for Python, Node, Go, …) take it; the HMAC key is the decoded bytes.

use std::fmt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use base64::engine::general_purpose::{GeneralPurpose, GeneralPurposeConfig, STANDARD};
use base64::engine::{DecodePaddingMode, general_purpose};
use hmac::{KeyInit, Mac};
use sha2::{Digest, Sha256};

type HmacSha256 = hmac::Hmac<Sha256>;

/// The prefix of a secret as written.
pub const SECRET_PREFIX: &str = "whsec_";
/// How far a timestamp may be from now before [`verify`] refuses it (the spec's default).
pub const DEFAULT_TOLERANCE: Duration = Duration::from_secs(5 * 60);
/// Fewest key bytes a secret may decode to (the spec's recommendation).
pub const MIN_KEY_BYTES: usize = 24;
/// Most key bytes a secret may decode to (the spec's recommendation).
pub const MAX_KEY_BYTES: usize = 64;
/// Secrets active at once: the current one, and the one being rotated out.
pub const MAX_ACTIVE_SECRETS: usize = 2;

/// Standard base64, padded or not (the spec's libraries accept both).
const LENIENT: GeneralPurpose = GeneralPurpose::new(
    &base64::alphabet::STANDARD,
    GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
);

/// A `whsec_…` signing secret. Its `Debug` and [`SigningSecret::redacted`] forms never show
/// the key, only a fingerprint (the first 8 hex digits of SHA-256 of the key), so two secrets
/// can be told apart in logs and API views.
#[derive(Clone, PartialEq, Eq)]
pub struct SigningSecret {
    key: Vec<u8>,
}

impl SigningSecret {
    /// Parse `whsec_<base64>`; the error says what is wrong, in words a user can act on.
    pub fn parse(text: &str) -> Result<Self, String> {
        if is_redacted(text) {
            return Err("is a redacted secret as keyfire shows it; send the secret itself".into());
        }
        let Some(b64) = text.trim().strip_prefix(SECRET_PREFIX) else {
            return Err(format!(
                "must start with '{SECRET_PREFIX}' followed by base64 (a Standard Webhooks secret)"
            ));
        };
        let key = LENIENT
            .decode(b64)
            .map_err(|e| format!("the part after '{SECRET_PREFIX}' is not base64: {e}"))?;
        if !(MIN_KEY_BYTES..=MAX_KEY_BYTES).contains(&key.len()) {
            return Err(format!(
                "must decode to {MIN_KEY_BYTES} to {MAX_KEY_BYTES} bytes, not {}",
                key.len()
            ));
        }
        Ok(Self { key })
    }

    /// A secret of these key bytes (for tests and generators; [`SigningSecret::parse`] checks
    /// the length, this does not).
    pub fn from_key(key: impl Into<Vec<u8>>) -> Self {
        Self { key: key.into() }
    }

    /// The secret as written: `whsec_<base64>`.
    pub fn expose(&self) -> String {
        format!("{SECRET_PREFIX}{}", STANDARD.encode(&self.key))
    }

    /// First 8 hex digits of SHA-256 of the key.
    pub fn fingerprint(&self) -> String {
        let digest = Sha256::digest(&self.key);
        digest[..4].iter().map(|b| format!("{b:02x}")).collect()
    }

    /// How keyfire shows the secret: `whsec_…redacted:<fingerprint>`.
    pub fn redacted(&self) -> String {
        format!("{REDACTED_PREFIX}{}", self.fingerprint())
    }

    /// `v1,<base64 signature>` of one message.
    pub fn sign(&self, id: &str, timestamp: i64, body: &[u8]) -> String {
        let sig = self.mac(id, timestamp, body).finalize().into_bytes();
        format!("v1,{}", STANDARD.encode(sig))
    }

    fn mac(&self, id: &str, timestamp: i64, body: &[u8]) -> HmacSha256 {
        let mut mac = HmacSha256::new_from_slice(&self.key).expect("HMAC takes any key length");
        mac.update(id.as_bytes());
        mac.update(b".");
        mac.update(timestamp.to_string().as_bytes());
        mac.update(b".");
        mac.update(body);
        mac
    }
}

impl fmt::Debug for SigningSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.redacted())
    }
}

const REDACTED_PREFIX: &str = "whsec_…redacted:";

/// Whether `text` is a secret in the form keyfire shows it back.
pub fn is_redacted(text: &str) -> bool {
    text.trim().starts_with(REDACTED_PREFIX)
}

/// `text` as keyfire shows a secret: the redacted form when it parses, else a placeholder that
/// shows nothing of it.
pub fn redact(text: &str) -> String {
    match SigningSecret::parse(text) {
        Ok(s) => s.redacted(),
        Err(_) if is_redacted(text) => text.to_string(),
        Err(_) => format!("{REDACTED_PREFIX}invalid"),
    }
}

/// The `webhook-signature` value for `secrets`: one `v1,…` per secret, space-separated.
pub fn signature_header(
    secrets: &[SigningSecret],
    id: &str,
    timestamp: i64,
    body: &[u8],
) -> String {
    let mut out = String::new();
    for s in secrets {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(&s.sign(id, timestamp, body));
    }
    out
}

/// The three Standard Webhooks headers of a request, as received.
#[derive(Debug, Clone, Copy)]
pub struct WebhookHeaders<'a> {
    /// `webhook-id`.
    pub id: &'a str,
    /// `webhook-timestamp`.
    pub timestamp: &'a str,
    /// `webhook-signature`.
    pub signature: &'a str,
}

/// Why [`verify`] refused a request.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum VerifyError {
    /// `webhook-timestamp` is not a number of seconds.
    #[error("webhook-timestamp is not a Unix timestamp")]
    BadTimestamp,
    /// The timestamp is further than the tolerance from now (a replay, or a clock far off).
    #[error("webhook-timestamp is {0} s from now, outside the tolerance")]
    OutOfTolerance(i64),
    /// No `v1` signature in `webhook-signature` matches the body under the secret.
    #[error("no matching signature")]
    NoMatch,
}

/// Verify a request under `secret` against the system clock, with the spec's 5-minute
/// tolerance. `body` is the raw body as received (before any JSON parsing).
///
/// ```
/// use keyfire::handler::webhook::{SigningSecret, WebhookHeaders, verify};
/// let secret = SigningSecret::parse("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap();
/// let now = std::time::SystemTime::now()
///     .duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() as i64;
/// let sig = secret.sign("msg_1", now, b"{}");
/// let headers = WebhookHeaders { id: "msg_1", timestamp: &now.to_string(), signature: &sig };
/// assert!(verify(&secret, headers, b"{}").is_ok());
/// assert!(verify(&secret, headers, b"{ }").is_err());
/// ```
pub fn verify(
    secret: &SigningSecret,
    headers: WebhookHeaders<'_>,
    body: &[u8],
) -> Result<(), VerifyError> {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64);
    verify_at(secret, headers, body, now, DEFAULT_TOLERANCE)
}

/// [`verify`] at a given `now` (Unix seconds) and tolerance.
pub fn verify_at(
    secret: &SigningSecret,
    headers: WebhookHeaders<'_>,
    body: &[u8],
    now: i64,
    tolerance: Duration,
) -> Result<(), VerifyError> {
    let timestamp: i64 = headers
        .timestamp
        .trim()
        .parse()
        .map_err(|_| VerifyError::BadTimestamp)?;
    let off = timestamp.saturating_sub(now);
    if off.unsigned_abs() > tolerance.as_secs() {
        return Err(VerifyError::OutOfTolerance(off));
    }
    let mac = secret.mac(headers.id, timestamp, body);
    let matched = headers.signature.split(' ').any(|versioned| {
        let Some(b64) = versioned.strip_prefix("v1,") else {
            return false;
        };
        let Ok(sig) = general_purpose::STANDARD.decode(b64) else {
            return false;
        };
        // Constant-time comparison.
        mac.clone().verify_slice(&sig).is_ok()
    });
    if matched {
        Ok(())
    } else {
        Err(VerifyError::NoMatch)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // The spec's reference vector (the same in every `standardwebhooks` library's tests).
    const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    const ID: &str = "msg_p5jXN8AQM9LWM0D4loKWxJek";
    const TS: i64 = 1614265330;
    const BODY: &[u8] = br#"{"test": 2432232314}"#;
    const SIG: &str = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=";

    #[test]
    fn signs_the_reference_vector() {
        let s = SigningSecret::parse(SECRET).unwrap();
        assert_eq!(s.sign(ID, TS, BODY), SIG);
        assert_eq!(s.expose(), SECRET);
    }

    #[test]
    fn only_a_matching_signature_within_tolerance_verifies() {
        let s = SigningSecret::parse(SECRET).unwrap();
        let h = |sig: &'static str| WebhookHeaders {
            id: ID,
            timestamp: "1614265330",
            signature: sig,
        };
        let tol = DEFAULT_TOLERANCE;
        verify_at(&s, h(SIG), BODY, TS + 10, tol).unwrap();
        // Several signatures, one matching (a rotation).
        let two = Box::leak(format!("v1,AAAA v1a,zzz {SIG}").into_boxed_str());
        verify_at(&s, h(two), BODY, TS, tol).unwrap();
        let mut changed = BODY.to_vec();
        changed[3] ^= 1;
        assert_eq!(
            verify_at(&s, h(SIG), &changed, TS, tol),
            Err(VerifyError::NoMatch)
        );
        assert_eq!(
            verify_at(&s, h(SIG), BODY, TS + 301, tol),
            Err(VerifyError::OutOfTolerance(-301))
        );
        assert_eq!(
            verify_at(&s, h(SIG), BODY, TS - 400, tol),
            Err(VerifyError::OutOfTolerance(400))
        );
        let other = SigningSecret::from_key(vec![7u8; 32]);
        assert_eq!(
            verify_at(&other, h(SIG), BODY, TS, tol),
            Err(VerifyError::NoMatch)
        );
    }

    #[test]
    fn bad_secrets_are_refused_naming_what_is_wrong() {
        assert!(
            SigningSecret::parse("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
                .unwrap_err()
                .contains("whsec_")
        );
        assert!(
            SigningSecret::parse("whsec_not base64!")
                .unwrap_err()
                .contains("base64")
        );
        assert!(
            SigningSecret::parse("whsec_c2hvcnQ=")
                .unwrap_err()
                .contains("24 to 64")
        );
        // Unpadded base64 is accepted, as the spec's libraries accept it.
        let key = STANDARD.encode([1u8; 25]);
        SigningSecret::parse(&format!("whsec_{}", key.trim_end_matches('='))).unwrap();
    }

    #[test]
    fn secrets_are_never_shown() {
        let s = SigningSecret::parse(SECRET).unwrap();
        let shown = format!("{s:?} {}", redact(SECRET));
        assert!(!shown.contains("MfKQ9r8G"), "{shown}");
        assert!(is_redacted(&s.redacted()));
        assert!(
            SigningSecret::parse(&s.redacted())
                .unwrap_err()
                .contains("redacted")
        );
        assert_eq!(redact(&s.redacted()), s.redacted());
        assert!(!redact("whsec_oops").contains("oops"));
    }
}

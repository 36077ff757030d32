//! Personal API tokens: `slt_` followed by 64 hex digits (32 random bytes). Only their SHA-256 is
//! stored; a token is shown once, when it is made.

use sha2::{Digest, Sha256};

/// The prefix that tells a personal token from the Slurm plugin's ingest secret.
pub const PREFIX: &str = "slt_";

/// A token as a client sends it. Parsing checks the shape only; whether it is live is the store's word.
#[derive(Clone, PartialEq, Eq)]
pub struct TokenSecret(String);

/// The stored form of a token: its SHA-256 in lower-case hex.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenHash(pub String);

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum BadToken {
    #[error("a personal token is `slt_` followed by 64 hex digits")]
    Shape,
}

impl TokenSecret {
    /// A new token from the operating system's random source.
    pub fn generate() -> Self {
        Self(random_secret(PREFIX))
    }

    pub fn hash(&self) -> TokenHash {
        TokenHash(sha256_hex(&self.0))
    }

    /// The token itself, for the one answer that shows it.
    pub fn reveal(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for TokenSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TokenSecret(<redacted>)")
    }
}

impl std::str::FromStr for TokenSecret {
    type Err = BadToken;

    fn from_str(text: &str) -> Result<Self, BadToken> {
        if has_secret_shape(PREFIX, text) { Ok(Self(text.to_string())) } else { Err(BadToken::Shape) }
    }
}

/// `prefix` and 64 lower-case hex digits: 32 bytes from the operating system's random source.
pub(crate) fn random_secret(prefix: &str) -> String {
    use rand::RngCore;
    let mut bytes = [0u8; 32];
    rand::rngs::OsRng.fill_bytes(&mut bytes);
    format!("{prefix}{}", hex(&bytes))
}

/// Whether `text` is `prefix` followed by 64 lower-case hex digits.
pub(crate) fn has_secret_shape(prefix: &str, text: &str) -> bool {
    text.strip_prefix(prefix).is_some_and(|digits| {
        digits.len() == 64 && digits.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    })
}

/// The SHA-256 of `text` in lower-case hex: what is stored of a secret.
pub(crate) fn sha256_hex(text: &str) -> String {
    hex(&Sha256::digest(text.as_bytes()))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

/// What a user calls a token: 1–64 printable characters, no control characters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenName(String);

impl TokenName {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::str::FromStr for TokenName {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        let name = text.trim();
        if name.is_empty() || name.chars().count() > 64 {
            return Err("a token name has 1 to 64 characters".into());
        }
        if name.chars().any(char::is_control) {
            return Err("a token name has no control characters".into());
        }
        Ok(Self(name.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_tokens_parse_differ_and_hash_to_64_hex_digits() {
        let (a, b) = (TokenSecret::generate(), TokenSecret::generate());
        assert_ne!(a, b);
        assert_eq!(a.reveal().parse::<TokenSecret>(), Ok(a.clone()));
        let hash = a.hash().0;
        assert_eq!(hash.len(), 64);
        assert!(!hash.contains(&a.reveal()[PREFIX.len()..]), "the hash is not the token");
        assert_eq!(a.hash(), a.hash());
        assert!(!format!("{a:?}").contains(&a.reveal()[4..]), "Debug never prints a token");
    }

    #[test]
    fn malformed_tokens_and_names_are_refused() {
        for bad in
            ["", "slt_", "slt_XYZ", "abc", &format!("slt_{}", "A".repeat(64)), &format!("slt_{}", "0".repeat(63))]
        {
            assert_eq!(bad.parse::<TokenSecret>(), Err(BadToken::Shape), "{bad:?}");
        }
        assert!("".parse::<TokenName>().is_err());
        assert!("a\nb".parse::<TokenName>().is_err());
        assert!("x".repeat(65).parse::<TokenName>().is_err());
        assert_eq!("  ci  ".parse::<TokenName>().map(|n| n.as_str().to_string()), Ok("ci".into()));
    }
}

//! Shared report links: `sls_` followed by 64 hex digits (32 random bytes) in a link the job's owner hands
//! to a colleague or a support ticket. Only their SHA-256 is stored; a link is shown once, when made.

use super::token::{has_secret_shape, random_secret, sha256_hex};

/// The prefix that tells a share link's secret from a personal token.
pub const PREFIX: &str = "sls_";
/// How long a link lives unless its maker says otherwise, and at most.
pub const DEFAULT_DAYS: u32 = 7;
pub const MAX_DAYS: u32 = 90;

/// A link's secret as it arrives in a URL. Parsing checks the shape only; whether it is live is the store's word.
#[derive(Clone, PartialEq, Eq)]
pub struct ShareSecret(String);

/// The stored form of a link's secret: its SHA-256 in lower-case hex.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShareHash(pub String);

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("a shared report's link ends in `sls_` followed by 64 hex digits")]
pub struct BadShare;

impl ShareSecret {
    /// A new secret from the operating system's random source.
    pub fn generate() -> Self {
        Self(random_secret(PREFIX))
    }

    pub fn hash(&self) -> ShareHash {
        ShareHash(sha256_hex(&self.0))
    }

    /// The secret itself, for the one answer that shows the link.
    pub fn reveal(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for ShareSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ShareSecret(<redacted>)")
    }
}

impl std::str::FromStr for ShareSecret {
    type Err = BadShare;

    fn from_str(text: &str) -> Result<Self, BadShare> {
        if has_secret_shape(PREFIX, text) { Ok(Self(text.to_string())) } else { Err(BadShare) }
    }
}

/// What the maker notes on a link (a ticket number, a colleague's name): up to 200 characters, no control ones.
pub fn parse_note(text: &str) -> Result<String, String> {
    let note = text.trim();
    if note.chars().count() > 200 {
        return Err("a note has at most 200 characters".into());
    }
    if note.chars().any(char::is_control) {
        return Err("a note has no control characters".into());
    }
    Ok(note.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_parse_differ_and_are_not_tokens() {
        let (a, b) = (ShareSecret::generate(), ShareSecret::generate());
        assert_ne!(a, b);
        assert_eq!(a.reveal().parse::<ShareSecret>(), Ok(a.clone()));
        assert_ne!(a.hash(), b.hash());
        assert!(!format!("{a:?}").contains(&a.reveal()[4..]), "Debug never prints a link's secret");
        let token = crate::domain::token::TokenSecret::generate();
        assert_eq!(token.reveal().parse::<ShareSecret>(), Err(BadShare), "a token is not a link");
        for bad in ["", "sls_", &format!("sls_{}", "A".repeat(64)), &format!("sls_{}/x", "0".repeat(64))] {
            assert_eq!(bad.parse::<ShareSecret>(), Err(BadShare), "{bad:?}");
        }
    }

    #[test]
    fn notes_are_short_plain_text() {
        assert_eq!(parse_note("  ticket 4711 "), Ok("ticket 4711".into()));
        assert!(parse_note("a\u{7}b").is_err());
        assert!(parse_note(&"x".repeat(201)).is_err());
    }
}

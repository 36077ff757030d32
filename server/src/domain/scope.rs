//! Who is asking: every query over jobs takes a [`ViewerScope`].

/// What one viewer may see. Built from slurmdbd's own data (`acct_coord_table`, associations).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ViewerScope {
    /// Provider staff: every job of every user.
    Staff,
    /// A cluster user: their own jobs, plus every job of the accounts they coordinate
    /// (sub-accounts included, already expanded).
    User { name: String, coordinated_accounts: Vec<String> },
    /// Nobody signed in: no job is visible.
    Nobody,
}

impl ViewerScope {
    /// Whether a job of `user` in `account` is visible.
    pub fn can_see(&self, user: &str, account: &str) -> bool {
        match self {
            Self::Staff => true,
            Self::User { name, coordinated_accounts } => {
                name == user || coordinated_accounts.iter().any(|coordinated| coordinated == account)
            }
            Self::Nobody => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn users_see_own_and_coordinated_jobs_only() {
        let carol =
            ViewerScope::User { name: "carol".into(), coordinated_accounts: vec!["ml".into(), "ml-vision".into()] };
        assert!(carol.can_see("carol", "physics"));
        assert!(carol.can_see("alice", "ml-vision"));
        assert!(!carol.can_see("bob", "physics"));
        assert!(ViewerScope::Staff.can_see("bob", "physics"));
        assert!(!ViewerScope::Nobody.can_see("bob", "physics"));
    }
}

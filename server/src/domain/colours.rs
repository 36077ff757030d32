//! Stable colour slots: each user and account of a cluster takes the next slot of the pages' palette in
//! the order slurmdbd first associated it, so its colour never depends on what a page happens to show
//! (the zoom, a filter, the page). Only values `slots` or more apart in that order share a slot.

use std::collections::BTreeMap;

use super::scope::ViewerScope;

/// Palette slots of users and accounts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ColourSlots {
    pub users: BTreeMap<String, u32>,
    pub accounts: BTreeMap<String, u32>,
}

/// From a cluster's associations `(user, account)` in the order they were made (an account's own row
/// has the user `""`): each user and account ranked by its first association, modulo `slots`. Only
/// the users and accounts of associations `scope` may see are in the answer.
pub fn colour_slots(associations: &[(String, String)], slots: u32, scope: &ViewerScope) -> ColourSlots {
    let slots = slots.max(1);
    let mut user_rank: BTreeMap<&str, u32> = BTreeMap::new();
    let mut account_rank: BTreeMap<&str, u32> = BTreeMap::new();
    for (user, account) in associations {
        let next = account_rank.len() as u32;
        account_rank.entry(account.as_str()).or_insert(next);
        if !user.is_empty() {
            let next = user_rank.len() as u32;
            user_rank.entry(user.as_str()).or_insert(next);
        }
    }
    let mut answer = ColourSlots::default();
    for (user, account) in associations.iter().filter(|(user, _)| !user.is_empty()) {
        if scope.can_see(user, account) {
            answer.users.insert(user.clone(), user_rank[user.as_str()] % slots);
            answer.accounts.insert(account.clone(), account_rank[account.as_str()] % slots);
        }
    }
    answer
}

#[cfg(test)]
mod tests {
    use super::*;

    fn associations() -> Vec<(String, String)> {
        [("", "root"), ("", "ml"), ("alice", "ml"), ("", "bio"), ("bob", "bio"), ("carol", "ml"), ("bob", "ml")]
            .iter()
            .map(|(user, account)| (user.to_string(), account.to_string()))
            .collect()
    }

    #[test]
    fn users_and_accounts_take_slots_in_the_order_they_were_associated() {
        let slots = colour_slots(&associations(), 24, &ViewerScope::Staff);
        assert_eq!(slots.users, [("alice".into(), 0), ("bob".into(), 1), ("carol".into(), 2)].into());
        assert_eq!(slots.accounts, [("ml".into(), 1), ("bio".into(), 2)].into(), "root has no user association");
        let wrapped = colour_slots(&associations(), 2, &ViewerScope::Staff);
        assert_eq!(wrapped.users["carol"], 0, "the third user shares the first one's slot of two");
    }

    #[test]
    fn a_user_learns_only_the_slots_of_what_they_may_see() {
        let alice = ViewerScope::User { name: "alice".into(), coordinated_accounts: Vec::new() };
        let slots = colour_slots(&associations(), 24, &alice);
        assert_eq!(slots.users, [("alice".into(), 0)].into(), "the same slot staff see");
        assert_eq!(slots.accounts, [("ml".into(), 1)].into());
        let coordinator = ViewerScope::User { name: "dave".into(), coordinated_accounts: vec!["bio".into()] };
        let slots = colour_slots(&associations(), 24, &coordinator);
        assert_eq!(slots.users, [("bob".into(), 1)].into());
        assert!(colour_slots(&associations(), 24, &ViewerScope::Nobody).users.is_empty());
    }
}

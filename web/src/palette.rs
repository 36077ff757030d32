//! Colour-blind-safe colours: a stable colour per user, account, partition and job ([`IDENTITY`],
//! from Paul Tol's and Okabe–Ito's schemes), the Okabe–Ito set for job states, viridis for efficiency,
//! and Tol's "muted" scheme for chart lines. No user, account or job is ever grey: grey means "no
//! report", "cancelled" or a GPU the viewer may not see.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use slurmlens_slurm::state::{JobStateBase, StateFilter};

/// Tol's muted qualitative scheme: distinguishable under the common colour-vision deficiencies (the
/// report's chart lines).
pub const CATEGORICAL: [&str; 9] =
    ["#332288", "#88CCEE", "#44AA99", "#117733", "#999933", "#DDCC77", "#CC6677", "#882255", "#AA4499"];

/// Colours of users, accounts, partitions and jobs: Tol's muted, vibrant, light and dark schemes and
/// Okabe–Ito's, without their greys, then eight from ColorBrewer's Paired, PRGn, BrBG and PiYG, each
/// the farthest (in RGB) from those before it; ordered so that neighbouring slots differ in lightness
/// as well as hue. Thirty-two, so that a cluster of some thirty users (sakura's 29) gives each its own;
/// each value keeps its slot wherever it is drawn ([`ColourSlots`]). No palette of this size stays
/// distinct under every colour-vision deficiency, so the legend and every hover name the value.
pub const IDENTITY: [&str; 32] = [
    "#332288", "#DDCC77", "#117733", "#88CCEE", "#882255", "#44AA99", "#EE7733", "#AA4499", "#999933", "#0077BB",
    "#FFAABB", "#225555", "#CC6677", "#BBCC33", "#663333", "#77AADD", "#EE3377", "#666633", "#F0E442", "#CC3311",
    "#009E73", "#E69F00", "#222255", "#56B4E9", "#004488", "#CAB2D6", "#4D9221", "#DE77AE", "#6A3D9A", "#AAAA00",
    "#8C510A", "#5AAE61",
];

/// For values without a colour of their own: a state not listed, an efficiency without a report.
pub const OTHER: &str = "#BBBBBB";

/// Free (unallocated) cells in the grid: white with an outline, an empty slot.
pub const FREE: &str = "#FFFFFF";
/// A GPU held by a job the viewer may not see: a neutral grey hatch, unlike any job colour.
pub const BUSY: &str = "repeating-linear-gradient(135deg, #A8A8A8 0 2px, #E4E4E4 2px 4px)";
/// [`BUSY`] as one colour, for a stop in a node's gradient.
pub const BUSY_SOLID: &str = "#B4B4B4";

/// Okabe–Ito colours by sacct state word; flags sacct prints in the state's place (`COMPLETING`) are
/// [`OTHER`].
pub fn state_colour(state: &str) -> &'static str {
    use StateFilter::{Base, Requeued};
    match StateFilter::of_printed(state) {
        Some(Base(JobStateBase::Running)) => "#0072B2",
        Some(Base(JobStateBase::Completed)) => "#009E73",
        Some(Base(JobStateBase::Failed)) => "#D55E00",
        Some(Base(JobStateBase::Timeout | JobStateBase::Deadline)) => "#E69F00",
        Some(Base(JobStateBase::OutOfMemory)) => "#CC79A7",
        Some(Base(JobStateBase::NodeFail | JobStateBase::BootFail)) => "#000000",
        Some(Base(JobStateBase::Preempted) | Requeued) => "#56B4E9",
        Some(Base(JobStateBase::Suspended | JobStateBase::Pending)) => "#F0E442",
        Some(Base(JobStateBase::Cancelled)) => "#999999",
        None => OTHER,
    }
}

/// What the bars or cells are coloured by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum ColourBy {
    #[default]
    User,
    Account,
    Partition,
    State,
    Job,
    /// How well the job used its GPUs (from its archived report): see [`EFFICIENCY`].
    Efficiency,
}

/// Efficiency classes, from a job's mean GPU utilisation and tensor-pipe activity, with a sequential
/// (viridis) colour each. "GPU util 100 %" with little tensor work is busy, not efficient. "Not
/// measured": no report yet, no samples, or only a shared node's GPUs, none of them placed as the job's.
pub const EFFICIENCY: [(&str, &str); 6] = [
    ("not measured", OTHER),
    ("idle: GPU util < 5 %", "#440154"),
    ("GPU util 5–40 %", "#3E4A89"),
    ("busy, tensor < 15 % or unknown", "#26828E"),
    ("busy, tensor 15–30 %", "#6DCD59"),
    ("tensor ≥ 30 %", "#FDE725"),
];

/// The [`EFFICIENCY`] class of a job's means (percent).
pub fn efficiency_class(gpu_util: Option<f64>, tensor_active: Option<f64>) -> u8 {
    match (gpu_util, tensor_active) {
        (None, _) => 0,
        (Some(util), _) if util < 5.0 => 1,
        (Some(util), _) if util < 40.0 => 2,
        (Some(_), Some(tensor)) if tensor >= 30.0 => 5,
        (Some(_), Some(tensor)) if tensor >= 15.0 => 4,
        (Some(_), _) => 3,
    }
}

fn efficiency_colour(label: &str) -> &'static str {
    EFFICIENCY.iter().find(|(name, _)| *name == label).map_or(OTHER, |(_, colour)| colour)
}

impl ColourBy {
    /// Every choice, in menu order.
    pub const ALL: [ColourBy; 6] =
        [Self::User, Self::Account, Self::Partition, Self::State, Self::Job, Self::Efficiency];

    /// The query-string word.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::User => "user",
            Self::Account => "account",
            Self::Partition => "partition",
            Self::State => "state",
            Self::Job => "job",
            Self::Efficiency => "efficiency",
        }
    }

    /// Parses the query-string word; unknown words give the default.
    pub fn parse(word: &str) -> Self {
        Self::ALL.into_iter().find(|choice| choice.as_str() == word).unwrap_or_default()
    }
}

/// One legend entry: a label, its colour and how many items carry it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LegendEntry {
    pub label: String,
    pub colour: String,
    pub count: usize,
}

/// Colours of the values present (users, states, …), each with its own colour; the legend lists every
/// value, most frequent first.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Categories {
    colour_of: BTreeMap<String, &'static str>,
    pub legend: Vec<LegendEntry>,
}

impl Categories {
    /// From (value, count) pairs, each value in `colour_of(value)`; ties break by value so the legend
    /// is stable.
    pub fn identified(
        counts: impl IntoIterator<Item = (String, usize)>,
        colour_of: impl Fn(&str) -> &'static str,
    ) -> Self {
        let mut categories = Self::default();
        let mut ranked: Vec<(String, usize)> = counts.into_iter().collect();
        ranked.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        for (value, count) in ranked {
            let colour = colour_of(&value);
            categories.colour_of.insert(value.clone(), colour);
            categories.legend.push(LegendEntry { label: value, colour: colour.into(), count });
        }
        categories
    }

    /// States keep their fixed colours; the legend lists those present.
    pub fn states(counts: impl IntoIterator<Item = (String, usize)>) -> Self {
        Self::identified(counts, state_colour)
    }

    /// Efficiency classes keep their fixed colours; the legend lists those present.
    pub fn efficiency(counts: impl IntoIterator<Item = (String, usize)>) -> Self {
        Self::identified(counts, efficiency_colour)
    }

    /// The colour of `value` (a value not counted: [`OTHER`]).
    pub fn colour(&self, value: &str) -> &'static str {
        self.colour_of.get(value).copied().unwrap_or(OTHER)
    }
}

/// Stable colour slots (indices into [`IDENTITY`]) of a cluster's users and accounts, in the order
/// slurmdbd first associated them: a user keeps one colour at every zoom, filter and page, and only
/// values [`IDENTITY`]`.len()` or more apart in that order share one. A value without a slot (its
/// source failed, a partition) takes one from a hash of its name, which is stable too.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ColourSlots {
    #[serde(default)]
    pub users: BTreeMap<String, u32>,
    #[serde(default)]
    pub accounts: BTreeMap<String, u32>,
}

impl ColourSlots {
    /// The colour of user `name`.
    pub fn user(&self, name: &str) -> &'static str {
        self.users.get(name).map_or_else(|| hashed_colour(name), |&slot| IDENTITY[slot as usize % IDENTITY.len()])
    }

    /// The colour of account `name`.
    pub fn account(&self, name: &str) -> &'static str {
        self.accounts.get(name).map_or_else(|| hashed_colour(name), |&slot| IDENTITY[slot as usize % IDENTITY.len()])
    }

    /// Only the slots of the users and accounts a page shows: what it sends to the browser names no
    /// one else.
    pub fn retain_shown<'a>(
        &mut self,
        users: impl IntoIterator<Item = &'a str>,
        accounts: impl IntoIterator<Item = &'a str>,
    ) {
        let users: std::collections::BTreeSet<&str> = users.into_iter().collect();
        let accounts: std::collections::BTreeSet<&str> = accounts.into_iter().collect();
        self.users.retain(|name, _| users.contains(name.as_str()));
        self.accounts.retain(|name, _| accounts.contains(name.as_str()));
    }
}

/// A stable colour from a value's name (FNV-1a, then a mixer so that `u01` and `u02` spread).
pub fn hashed_colour(value: &str) -> &'static str {
    let mut hash =
        value.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |hash, b| (hash ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3));
    hash = (hash ^ (hash >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    hash = (hash ^ (hash >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    hash ^= hash >> 31;
    IDENTITY[(hash % IDENTITY.len() as u64) as usize]
}

/// A job's own colour, the same on every page and at every moment: consecutive job ids differ.
pub fn job_colour(job_id: &str) -> &'static str {
    match job_id.parse::<u64>() {
        Ok(id) => IDENTITY[(id % IDENTITY.len() as u64) as usize],
        Err(_) => hashed_colour(job_id),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_value_keeps_its_own_colour_whatever_else_is_counted() {
        // Regression (review "pages a tenant and a site can trust", problem 5): colours went to the
        // top nine values of the view, so a user changed colour with the zoom and the rest were grey.
        let slots =
            ColourSlots { users: (0..33).map(|i| (format!("u{i:02}"), i)).collect(), accounts: BTreeMap::new() };
        let day = Categories::identified((0..12).map(|i| (format!("u{i:02}"), 100 - i)), |name| slots.user(name));
        let month = Categories::identified((0..28).map(|i| (format!("u{i:02}"), i + 1)), |name| slots.user(name));
        for i in 0..12 {
            let name = format!("u{i:02}");
            assert_eq!(day.colour(&name), month.colour(&name), "{name} keeps its colour");
        }
        assert_eq!(day.legend.len(), 12, "every value is in the legend, none is `other`");
        assert!(day.legend.iter().chain(&month.legend).all(|entry| entry.colour != OTHER));
        // Slots within the palette's size are distinct (sakura's 29 users each have their own, issue
        // #36); the 33rd user shares the first one's.
        let colours: std::collections::BTreeSet<&str> = (0..32).map(|i| slots.user(&format!("u{i:02}"))).collect();
        assert_eq!(colours.len(), 32);
        assert_eq!(slots.user("u32"), slots.user("u00"));
        assert!(!IDENTITY.contains(&OTHER) && !IDENTITY.contains(&FREE), "grey and white never mean a user");
    }

    #[test]
    fn values_without_a_slot_and_jobs_have_stable_colours() {
        let none = ColourSlots::default();
        assert_eq!(none.user("carol"), hashed_colour("carol"));
        assert_eq!(hashed_colour("carol"), hashed_colour("carol"));
        let spread: std::collections::BTreeSet<&str> = (1..=24).map(|i| hashed_colour(&format!("u{i:02}"))).collect();
        assert!(spread.len() >= 12, "similar names spread over the palette ({})", spread.len());
        assert_ne!(job_colour("1193075"), job_colour("1193076"), "consecutive jobs differ");
        assert_eq!(job_colour("1193075"), job_colour("1193075"));
        assert_eq!(job_colour("123_4"), hashed_colour("123_4"));
        let mut shown = ColourSlots {
            users: [("alice".to_string(), 0), ("bob".to_string(), 1)].into(),
            accounts: [("ml".to_string(), 2), ("bio".to_string(), 3)].into(),
        };
        shown.retain_shown(["bob"], ["ml"]);
        assert_eq!(shown.users.keys().collect::<Vec<_>>(), ["bob"]);
        assert_eq!(shown.accounts.keys().collect::<Vec<_>>(), ["ml"]);
    }

    #[test]
    fn states_use_fixed_colours() {
        let categories = Categories::states([("FAILED".to_string(), 3), ("COMPLETED".to_string(), 9)]);
        assert_eq!(categories.colour("FAILED"), "#D55E00");
        assert_eq!(categories.legend[0].label, "COMPLETED");
        assert_eq!(state_colour("CANCELLED by 0"), "#999999");
    }

    #[test]
    fn busy_gpus_without_tensor_work_are_not_called_efficient() {
        assert_eq!(efficiency_class(None, Some(50.0)), 0);
        assert_eq!(efficiency_class(Some(2.0), None), 1);
        assert_eq!(efficiency_class(Some(100.0), Some(3.0)), 3, "100 % util with 3 % tensor is busy, not efficient");
        assert_eq!(efficiency_class(Some(95.0), Some(42.0)), 5);
        let categories = Categories::efficiency([(EFFICIENCY[5].0.to_string(), 2)]);
        assert_eq!(categories.colour(EFFICIENCY[5].0), EFFICIENCY[5].1);
    }

    #[test]
    fn colour_choices_round_trip_through_their_words() {
        for choice in ColourBy::ALL {
            assert_eq!(ColourBy::parse(choice.as_str()), choice);
        }
        assert_eq!(ColourBy::parse("nonsense"), ColourBy::User);
    }
}

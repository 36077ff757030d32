//! Colour-blind-safe colours: Paul Tol's "muted" scheme for categories (users, accounts, partitions,
//! jobs) and the Okabe–Ito set for job states, each with a grey for "other".

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Tol's muted qualitative scheme: distinguishable under the common colour-vision deficiencies.
pub const CATEGORICAL: [&str; 9] =
    ["#332288", "#88CCEE", "#44AA99", "#117733", "#999933", "#DDCC77", "#CC6677", "#882255", "#AA4499"];

/// For everything outside the named categories.
pub const OTHER: &str = "#BBBBBB";

/// Free (unallocated) cells in the grid.
pub const FREE: &str = "#F2F2F2";
/// A GPU held by a job the viewer may not see: a neutral grey hatch, unlike any job colour.
pub const BUSY: &str = "repeating-linear-gradient(135deg, #A8A8A8 0 2px, #E4E4E4 2px 4px)";
/// [`BUSY`] as one colour, for a stop in a node's gradient.
pub const BUSY_SOLID: &str = "#B4B4B4";

/// Okabe–Ito colours by sacct state word; states not listed are [`OTHER`].
pub fn state_colour(state: &str) -> &'static str {
    match state.split_whitespace().next().unwrap_or("") {
        "RUNNING" => "#0072B2",
        "COMPLETED" => "#009E73",
        "FAILED" => "#D55E00",
        "TIMEOUT" | "DEADLINE" => "#E69F00",
        "OUT_OF_MEMORY" => "#CC79A7",
        "NODE_FAIL" | "BOOT_FAIL" => "#000000",
        "PREEMPTED" | "REQUEUED" => "#56B4E9",
        "SUSPENDED" | "PENDING" => "#F0E442",
        "CANCELLED" => "#999999",
        _ => OTHER,
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
/// (viridis) colour each. "GPU util 100 %" with little tensor work is busy, not efficient.
pub const EFFICIENCY: [(&str, &str); 6] = [
    ("no report", OTHER),
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

/// Colours for categorical values: the most frequent get the scheme's colours, the rest share grey.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Categories {
    colour_of: BTreeMap<String, &'static str>,
    pub legend: Vec<LegendEntry>,
}

impl Categories {
    /// From (value, count) pairs; ties break by value so the result is stable.
    pub fn new(counts: impl IntoIterator<Item = (String, usize)>) -> Self {
        let mut ranked: Vec<(String, usize)> = counts.into_iter().collect();
        ranked.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        let mut categories = Self::default();
        let mut others = 0;
        for (rank, (value, count)) in ranked.into_iter().enumerate() {
            if let Some(&colour) = CATEGORICAL.get(rank) {
                categories.colour_of.insert(value.clone(), colour);
                categories.legend.push(LegendEntry { label: value, colour: colour.into(), count });
            } else {
                others += count;
            }
        }
        if others > 0 {
            categories.legend.push(LegendEntry { label: "other".into(), colour: OTHER.into(), count: others });
        }
        categories
    }

    /// States keep their fixed colours; the legend lists those present.
    pub fn states(counts: impl IntoIterator<Item = (String, usize)>) -> Self {
        Self::fixed(counts, state_colour)
    }

    /// Efficiency classes keep their fixed colours; the legend lists those present.
    pub fn efficiency(counts: impl IntoIterator<Item = (String, usize)>) -> Self {
        Self::fixed(counts, efficiency_colour)
    }

    fn fixed(counts: impl IntoIterator<Item = (String, usize)>, colour_of: fn(&str) -> &'static str) -> Self {
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

    /// The colour of `value`.
    pub fn colour(&self, value: &str) -> &'static str {
        self.colour_of.get(value).copied().unwrap_or(OTHER)
    }
}

/// A job's own colour when colouring by job: neighbours in start order differ.
pub fn job_colour(ordinal: usize) -> &'static str {
    CATEGORICAL[ordinal % CATEGORICAL.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_most_frequent_values_get_distinct_colours_and_the_rest_share_grey() {
        let counts = (0..12).map(|i| (format!("u{i:02}"), 100 - i));
        let categories = Categories::new(counts);
        assert_eq!(categories.legend.len(), 10);
        assert_eq!(categories.colour("u00"), CATEGORICAL[0]);
        assert_eq!(categories.colour("u11"), OTHER);
        assert_eq!(categories.legend[9].label, "other");
        assert_eq!(categories.legend[9].count, 91 + 90 + 89);
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

//! Showback's arithmetic, pure: each job's part of a window (its GPU-hours inside it, as `sreport`
//! counts allocated TRES time), summed per account (with its ancestors, as `sreport` rolls accounts
//! up) or per user; idle GPU-hours from the measured utilisation only (unmeasured time is unknown,
//! never idle); failures by blame; queue waits; top lists and log-spaced histograms.

use std::collections::BTreeMap;

use slurmlens_wire::{Blame, BlameSplit, Histogram, HistogramBin, TopEntry, UsageRow};

use super::blame::ended_badly;
use super::state::JobStateBase;

/// How many entries a top list holds.
pub const TOP: usize = 10;

/// One job's facts that usage counts.
#[derive(Debug, Clone, PartialEq)]
pub struct UsageJob {
    pub user: String,
    pub account: String,
    pub gpus: u64,
    /// Epoch seconds (slurmdbd's; `time_end` 0 while running).
    pub time_submit: u64,
    pub time_start: u64,
    pub time_end: u64,
    pub state: JobStateBase,
    /// Mean GPU utilisation and tensor activity (%) over the job: its archived report's, or so far.
    pub gpu_util: Option<f64>,
    pub tensor_active: Option<f64>,
    /// The GPUs' energy over the whole job (kWh), from its archived report.
    pub energy_kwh: Option<f64>,
    /// The share (0–1) of its GPU hours those figures were measured over: 1, or less where some ran on
    /// a shared node's GPUs no record placed as the job's (they are unmeasured, never idle).
    pub measured_share: f64,
    /// Its archived report's blame, if it ended badly and has one.
    pub blame: Option<Blame>,
}

/// A window `[start, end)` in epoch seconds, and the moment running jobs are counted up to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UsageWindow {
    pub start: u64,
    pub end: u64,
    pub now: u64,
}

impl UsageJob {
    /// When the job's allocation ended, or `now` while it runs.
    fn run_end(&self, now: u64) -> u64 {
        if self.time_end == 0 { now } else { self.time_end }
    }

    /// Seconds of the job's run inside the window.
    pub fn seconds_inside(&self, window: UsageWindow) -> u64 {
        if self.time_start == 0 {
            return 0;
        }
        let from = self.time_start.max(window.start);
        let to = self.run_end(window.now).min(window.end);
        to.saturating_sub(from)
    }

    /// Whether the job counts in the window at all: it ran in it, ended badly in it, or started in it
    /// (a run of under a second still held its allocation). The table and the histograms agree on it.
    pub fn counts_inside(&self, window: UsageWindow) -> bool {
        self.seconds_inside(window) > 0 || self.failed_inside(window) || self.wait_inside(window).is_some()
    }

    /// GPU-hours allocated inside the window.
    pub fn gpu_hours_inside(&self, window: UsageWindow) -> f64 {
        self.gpus as f64 * self.seconds_inside(window) as f64 / 3600.0
    }

    /// Whether the job ended badly inside the window.
    fn failed_inside(&self, window: UsageWindow) -> bool {
        self.time_end >= window.start && self.time_end < window.end && self.time_end > 0 && {
            ended_badly(self.state, self.time_start > 0)
        }
    }

    /// Whose failure it was: the report's word, Slurm's for a node or boot failure, else unknown.
    fn failure_blame(&self) -> Blame {
        match (self.blame, self.state) {
            (Some(blame), _) => blame,
            (None, JobStateBase::NodeFail | JobStateBase::BootFail) => Blame::Infrastructure,
            (None, _) => Blame::Unknown,
        }
    }

    /// Queue wait (start − submit) of a job that started inside the window.
    fn wait_inside(&self, window: UsageWindow) -> Option<u64> {
        (self.time_start >= window.start && self.time_start < window.end && self.time_start > 0)
            .then(|| self.time_start.saturating_sub(self.time_submit))
    }
}

/// The running sums of one row.
#[derive(Debug, Clone, Default)]
struct Sums {
    jobs: u64,
    gpu_jobs: u64,
    gpu_hours: f64,
    measured: f64,
    idle: f64,
    util_weighted: f64,
    tensor_weighted: f64,
    tensor_weight: f64,
    energy: f64,
    energy_gpu_hours: f64,
    energy_known: bool,
    failed_jobs: BlameSplit,
    failed_hours: BlameSplit,
    waits: Vec<u64>,
}

fn add_blame(split: &mut BlameSplit, blame: Blame, amount: f64) {
    match blame {
        Blame::Infrastructure => split.infrastructure += amount,
        Blame::Application => split.application += amount,
        Blame::Unknown => split.unknown += amount,
    }
}

impl Sums {
    fn add(&mut self, job: &UsageJob, window: UsageWindow) {
        if !job.counts_inside(window) {
            return;
        }
        let seconds = job.seconds_inside(window);
        let failed = job.failed_inside(window);
        let wait = job.wait_inside(window);
        self.jobs += 1;
        let hours = job.gpu_hours_inside(window);
        if job.gpus > 0 {
            self.gpu_jobs += 1;
        }
        self.gpu_hours += hours;
        let measured = hours * job.measured_share.clamp(0.0, 1.0);
        if let Some(util) = job.gpu_util.filter(|_| measured > 0.0) {
            let util = util.clamp(0.0, 100.0);
            self.measured += measured;
            self.idle += measured * (1.0 - util / 100.0);
            self.util_weighted += measured * util;
            if let Some(tensor) = job.tensor_active {
                self.tensor_weighted += measured * tensor.clamp(0.0, 100.0);
                self.tensor_weight += measured;
            }
        }
        if let Some(energy) = job.energy_kwh.filter(|energy| *energy >= 0.0 && measured > 0.0) {
            let run = job.run_end(window.now).saturating_sub(job.time_start).max(1);
            self.energy += energy * seconds as f64 / run as f64;
            self.energy_gpu_hours += measured;
            self.energy_known = true;
        }
        if failed {
            let blame = job.failure_blame();
            add_blame(&mut self.failed_jobs, blame, 1.0);
            add_blame(&mut self.failed_hours, blame, hours);
        }
        self.waits.extend(wait);
    }

    fn row(mut self, name: String, parent: Option<String>, co2_g_per_kwh: Option<f64>) -> UsageRow {
        self.waits.sort_unstable();
        let energy_kwh = self.energy_known.then_some(self.energy);
        UsageRow {
            name,
            parent,
            jobs: self.jobs,
            gpu_jobs: self.gpu_jobs,
            gpu_hours: self.gpu_hours,
            gpu_hours_measured: self.measured,
            idle_gpu_hours: (self.measured > 0.0).then_some(self.idle),
            mean_gpu_util: (self.measured > 0.0).then(|| self.util_weighted / self.measured),
            mean_tensor_active: (self.tensor_weight > 0.0).then(|| self.tensor_weighted / self.tensor_weight),
            energy_kwh,
            gpu_hours_with_energy: self.energy_gpu_hours,
            co2_kg: energy_kwh.zip(co2_g_per_kwh).map(|(kwh, grams)| kwh * grams / 1000.0),
            failed_jobs: self.failed_jobs,
            failed_gpu_hours: self.failed_hours,
            mean_wait_s: (!self.waits.is_empty())
                .then(|| self.waits.iter().map(|&w| w as f64).sum::<f64>() / self.waits.len() as f64),
            median_wait_s: median(&self.waits),
        }
    }
}

/// The median of sorted values (the mean of the middle two for an even count).
fn median(sorted: &[u64]) -> Option<f64> {
    let n = sorted.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(sorted[n / 2] as f64),
        _ => Some((sorted[n / 2 - 1] as f64 + sorted[n / 2] as f64) / 2.0),
    }
}

/// The account tree, as slurmdbd's associations give it (account → parent account).
#[derive(Debug, Clone, Default)]
pub struct AccountTree {
    parents: BTreeMap<String, String>,
}

impl AccountTree {
    /// From (account, parent) pairs; `root`'s parent is empty.
    pub fn new(pairs: impl IntoIterator<Item = (String, String)>) -> Self {
        Self { parents: pairs.into_iter().filter(|(account, _)| !account.is_empty()).collect() }
    }

    /// The account's parent, if it has one other than `root`.
    pub fn parent(&self, account: &str) -> Option<&str> {
        self.parents.get(account).map(String::as_str).filter(|parent| !parent.is_empty() && *parent != "root")
    }

    /// The account and its ancestors below `root`, nearest first (bounded against a cycle).
    pub fn lineage(&self, account: &str) -> Vec<String> {
        let mut lineage = vec![account.to_string()];
        let mut current = account;
        while let Some(parent) = self.parent(current) {
            if lineage.iter().any(|seen| seen == parent) || lineage.len() > 64 {
                break;
            }
            lineage.push(parent.to_string());
            current = parent;
        }
        lineage
    }
}

/// The rows of a usage table and the window's total.
#[derive(Debug, Clone, Default)]
pub struct UsageTable {
    /// Largest allocated GPU-hours first, then by name.
    pub rows: Vec<UsageRow>,
    pub total: UsageRow,
}

/// Usage per account: each job counts in its account and in each ancestor `rolls_up` allows (as
/// `sreport` rolls sub-accounts up), and once in the total.
pub fn by_account(
    jobs: &[UsageJob],
    window: UsageWindow,
    tree: &AccountTree,
    rolls_up: impl Fn(&str) -> bool,
    co2_g_per_kwh: Option<f64>,
) -> UsageTable {
    let mut sums: BTreeMap<String, Sums> = BTreeMap::new();
    let mut total = Sums::default();
    for job in jobs {
        total.add(job, window);
        for (depth, account) in tree.lineage(&job.account).into_iter().enumerate() {
            if depth > 0 && !rolls_up(&account) {
                break;
            }
            sums.entry(account).or_default().add(job, window);
        }
    }
    let rows = sums
        .into_iter()
        .map(|(account, sums)| {
            let parent = tree.parent(&account).map(String::from);
            sums.row(account, parent, co2_g_per_kwh)
        })
        .collect();
    table(rows, total.row("total".into(), None, co2_g_per_kwh))
}

/// Usage per user.
pub fn by_user(jobs: &[UsageJob], window: UsageWindow, co2_g_per_kwh: Option<f64>) -> UsageTable {
    let mut sums: BTreeMap<String, Sums> = BTreeMap::new();
    let mut total = Sums::default();
    for job in jobs {
        total.add(job, window);
        sums.entry(job.user.clone()).or_default().add(job, window);
    }
    let rows = sums.into_iter().map(|(user, sums)| sums.row(user, None, co2_g_per_kwh)).collect();
    table(rows, total.row("total".into(), None, co2_g_per_kwh))
}

fn table(mut rows: Vec<UsageRow>, total: UsageRow) -> UsageTable {
    rows.retain(|row| row.jobs > 0);
    rows.sort_by(|a, b| b.gpu_hours.total_cmp(&a.gpu_hours).then_with(|| a.name.cmp(&b.name)));
    UsageTable { rows, total }
}

/// The top [`TOP`] rows by `value` (those above zero), largest first.
pub fn top(rows: &[UsageRow], value: impl Fn(&UsageRow) -> Option<f64>) -> Vec<TopEntry> {
    let mut entries: Vec<TopEntry> = rows
        .iter()
        .filter_map(|row| {
            value(row).filter(|v| *v > 0.0).map(|gpu_hours| TopEntry { name: row.name.clone(), gpu_hours })
        })
        .collect();
    entries.sort_by(|a, b| b.gpu_hours.total_cmp(&a.gpu_hours).then_with(|| a.name.cmp(&b.name)));
    entries.truncate(TOP);
    entries
}

/// GPUs per job: 1, 2, 4, 8, … (powers of two).
pub const GPU_EDGES: [f64; 12] = [1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0, 1024.0, 2048.0];
/// Durations (seconds), each bin about three times the one before: 0, 10 s, 1 min, 3 min, 10 min,
/// 30 min, 1 h, 3 h, 10 h, 1 day, 3 days, 10 days.
pub const DURATION_EDGES: [f64; 12] =
    [0.0, 10.0, 60.0, 180.0, 600.0, 1800.0, 3600.0, 10_800.0, 36_000.0, 86_400.0, 259_200.0, 864_000.0];

/// A histogram of `values` over bins `[edges[i], edges[i+1])`, the last bin open-ended (its `high`
/// is the largest value seen, or its edge), empty trailing bins dropped.
pub fn histogram(unit: &str, edges: &[f64], values: impl IntoIterator<Item = f64>) -> Histogram {
    let mut counts = vec![0u64; edges.len()];
    let mut largest = 0.0f64;
    for value in values {
        largest = largest.max(value);
        let bin = edges.iter().rposition(|edge| value >= *edge).unwrap_or(0);
        counts[bin] += 1;
    }
    let used = counts.iter().rposition(|count| *count > 0).map_or(0, |last| last + 1);
    let bins = (0..used)
        .map(|i| HistogramBin {
            low: edges[i],
            high: edges.get(i + 1).copied().unwrap_or(largest.max(edges[i]) + 1.0),
            jobs: counts[i],
        })
        .collect();
    Histogram { unit: unit.to_string(), bins }
}

/// The three histograms of a window's visible jobs: GPUs of the GPU jobs that held an allocation in
/// it, run time of the jobs that ended in it, queue wait of those that started in it.
pub fn histograms(jobs: &[UsageJob], window: UsageWindow) -> (Histogram, Histogram, Histogram) {
    let gpus = jobs.iter().filter(|job| job.gpus > 0 && job.counts_inside(window)).map(|job| job.gpus as f64);
    let run = jobs
        .iter()
        .filter(|job| {
            job.time_start > 0 && job.time_end >= window.start && job.time_end < window.end && job.time_end > 0
        })
        .map(|job| job.time_end.saturating_sub(job.time_start) as f64);
    let wait = jobs.iter().filter_map(|job| job.wait_inside(window)).map(|wait| wait as f64);
    (
        histogram("gpus", &GPU_EDGES, gpus),
        histogram("seconds", &DURATION_EDGES, run),
        histogram("seconds", &DURATION_EDGES, wait),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(user: &str, account: &str, gpus: u64, submit: u64, start: u64, end: u64) -> UsageJob {
        UsageJob {
            user: user.into(),
            account: account.into(),
            gpus,
            time_submit: submit,
            time_start: start,
            time_end: end,
            state: JobStateBase::Completed,
            gpu_util: None,
            tensor_active: None,
            energy_kwh: None,
            measured_share: 1.0,
            blame: None,
        }
    }

    const WINDOW: UsageWindow = UsageWindow { start: 3600, end: 3 * 3600, now: 10 * 3600 };

    #[test]
    fn counts_only_the_part_of_a_run_inside_the_window() {
        // Ran 0..2h with 4 GPUs: one hour inside [1h, 3h).
        assert_eq!(job("a", "ml", 4, 0, 1, 7200).gpu_hours_inside(WINDOW), 4.0);
        // Still running: counted up to the window's end.
        assert_eq!(job("a", "ml", 2, 0, 7200, 0).gpu_hours_inside(WINDOW), 2.0);
        // Never started, or after the window.
        assert_eq!(job("a", "ml", 2, 0, 0, 0).gpu_hours_inside(WINDOW), 0.0);
        assert_eq!(job("a", "ml", 2, 0, 4 * 3600, 5 * 3600).gpu_hours_inside(WINDOW), 0.0);
    }

    #[test]
    fn idle_is_unknown_without_a_measure_and_weighted_with_one() {
        let mut measured = job("a", "ml", 1, 3600, 3600, 3 * 3600);
        measured.gpu_util = Some(25.0);
        measured.tensor_active = Some(10.0);
        let unmeasured = job("a", "ml", 1, 3600, 3600, 3 * 3600);
        let table = by_user(std::slice::from_ref(&unmeasured), WINDOW, None);
        assert_eq!(table.rows[0].gpu_hours, 2.0);
        assert_eq!(table.rows[0].idle_gpu_hours, None);
        let table = by_user(&[measured, unmeasured], WINDOW, None);
        let row = &table.rows[0];
        assert_eq!((row.gpu_hours, row.gpu_hours_measured), (4.0, 2.0));
        assert_eq!(row.idle_gpu_hours, Some(1.5));
        assert_eq!(row.mean_gpu_util, Some(25.0));
        assert_eq!(row.mean_tensor_active, Some(10.0));
    }

    #[test]
    fn a_partly_placed_jobs_figures_count_over_its_measured_share_only() {
        // 4 GPUs for 2 h, half of its GPU hours on a shared node's unplaced GPUs: 25 % busy and 2 kWh
        // over the other half. Idle is 3 of the 4 measured hours, never of the 8.
        let mut partly = job("a", "ml", 4, 3600, 3600, 3 * 3600);
        (partly.gpu_util, partly.tensor_active, partly.energy_kwh) = (Some(25.0), Some(10.0), Some(2.0));
        partly.measured_share = 0.5;
        let row = &by_user(&[partly], WINDOW, None).rows[0];
        assert_eq!((row.gpu_hours, row.gpu_hours_measured), (8.0, 4.0));
        assert_eq!(row.idle_gpu_hours, Some(3.0));
        assert_eq!((row.mean_gpu_util, row.mean_tensor_active), (Some(25.0), Some(10.0)));
        assert_eq!((row.energy_kwh, row.gpu_hours_with_energy), (Some(2.0), 4.0));
    }

    #[test]
    fn accounts_roll_up_into_their_ancestors() {
        let tree = AccountTree::new([
            ("root".to_string(), String::new()),
            ("ml".to_string(), "root".to_string()),
            ("ml-vision".to_string(), "ml".to_string()),
        ]);
        let jobs = [job("a", "ml-vision", 1, 3600, 3600, 7200), job("b", "ml", 2, 3600, 3600, 7200)];
        let table = by_account(&jobs, WINDOW, &tree, |_| true, None);
        let hours: BTreeMap<&str, f64> = table.rows.iter().map(|r| (r.name.as_str(), r.gpu_hours)).collect();
        assert_eq!(hours, BTreeMap::from([("ml", 3.0), ("ml-vision", 1.0)]));
        assert_eq!(table.rows[1].parent.as_deref(), Some("ml"));
        assert_eq!(table.total.gpu_hours, 3.0);
        // A coordinator of ml-vision alone does not see a partial `ml`.
        let table = by_account(&jobs[..1], WINDOW, &tree, |account| account == "ml-vision", None);
        assert_eq!(table.rows.len(), 1);
    }

    #[test]
    fn failures_split_by_blame_and_waits_take_the_median() {
        let mut crashed = job("a", "ml", 2, 3000, 3600, 5400);
        crashed.state = JobStateBase::Failed;
        crashed.blame = Some(Blame::Application);
        let mut lost = job("a", "ml", 1, 3500, 3600, 5400);
        lost.state = JobStateBase::NodeFail;
        let table = by_user(&[crashed, lost, job("a", "ml", 1, 3600, 4000, 5000)], WINDOW, Some(400.0));
        let row = &table.rows[0];
        assert_eq!(row.failed_jobs.application, 1.0);
        assert_eq!(row.failed_jobs.infrastructure, 1.0);
        assert_eq!(row.failed_gpu_hours.application, 1.0);
        assert_eq!(row.median_wait_s, Some(400.0));
        assert_eq!(row.mean_wait_s, Some((600.0 + 100.0 + 400.0) / 3.0));
        assert_eq!(row.co2_kg, None);
    }

    #[test]
    fn energy_counts_the_part_inside_and_co2_follows() {
        let mut half_inside = job("a", "ml", 1, 1800, 1800, 5400);
        half_inside.energy_kwh = Some(2.0);
        let row = &by_user(&[half_inside], WINDOW, Some(500.0)).rows[0];
        assert_eq!(row.energy_kwh, Some(1.0));
        assert_eq!(row.co2_kg, Some(0.5));
    }

    #[test]
    fn histograms_are_log_binned_and_top_lists_skip_zero() {
        let histogram = histogram("gpus", &GPU_EDGES, [1.0, 3.0, 8.0, 8.0]);
        let counts: Vec<(f64, u64)> = histogram.bins.iter().map(|b| (b.low, b.jobs)).collect();
        assert_eq!(counts, vec![(1.0, 1), (2.0, 1), (4.0, 0), (8.0, 2)]);
        let rows = [
            UsageRow { name: "a".into(), gpu_hours: 2.0, ..UsageRow::default() },
            UsageRow { name: "b".into(), gpu_hours: 0.0, ..UsageRow::default() },
        ];
        assert_eq!(top(&rows, |r| Some(r.gpu_hours)).len(), 1);
    }
}

//! Notifications' rules, pure: which findings become notices, to whom, in what words, and when a
//! delivery may go out (rate limit, retries). The notifier (`app/notify.rs`) reads the facts and sends.

use std::fmt;

use chrono::{DateTime, Duration, Utc};

/// A notification rule: the API's, the configuration's and the store's vocabulary.
pub use slurmlens_wire::NotifyRule as Rule;

/// What `rule` tells, in a line a settings page can show.
pub fn describe(rule: Rule) -> &'static str {
    match rule {
        Rule::IdleGpus => "a running job of yours whose GPUs sit idle",
        Rule::InfrastructureFailure => "a job of yours that ended by a fault of the cluster, not of the job",
        Rule::NodeFaulting => "a node that keeps faulting (staff)",
        Rule::MonthlyUsage => "each month, the usage and waste of the accounts you coordinate",
    }
}

/// Whether `rule` speaks to the job's user (else only to staff).
pub fn tells_users(rule: Rule) -> bool {
    !matches!(rule, Rule::NodeFaulting)
}

/// A rule name that is none of [`Rule::ALL`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownRule(pub String);

impl fmt::Display for UnknownRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let known: Vec<&str> = Rule::ALL.iter().map(|rule| rule.as_str()).collect();
        write!(f, "unknown rule `{}`; known: {}", self.0, known.join(", "))
    }
}

/// The rule named `text` exactly.
pub fn parse_rule(text: &str) -> Result<Rule, UnknownRule> {
    Rule::from_word(text).ok_or_else(|| UnknownRule(text.to_string()))
}

/// Who a notice goes to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Audience {
    /// That user alone (a coordinator's monthly report).
    User(String),
    /// The job's user, and staff.
    UserAndStaff(String),
    /// Staff only.
    Staff,
}

/// A finding in words, before it is addressed.
#[derive(Debug, Clone, PartialEq)]
pub struct Notice {
    pub rule: Rule,
    pub cluster: String,
    /// What it is about, stable across rounds: the same finding twice is one notice.
    pub subject_key: String,
    pub audience: Audience,
    pub title: String,
    pub body: String,
    /// The page with the evidence.
    pub link: String,
}

/// A running job as the idle rule sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct RunningJob {
    pub cluster: String,
    pub job_id: u32,
    pub time_submit: u64,
    pub user: String,
    pub name: String,
    pub gpus: u64,
    pub start: DateTime<Utc>,
}

/// The thresholds of the rules (`[notify]`).
#[derive(Debug, Clone, PartialEq)]
pub struct Thresholds {
    /// GPUs under this mean utilisation (percent) ...
    pub idle_util_below_pct: f64,
    /// ... over this long are idle.
    pub idle_for: Duration,
    /// A node with this many drain/down events ...
    pub node_faults: usize,
    /// ... within this period keeps faulting.
    pub node_fault_period: Duration,
}

/// The idle rule: a job running at least `idle_for` whose GPUs' mean utilisation over the last
/// `idle_for` is under the threshold. One notice per job record, however long it stays idle.
pub fn idle_notice(
    job: &RunningJob,
    mean_util: f64,
    thresholds: &Thresholds,
    public_url: &str,
    now: DateTime<Utc>,
) -> Option<Notice> {
    // A missing reading (NaN) is no evidence of idleness.
    let idle = mean_util.partial_cmp(&thresholds.idle_util_below_pct) == Some(std::cmp::Ordering::Less);
    if now - job.start < thresholds.idle_for || !idle {
        return None;
    }
    let period = span_words(thresholds.idle_for);
    Some(Notice {
        rule: Rule::IdleGpus,
        cluster: job.cluster.clone(),
        subject_key: format!("{}/{}/{}", job.cluster, job.job_id, job.time_submit),
        audience: Audience::UserAndStaff(job.user.clone()),
        title: format!("Job {} ({}) has left its {} GPUs idle for {period}", job.job_id, job.name, job.gpus),
        body: format!(
            "Job {} ({}) of {} on cluster {} holds {} GPUs; over the last {period} they were {:.1} % busy on \
             average (under {} %). If the job is stuck or waiting, cancelling it frees the GPUs for others.",
            job.job_id, job.name, job.user, job.cluster, job.gpus, mean_util, thresholds.idle_util_below_pct
        ),
        link: job_link(public_url, &job.cluster, job.job_id),
    })
}

/// A job whose archived report blames the infrastructure.
#[derive(Debug, Clone, PartialEq)]
pub struct FailedJob {
    pub cluster: String,
    pub job_id: u32,
    pub time_submit: u64,
    pub user: String,
    pub name: String,
    /// As sacct prints it: `NODE_FAIL`, `FAILED`.
    pub state: String,
    pub nodes: String,
}

/// The failure rule: to the user (it was not their fault) and to staff (it was the cluster's).
pub fn failure_notice(job: &FailedJob, public_url: &str) -> Notice {
    Notice {
        rule: Rule::InfrastructureFailure,
        cluster: job.cluster.clone(),
        subject_key: format!("{}/{}/{}", job.cluster, job.job_id, job.time_submit),
        audience: Audience::UserAndStaff(job.user.clone()),
        title: format!("Job {} ({}) ended {} by an infrastructure fault", job.job_id, job.name, job.state),
        body: format!(
            "Job {} ({}) of {} on cluster {} ended {} on {}. Its report puts the cause in the cluster (hardware, \
             network or node), not in the job: the evidence is on the job's page. Resubmitting it is likely to work; \
             staff have been told.",
            job.job_id, job.name, job.user, job.cluster, job.state, job.nodes
        ),
        link: job_link(public_url, &job.cluster, job.job_id),
    }
}

/// A node's drain/down events within the period, newest last.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeFaults {
    pub cluster: String,
    pub node: String,
    /// (when it started, the reason slurmctld recorded).
    pub events: Vec<(DateTime<Utc>, String)>,
}

/// The faulting-node rule: a node with the threshold's faults within the period. The notice is about
/// its latest fault (its subject names that fault's start), so the same faults are never told twice;
/// the notifier also tells staff of a node at most once a period ([`node_of_subject`]).
pub fn node_notice(
    faults: &NodeFaults,
    thresholds: &Thresholds,
    public_url: &str,
    now: DateTime<Utc>,
) -> Option<Notice> {
    if faults.events.len() < thresholds.node_faults.max(1) {
        return None;
    }
    let latest = faults.events.iter().map(|(at, _)| at.timestamp()).max().unwrap_or_else(|| now.timestamp());
    let days = thresholds.node_fault_period.num_hours() as f64 / 24.0;
    let reasons: Vec<String> = faults
        .events
        .iter()
        .rev()
        .take(5)
        .map(|(at, reason)| {
            let reason = if reason.is_empty() { "no reason recorded" } else { reason.as_str() };
            format!("{} {reason}", at.format("%Y-%m-%d %H:%M UTC"))
        })
        .collect();
    let url = public_url.trim_end_matches('/');
    Some(Notice {
        rule: Rule::NodeFaulting,
        cluster: faults.cluster.clone(),
        subject_key: format!("{}/{}/{latest}", faults.cluster, faults.node),
        audience: Audience::Staff,
        title: format!("Node {} faulted {} times in {days:.0} days", faults.node, faults.events.len()),
        body: format!(
            "Node {} of cluster {} was drained or down {} times in the last {days:.0} days; the latest: {}.",
            faults.node,
            faults.cluster,
            faults.events.len(),
            reasons.join("; ")
        ),
        link: format!("{url}/grid?cluster={}", faults.cluster),
    })
}

/// The `cluster/node` a faulting-node subject is about.
pub fn node_of_subject(subject_key: &str) -> &str {
    subject_key.rsplit_once('/').map_or(subject_key, |(node, _)| node)
}

/// `45 s`, `30 min`, `2 h`, `2 h 5 min`.
fn span_words(span: Duration) -> String {
    let seconds = span.num_seconds();
    match (seconds / 3600, seconds % 3600 / 60) {
        _ if seconds < 120 => format!("{seconds} s"),
        (0, minutes) => format!("{minutes} min"),
        (hours, 0) => format!("{hours} h"),
        (hours, minutes) => format!("{hours} h {minutes} min"),
    }
}

/// The calendar month before the one `now` falls in, `[first day, first day of the next)`, UTC.
pub fn previous_month(now: DateTime<Utc>) -> (DateTime<Utc>, DateTime<Utc>) {
    use chrono::{Datelike, TimeZone};
    let first = |year: i32, month: u32| Utc.with_ymd_and_hms(year, month, 1, 0, 0, 0).single().unwrap_or(now);
    let this = first(now.year(), now.month());
    let (year, month) = if now.month() == 1 { (now.year() - 1, 12) } else { (now.year(), now.month() - 1) };
    (first(year, month), this)
}

/// A coordinator's monthly report: one line per account they coordinate (the API's rows of
/// `/api/v1/usage?by=account` for the month, as they see them).
pub fn monthly_notice(
    coordinator: &str,
    cluster: &str,
    month: (DateTime<Utc>, DateTime<Utc>),
    rows: &[slurmlens_wire::UsageRow],
    public_url: &str,
) -> Notice {
    let label = month.0.format("%B %Y").to_string();
    let hours = |value: f64| format!("{value:.1}");
    let mut lines = vec![format!(
        "Usage of the accounts you coordinate on cluster {cluster} in {label} (GPU-hours allocated inside the month; \
         idle = allocated × (1 − mean utilisation) where it was measured):"
    )];
    lines.push(String::new());
    lines
        .push(format!("{:<24} {:>12} {:>12} {:>9} {:>12}", "account", "GPU-hours", "idle", "mean util", "failed jobs"));
    for row in rows {
        let idle = row.idle_gpu_hours.map_or_else(|| "unknown".to_string(), hours);
        let util = row.mean_gpu_util.map_or_else(|| "unknown".to_string(), |util| format!("{util:.0} %"));
        let failed = row.failed_jobs.infrastructure + row.failed_jobs.application + row.failed_jobs.unknown;
        lines.push(format!("{:<24} {:>12} {:>12} {:>9} {:>12}", row.name, hours(row.gpu_hours), idle, util, failed));
    }
    if rows.is_empty() {
        lines.push("(no job of these accounts held an allocation this month)".into());
    }
    let url = public_url.trim_end_matches('/');
    Notice {
        rule: Rule::MonthlyUsage,
        cluster: cluster.to_string(),
        subject_key: format!("{cluster}/{coordinator}/{}", month.0.format("%Y-%m")),
        audience: Audience::User(coordinator.to_string()),
        title: format!("Usage of your accounts on {cluster} in {label}"),
        body: lines.join("\n"),
        link: format!(
            "{url}/usage?cluster={cluster}&by=account&start={}&end={}",
            month.0.format("%Y-%m-%dT%H:%M:%SZ"),
            month.1.format("%Y-%m-%dT%H:%M:%SZ")
        ),
    }
}

fn job_link(public_url: &str, cluster: &str, job_id: u32) -> String {
    format!("{}/jobs/{job_id}?cluster={cluster}", public_url.trim_end_matches('/'))
}

/// The address an e-mail to `user` goes to, from the site's template (`{user}@example.org`); none
/// without a template or for a name an address cannot carry.
pub fn user_address(template: Option<&str>, user: &str) -> Option<String> {
    let template = template?;
    let plain = !user.is_empty() && user.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
    plain.then(|| template.replace("{user}", user))
}

/// When a delivery that failed its `attempts`-th try is tried again: a minute, doubling, at most six
/// hours; none after `max_attempts` (it is given up, and its error kept).
pub fn next_try(attempts: u32, max_attempts: u32, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
    if attempts >= max_attempts {
        return None;
    }
    let minutes = 1_i64 << attempts.saturating_sub(1).min(9);
    Some(now + Duration::minutes(minutes.min(360)))
}

/// Whether one more delivery to an address may go now, with `sent_last_hour` already gone to it.
pub fn within_rate(sent_last_hour: u64, max_per_hour: u32) -> bool {
    sent_last_hour < u64::from(max_per_hour)
}

/// The JSON a webhook gets: `text` is what Slack's and Mattermost's incoming webhooks show; the
/// structured fields are for any other receiver.
pub fn webhook_payload(notice_rule: Rule, cluster: &str, title: &str, body: &str, link: &str) -> serde_json::Value {
    serde_json::json!({
        "text": format!("*{title}*\n{body}\n<{link}|Evidence>"),
        "rule": notice_rule.as_str(),
        "cluster": cluster,
        "title": title,
        "body": body,
        "link": link,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> DateTime<Utc> {
        s.parse().expect("a time")
    }

    fn thresholds() -> Thresholds {
        Thresholds {
            idle_util_below_pct: 5.0,
            idle_for: Duration::minutes(30),
            node_faults: 3,
            node_fault_period: Duration::days(7),
        }
    }

    fn job(start: &str) -> RunningJob {
        RunningJob {
            cluster: "sakura".into(),
            job_id: 42,
            time_submit: 1000,
            user: "alice".into(),
            name: "train".into(),
            gpus: 8,
            start: at(start),
        }
    }

    #[test]
    fn rules_parse_their_own_names_and_refuse_others() {
        for &rule in Rule::ALL {
            assert_eq!(parse_rule(rule.as_str()), Ok(rule));
        }
        let error = parse_rule("idle").expect_err("refused").to_string();
        assert!(error.contains("idle_gpus, infrastructure_failure, node_faulting, monthly_usage"), "{error}");
    }

    #[test]
    fn an_idle_job_is_told_once_it_has_run_the_whole_period_under_the_threshold() {
        let now = at("2026-12-01T12:00:00Z");
        let notice = idle_notice(&job("2026-12-01T11:00:00Z"), 1.5, &thresholds(), "https://lens.example/", now)
            .expect("a notice");
        assert_eq!(notice.subject_key, "sakura/42/1000");
        assert_eq!(notice.audience, Audience::UserAndStaff("alice".into()));
        assert_eq!(notice.link, "https://lens.example/jobs/42?cluster=sakura");
        assert!(notice.body.contains("over the last 30 min they were 1.5 % busy"), "{}", notice.body);
        assert!(notice.title.ends_with("has left its 8 GPUs idle for 30 min"), "{}", notice.title);
        assert_eq!(span_words(Duration::seconds(20)), "20 s");
        assert_eq!(span_words(Duration::minutes(125)), "2 h 5 min");
        assert_eq!(span_words(Duration::hours(2)), "2 h");
        // Busy enough, too young, or no reading at all (NaN): nothing.
        assert!(idle_notice(&job("2026-12-01T11:00:00Z"), 5.0, &thresholds(), "u", now).is_none());
        assert!(idle_notice(&job("2026-12-01T11:45:00Z"), 0.0, &thresholds(), "u", now).is_none());
        assert!(idle_notice(&job("2026-12-01T11:00:00Z"), f64::NAN, &thresholds(), "u", now).is_none());
    }

    #[test]
    fn a_node_is_faulting_from_the_threshold_on_and_told_once_a_period() {
        let now = at("2026-12-01T12:00:00Z");
        let event = |h: &str| (at(&format!("2026-11-30T{h}:00:00Z")), "Xid 79".to_string());
        let mut faults =
            NodeFaults { cluster: "sakura".into(), node: "gpu017".into(), events: vec![event("01"), event("02")] };
        assert!(node_notice(&faults, &thresholds(), "u", now).is_none());
        faults.events.push(event("03"));
        let notice = node_notice(&faults, &thresholds(), "u", now).expect("a notice");
        assert_eq!(notice.audience, Audience::Staff);
        assert!(notice.title.contains("3 times in 7 days"), "{}", notice.title);
        assert!(notice.body.contains("2026-11-30 03:00 UTC Xid 79"), "{}", notice.body);
        let later = node_notice(&faults, &thresholds(), "u", now + Duration::days(3)).expect("a notice");
        assert_eq!(notice.subject_key, later.subject_key, "the same faults, the same notice, whenever it is read");
        assert_eq!(node_of_subject(&notice.subject_key), "sakura/gpu017");
        faults.events.push(event("04"));
        let next = node_notice(&faults, &thresholds(), "u", now).expect("a notice");
        assert_ne!(notice.subject_key, next.subject_key, "a new fault is a new notice");
        assert_eq!(node_of_subject(&next.subject_key), node_of_subject(&notice.subject_key));
    }

    #[test]
    fn the_previous_month_is_a_whole_calendar_month_across_the_year() {
        assert_eq!(
            previous_month(at("2026-12-02T19:00:00Z")),
            (at("2026-11-01T00:00:00Z"), at("2026-12-01T00:00:00Z"))
        );
        assert_eq!(
            previous_month(at("2027-01-01T00:00:00Z")),
            (at("2026-12-01T00:00:00Z"), at("2027-01-01T00:00:00Z"))
        );
    }

    #[test]
    fn a_monthly_report_lists_each_account_and_says_unknown_where_nothing_was_measured() {
        let month = previous_month(at("2026-12-02T19:00:00Z"));
        let row = |name: &str, idle: Option<f64>| slurmlens_wire::UsageRow {
            name: name.into(),
            gpu_hours: 120.04,
            idle_gpu_hours: idle,
            mean_gpu_util: idle.map(|_| 61.0),
            ..Default::default()
        };
        let notice =
            monthly_notice("carol", "lab", month, &[row("ml", Some(30.5)), row("ml-vision", None)], "https://x/");
        assert_eq!(notice.subject_key, "lab/carol/2026-11");
        assert_eq!(notice.title, "Usage of your accounts on lab in November 2026");
        let line = |cells: [&str; 5]| {
            format!("{:<24} {:>12} {:>12} {:>9} {:>12}", cells[0], cells[1], cells[2], cells[3], cells[4])
        };
        assert!(notice.body.contains(&line(["ml", "120.0", "30.5", "61 %", "0"])), "{}", notice.body);
        assert!(notice.body.contains(&line(["ml-vision", "120.0", "unknown", "unknown", "0"])), "{}", notice.body);
        assert_eq!(
            notice.link,
            "https://x/usage?cluster=lab&by=account&start=2026-11-01T00:00:00Z&end=2026-12-01T00:00:00Z"
        );
    }

    #[test]
    fn user_addresses_come_from_the_template_for_plain_names_only() {
        assert_eq!(user_address(Some("{user}@example.org"), "alice"), Some("alice@example.org".into()));
        assert_eq!(user_address(None, "alice"), None);
        assert_eq!(user_address(Some("{user}@example.org"), "a@b>"), None);
        assert_eq!(user_address(Some("{user}@example.org"), ""), None);
    }

    #[test]
    fn retries_back_off_and_give_up() {
        let now = at("2026-12-01T12:00:00Z");
        assert_eq!(next_try(1, 8, now), Some(now + Duration::minutes(1)));
        assert_eq!(next_try(3, 8, now), Some(now + Duration::minutes(4)));
        assert_eq!(next_try(8, 8, now), None);
        assert_eq!(next_try(20, 30, now), Some(now + Duration::minutes(360)));
        assert!(within_rate(9, 10));
        assert!(!within_rate(10, 10));
    }

    #[test]
    fn a_webhook_payload_carries_slacks_text_and_the_fields() {
        let payload = webhook_payload(Rule::NodeFaulting, "sakura", "T", "B", "https://x/grid");
        assert_eq!(payload["text"], "*T*\nB\n<https://x/grid|Evidence>");
        assert_eq!(payload["rule"], "node_faulting");
    }
}

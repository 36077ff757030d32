//! Jobs and their steps as `sacct` shows them, and the health of the sources.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::vocabulary::{Blame, DigestState, GpusSource};

/// A job allocation as `sacct -X` shows it, one row per job record (array task, het component).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Job {
    /// sacct's `JobID`: `123`, `123_4` (array task), `123_[5-9%2]` (pending array tasks), `8+1` (het).
    pub job_id: String,
    /// sacct's `JobIDRaw`: the job's own numeric id.
    pub job_id_raw: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub array_job_id: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub array_task_id: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub het_job_id: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub het_job_offset: Option<u32>,
    pub cluster: String,
    pub job_name: String,
    pub user: String,
    pub uid: u32,
    pub gid: u32,
    pub account: String,
    pub partition: String,
    pub qos: String,
    /// sacct state name: `COMPLETED`, `OUT_OF_MEMORY`, `REQUEUED`, ….
    pub state: String,
    /// uid that cancelled the job (sacct prints `CANCELLED by <uid>`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cancelled_by_uid: Option<u32>,
    /// `N:S`: exit status and terminating signal of the batch script.
    pub exit_code: String,
    /// `N:S`: the highest exit code of all steps.
    pub derived_exit_code: String,
    #[serde(serialize_with = "crate::timestamps::serialize")]
    pub submit: DateTime<Utc>,
    #[serde(default, skip_serializing_if = "Option::is_none", serialize_with = "crate::timestamps::serialize_option")]
    pub eligible: Option<DateTime<Utc>>,
    #[serde(default, skip_serializing_if = "Option::is_none", serialize_with = "crate::timestamps::serialize_option")]
    pub start: Option<DateTime<Utc>>,
    #[serde(default, skip_serializing_if = "Option::is_none", serialize_with = "crate::timestamps::serialize_option")]
    pub end: Option<DateTime<Utc>>,
    /// sacct's `Elapsed`, `[D-]HH:MM:SS`; running jobs count up to now.
    pub elapsed: String,
    pub elapsed_raw: u64,
    /// sacct's `Timelimit`: `[D-]HH:MM:SS`, `UNLIMITED` or `Partition_Limit`.
    pub timelimit: String,
    /// Minutes; absent when unlimited or not set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timelimit_raw: Option<u32>,
    /// Hostlist expression as sacct prints it (`gpu[001-004]`, `None assigned`).
    pub node_list: String,
    pub alloc_nodes: u32,
    pub alloc_cpus: u64,
    pub alloc_gpus: u64,
    /// sacct's `AllocTRES`: `billing=2,cpu=2,gres/gpu=2,mem=1000M,node=1`.
    pub alloc_tres: String,
    /// sacct's `ReqTRES`.
    pub req_tres: String,
    /// sacct's `ReqMem`: `1000M`, `500Mc` (per CPU).
    pub req_mem: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comment: Option<String>,
    /// sacct's `Sluid` (Slurm ≥ 26.05): the job's cluster-unique id, which names its cgroup; absent
    /// where slurmdbd does not record one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sluid: Option<String>,
    /// sacct's `Restarts` (Slurm ≥ 24.11): how often the job was requeued; absent where slurmdbd does
    /// not record it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restarts: Option<u32>,
    /// Mean GPU utilisation (%) over the job, from its archived report (while it runs: so far);
    /// absent until it has one, when its report found no metrics (`digest` says which), or when no
    /// GPU was placed as the job's (a shared node without GPU records: `digest` is `archived`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mean_gpu_util: Option<f64>,
    /// Mean tensor-pipe activity (%) over the job, from its archived report.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mean_tensor_active: Option<f64>,
    /// For a job that ended badly: `infrastructure`, `application` or `unknown`, from its archived
    /// report (NODE_FAIL and BOOT_FAIL say `infrastructure` on Slurm's word alone).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blame: Option<Blame>,
    /// Where `mean_gpu_util`, `mean_tensor_active` and `blame` come from; absent: no report made yet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub digest: Option<DigestState>,
    /// The job's tags (set by people or by the rules), by name; absent: none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
}

/// One job with its steps and its allocation per node.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct JobDetail {
    #[serde(flatten)]
    pub job: Job,
    pub work_dir: String,
    pub submit_line: String,
    pub nodes: Vec<NodeAllocation>,
    pub steps: Vec<Step>,
}

/// What one job held on one node.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct NodeAllocation {
    pub node: String,
    /// GPUs on this node; absent when slurmdbd's total cannot be split exactly.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpus: Option<u64>,
    /// How `gpus` was found: `single_node` or `even_split` (slurmdbd keeps only the job total).
    pub gpus_source: GpusSource,
}

/// A job step as `sacct` shows it (`123.batch`, `123.extern`, `123.0`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Step {
    pub job_id: String,
    pub step_name: String,
    pub state: String,
    pub exit_code: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start: Option<DateTime<Utc>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end: Option<DateTime<Utc>>,
    pub elapsed: String,
    pub elapsed_raw: u64,
    pub node_list: String,
    pub ntasks: u32,
    pub alloc_tres: String,
    /// Peak resident set size of any task, bytes (from `TRESUsageInMax`), once the step ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_rss_bytes: Option<u64>,
    /// User plus system CPU time, seconds.
    pub total_cpu_s: f64,
}

/// `GET /api/v1/health`: which sources answer.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Health {
    pub status: String,
    pub slurmdbd: String,
}

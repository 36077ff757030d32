//! JSON wire types of the slurmlens REST API (`/api/v1`), shared by the server, the web front end and
//! the Slurm plugin. Serde and chrono only: this crate is the boundary, it holds no logic but the job
//! listing's order ([`sort_jobs`]), which the server's pages and the browser's tables must share. The feature
//! `openapi`, which only the server enables, adds `utoipa::ToSchema` derives for the OpenAPI document.
//!
//! Field names follow `sacct`'s column names in snake_case where one exists (`job_id`, `alloc_tres`,
//! `elapsed_raw`, `node_list`), so a user who knows `sacct -o` can read a response without a manual.

mod advice;
mod compare;
mod errors;
mod ingest;
mod job_order;
mod jobs;
mod links;
mod node_page;
mod nodes;
mod notify;
mod output;
mod report;
mod script;
mod signals;
mod tags;
mod timestamps;
mod tokens;
mod traces;
mod usage;
mod vocabulary;

pub use advice::{Advice, AdviceAnswer, AdviceKind, AdviceSetting};
pub use compare::{
    AlignedSeries, ComparedJob, Comparison, PreviousRuns, RunFigures, RunMedians, SlowerThanUsual, WorkMatch,
};
pub use errors::{Archiving, ErrorBody, ErrorEnvelope, Page};
pub use ingest::{
    AllocatedGpu, GpuAllocationBatch, GpuAllocationEvent, GpuAllocationReceipt, GpuAllocationRecord,
    GpuAllocationRejection,
};
pub use job_order::{JobSort, SortKey, SortValue, sort_jobs};
pub use jobs::{Health, Job, JobDetail, NodeAllocation, Step};
pub use links::ChartQuery;
pub use node_page::{
    ClockEventReason, FaultJob, HealthLevel, NodeFault, NodeGpu, NodeGpuSeries, NodeHealth, NodeHealthItem, NodeLink,
    NodePage, NodesHealth,
};
pub use nodes::{BusyGpus, GpuReadings, GpuValue, GpuValues, HeldGpu, JobGpu, JobGpus, Node, NodeEvent, XidCode};
pub use notify::{MyNotifications, Notification, NotificationRule, NotificationRuleUpdate};
pub use output::{JobOutput, OutputFile, OutputNamed, OutputState, OutputStream};
pub use report::{
    FailureAnalysis, FailureEvidence, GpuReport, IoReport, JobReport, MetricSeries, MetricSummary, MetricsStatus,
    NodeBursts, NodeNetworkReport, ReportTotals, SharedNodeBand, SpreadSeries, TelemetryCoverage, Verdict,
    WHOLE_COVERAGE_SHARE, XidEvent,
};
pub use script::{EnvironmentAccess, JobScript, StoredText};
pub use signals::{FlameBar, ImportantLogLine, JobLogs, JobProfile, LogLine, ProfileFunction};
pub use tags::{JobTag, JobTags, TagOrigin};
pub use tokens::{CreatedShare, CreatedToken, NewShare, NewToken, ShareInfo, TokenInfo, TokenUse};
pub use traces::{
    GpuTraceBreakdown, JobTraces, TraceBatch, TraceBreakdown, TraceReceipt, TraceRecord, TraceRejection, TraceTop,
    TraceVerdict,
};
pub use usage::{BlameSplit, Histogram, HistogramBin, TopEntry, UsageGrouping, UsageReport, UsageRow, UsageStats};
pub use vocabulary::{
    Attribution, Blame, BurstStatus, DigestState, Direction, EvidenceSource, EvidenceStrength, GpusSource, IoSource,
    LogKind, LogsStatus, MetricsReads, MetricsState, NotifyRule, ProfileStatus, ReportSource, SeriesForm, Severity,
    TokenState, TraceBottleneck, TraceCategory, ValuesState, VerdictKind,
};

//! The closed vocabularies of the wire: each a fixed set of words, an enum here so the OpenAPI document
//! lists the words and the compiler finds every match. Words of reports archived in our store are kept.

use std::fmt;

use serde::{Deserialize, Serialize};

/// `ALL`, `as_str` (the word on the wire, as serde writes it), `from_word` and `Display` for a vocabulary.
macro_rules! words {
    ($name:ident { $($variant:ident => $word:literal),+ $(,)? }) => {
        impl $name {
            /// Every word of the vocabulary, in declaration order.
            pub const ALL: &'static [Self] = &[$(Self::$variant),+];

            /// The word on the wire.
            pub fn as_str(self) -> &'static str {
                match self {
                    $(Self::$variant => $word,)+
                }
            }

            /// The value whose word is `word` exactly; None for any other text.
            pub fn from_word(word: &str) -> Option<Self> {
                Self::ALL.iter().copied().find(|value| value.as_str() == word)
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

/// Whose failure a badly ended job's was, as far as the evidence goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum Blame {
    /// `infrastructure`: GPU hardware, a node or the network (or Slurm's own `NODE_FAIL`, `BOOT_FAIL`).
    Infrastructure,
    /// `application`: the program: a non-zero exit, out of memory, its time limit, a program-caused XID.
    Application,
    /// `unknown`: the evidence does not say.
    Unknown,
}
words!(Blame { Infrastructure => "infrastructure", Application => "application", Unknown => "unknown" });

/// Where one fact behind a failure analysis comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum EvidenceSource {
    /// `slurm`: Slurm's own record of the job's end.
    Slurm,
    /// `xid`: an XID error on one of the job's GPUs (dcgm-exporter).
    Xid,
    /// `node_event`: A node event from slurmdbd (a node drained or down).
    NodeEvent,
    /// `pingmesh_loss`: probe loss on a ping-mesh path.
    PingmeshLoss,
    /// `pingmesh_rtt`: A high p99 round-trip time on a ping-mesh path.
    PingmeshRtt,
    /// `link_errors`: RDMA link errors (a link down, symbol errors).
    LinkErrors,
    /// `ecc`: GPU memory ECC events (rows remapped, a remap failed).
    Ecc,
}
words!(EvidenceSource { Slurm => "slurm", Xid => "xid", NodeEvent => "node_event", PingmeshLoss => "pingmesh_loss", PingmeshRtt => "pingmesh_rtt", LinkErrors => "link_errors", Ecc => "ecc" });

/// How strongly one fact points at the infrastructure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum EvidenceStrength {
    /// `strong`: enough alone (a GPU off the bus, a node down, sustained loss).
    Strong,
    /// `weak`: consistent with an infrastructure cause but not enough alone (a brief RTT spike).
    Weak,
    /// `application`: points at the application (an XID the driver raises for program faults).
    Application,
    /// `fact`: Slurm's record of the end itself: neither for nor against.
    Fact,
    /// `context`: seen near the job but not on its path, or long over when it ended: shown, not counted.
    Context,
}
words!(EvidenceStrength { Strong => "strong", Weak => "weak", Application => "application", Fact => "fact", Context => "context" });

/// How a job report was made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum ReportSource {
    /// `live`: computed now, for a running job.
    Live,
    /// `final`: computed now, for an ended job.
    Final,
    /// `archived`: stored at the job's end and read back.
    Archived,
}
words!(ReportSource { Live => "live", Final => "final", Archived => "archived" });

/// The form of a job report's GPU time series.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum SeriesForm {
    /// `per_gpu`: every GPU's own series.
    #[default]
    PerGpu,
    /// `spread`: per metric, the lowest, mean and highest across the GPUs (a big job's summary).
    Spread,
}
words!(SeriesForm { PerGpu => "per_gpu", Spread => "spread" });

/// Whether the metric source answered for a job report.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum MetricsState {
    /// `ok`: the source answered with the job's series.
    Ok,
    /// `no_data`: the source answered, but has no series for this job's GPUs.
    NoData,
    /// `unavailable`: the source did not answer.
    Unavailable,
}
words!(MetricsState { Ok => "ok", NoData => "no_data", Unavailable => "unavailable" });

/// Where a report's GPU figures over the window were read from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum MetricsReads {
    /// `raw`: every sample of the window (short jobs, or recording rules missing or lagging).
    #[default]
    Raw,
    /// `recording_rules`: whole hours and 5-minute buckets from the site's recording rules, the
    /// window's two partial edges from raw samples, combined exactly.
    RecordingRules,
}
words!(MetricsReads { Raw => "raw", RecordingRules => "recording_rules" });

/// Where a listed job's digest (`mean_gpu_util`, `mean_tensor_active`, `blame`) comes from. A job
/// without one has no digest yet: its report has not been made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum DigestState {
    /// `archived`: the job's archived report, made with its metrics.
    Archived,
    /// `no_data`: the job's report was made, and the metrics source had nothing of its GPUs (past
    /// retention, or never exported): the means stay empty for good; `blame` may still be set.
    NoData,
    /// `live`: the job runs; the means so far, read when the page was listed.
    Live,
}
words!(DigestState { Archived => "archived", NoData => "no_data", Live => "live" });

/// Whether the metric source answered for the grid's colours.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum ValuesState {
    /// `ok`: the source answered.
    Ok,
    /// `unavailable`: the source did not answer: the page colours by job only.
    Unavailable,
}
words!(ValuesState { Ok => "ok", Unavailable => "unavailable" });

/// Which evidence tied a GPU to a job, best first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum Attribution {
    /// `hpc_job_label`: dcgm-exporter's `hpc_job` label named the job on this GPU's series.
    HpcJobLabel,
    /// `plugin_record`: the node recorded the GPU indices while the job ran (Slurm plugin or ingest API).
    PluginRecord,
    /// `whole_node`: the job held every GPU of the node.
    WholeNode,
    /// `node_only`: only the node is known: every GPU of the node is listed, uncertain.
    NodeOnly,
}
words!(Attribution { HpcJobLabel => "hpc_job_label", PluginRecord => "plugin_record", WholeNode => "whole_node", NodeOnly => "node_only" });

/// How much a verdict matters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    /// `info`: worth knowing.
    Info,
    /// `warning`: resources were wasted or at risk.
    Warning,
    /// `critical`: something broke (XID errors).
    Critical,
}
words!(Severity { Info => "info", Warning => "warning", Critical => "critical" });

/// Which way traffic flows on a node's links.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    /// `tx`: sent.
    Tx,
    /// `rx`: received.
    Rx,
}
words!(Direction { Tx => "tx", Rx => "rx" });

/// Whether a node's short-interval peaks are known.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum BurstStatus {
    /// `measured`: A node agent exports peak rates.
    Measured,
    /// `unknown`: counters only: the peak cannot be known.
    Unknown,
}
words!(BurstStatus { Measured => "measured", Unknown => "unknown" });

/// Where a job's Lustre figures come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum IoSource {
    /// `jobstats`: the file system's job statistics (Lustre `jobid_var`): this job's I/O alone.
    Jobstats,
    /// `nodes`: the Lustre clients of the job's nodes: every job running there together.
    Nodes,
}
words!(IoSource { Jobstats => "jobstats", Nodes => "nodes" });

/// How a node's GPU count of a job was found (slurmdbd keeps only the job's total).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum GpusSource {
    /// `single_node`: the job ran on one node: the total is that node's.
    SingleNode,
    /// `even_split`: the total divides evenly over the job's nodes.
    EvenSplit,
    /// `unknown`: the total does not split exactly: the count is absent.
    Unknown,
}
words!(GpusSource { SingleNode => "single_node", EvenSplit => "even_split", Unknown => "unknown" });

/// What mostly held a job's traced GPUs (kebab-case on the wire).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "kebab-case")]
pub enum TraceBottleneck {
    /// `compute-bound`: kernels (compute) took most of the traced time.
    ComputeBound,
    /// `communication-bound`: NCCL communication took a large share.
    CommunicationBound,
    /// `input-bound`: GPUs idled between host-to-device copies: waiting for data.
    InputBound,
    /// `memory-copy-bound`: memory copies took a large share.
    MemoryCopyBound,
    /// `gpus-idle`: the GPUs were mostly idle.
    GpusIdle,
}
words!(TraceBottleneck { ComputeBound => "compute-bound", CommunicationBound => "communication-bound", InputBound => "input-bound", MemoryCopyBound => "memory-copy-bound", GpusIdle => "gpus-idle" });

/// Whether a personal API token still works.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum TokenState {
    /// `live`: usable.
    Live,
    /// `expired`: past its expiry date.
    Expired,
    /// `revoked`: revoked by its user.
    Revoked,
}
words!(TokenState { Live => "live", Expired => "expired", Revoked => "revoked" });

/// Whether a job's log lines could be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum LogsStatus {
    /// `ok`: VictoriaLogs answered.
    Ok,
    /// `unavailable`: VictoriaLogs did not answer in time, or refused.
    Unavailable,
    /// `not_configured`: no VictoriaLogs is configured on this server.
    NotConfigured,
}
words!(LogsStatus { Ok => "ok", Unavailable => "unavailable", NotConfigured => "not_configured" });

/// Whether a job's profile could be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum ProfileStatus {
    /// `ok`: Pyroscope answered with samples.
    Ok,
    /// `empty`: no samples in the window (or the job has not started).
    Empty,
    /// `unavailable`: Pyroscope did not answer in time, or refused.
    Unavailable,
    /// `not_configured`: no Pyroscope is configured on this server.
    NotConfigured,
}
words!(ProfileStatus { Ok => "ok", Empty => "empty", Unavailable => "unavailable", NotConfigured => "not_configured" });

/// Why a log line matters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum LogKind {
    /// `xid`: an NVIDIA XID error.
    Xid,
    /// `nccl_error`: an NCCL error.
    NcclError,
    /// `nccl_timeout`: an NCCL (watchdog) timeout.
    NcclTimeout,
    /// `oom_kill`: the kernel's OOM killer.
    OomKill,
    /// `link_down`: A network link went down.
    LinkDown,
    /// `slurm`: Slurm, about this job.
    Slurm,
}
words!(LogKind { Xid => "xid", NcclError => "nccl_error", NcclTimeout => "nccl_timeout", OomKill => "oom_kill", LinkDown => "link_down", Slurm => "slurm" });

/// What a job report's verdict found. The kinds of reports archived in our store are kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum VerdictKind {
    /// `idle_gpus`: GPUs that sat idle.
    IdleGpus,
    /// `outlier_node`: a node slower than the rest.
    OutlierNode,
    /// `low_tensor_activity`: busy GPUs doing little tensor work.
    LowTensorActivity,
    /// `memory_nearly_full`: GPU memory nearly full.
    MemoryNearlyFull,
    /// `unbalanced_gpus`: uneven load across the GPUs.
    UnbalancedGpus,
    /// `xid_errors`: XID errors of the hardware or driver.
    XidErrors,
    /// `program_gpu_faults`: XID errors programs cause.
    ProgramGpuFaults,
    /// `good`: the GPUs were used efficiently.
    Good,
    /// `io_bound`: a node waited on I/O.
    IoBound,
    /// `node_memory_pressure`: a node's host memory ran short.
    NodeMemoryPressure,
    /// `node_power`: a node's power draw.
    NodePower,
    /// `power_readings_disagree`: a node's power readings cannot all be true.
    PowerReadingsDisagree,
    /// `micro_bursts`: network micro-bursts on a node's links.
    MicroBursts,
    /// `attribution_uncertain`: a shared node's GPUs no record placed.
    AttributionUncertain,
    /// `telemetry_gap`: the GPU samples end well before the window does.
    TelemetryGap,
}
words!(VerdictKind { IdleGpus => "idle_gpus", OutlierNode => "outlier_node", LowTensorActivity => "low_tensor_activity", MemoryNearlyFull => "memory_nearly_full", UnbalancedGpus => "unbalanced_gpus", XidErrors => "xid_errors", ProgramGpuFaults => "program_gpu_faults", Good => "good", IoBound => "io_bound", NodeMemoryPressure => "node_memory_pressure", NodePower => "node_power", PowerReadingsDisagree => "power_readings_disagree", MicroBursts => "micro_bursts", AttributionUncertain => "attribution_uncertain", TelemetryGap => "telemetry_gap" });

/// What a trace summary measures. The words are also the store's (`trace_summaries.category`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum TraceCategory {
    /// `cuda_api`: host-side CUDA runtime/driver API time.
    CudaApi,
    /// `kernel`: GPU kernel execution (compute).
    Kernel,
    /// `memcpy`: memory copies; the name is the kind (`HtoD`, `DtoH`, `DtoD`, `PtoP`).
    Memcpy,
    /// `nccl`: NCCL collectives and point-to-point; the name is the operation (`AllReduce`, …).
    Nccl,
    /// `sync`: host waits in `cudaStreamSynchronize`, `cudaDeviceSynchronize`, … .
    Sync,
}
words!(TraceCategory { CudaApi => "cuda_api", Kernel => "kernel", Memcpy => "memcpy", Nccl => "nccl", Sync => "sync" });

/// A notification rule. The words are also the configuration's (`[notify] rules`) and the store's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum NotifyRule {
    /// `idle_gpus`: a running job whose GPUs have been idle for a while.
    IdleGpus,
    /// `infrastructure_failure`: a job that ended badly, by the infrastructure's fault (its report's blame).
    InfrastructureFailure,
    /// `node_faulting`: a node drained or down again and again.
    NodeFaulting,
    /// `monthly_usage`: each month, to each account coordinator, the last month's usage and waste of their
    /// accounts.
    MonthlyUsage,
}
words!(NotifyRule { IdleGpus => "idle_gpus", InfrastructureFailure => "infrastructure_failure", NodeFaulting => "node_faulting", MonthlyUsage => "monthly_usage" });

#[cfg(test)]
mod tests {
    use super::*;

    fn check<T>(all: &[T], word: fn(T) -> &'static str)
    where
        T: Serialize + for<'de> Deserialize<'de> + PartialEq + fmt::Debug + Copy,
    {
        for &value in all {
            let json = serde_json::to_string(&value).expect("a vocabulary word serialises");
            assert_eq!(json, format!("\"{}\"", word(value)));
            assert_eq!(serde_json::from_str::<T>(&json).expect("a vocabulary word reads back"), value);
        }
    }

    /// Serde writes and reads the word `as_str` gives, for every variant of every vocabulary.
    #[test]
    fn serde_words_are_as_str() {
        check(&[Blame::Infrastructure, Blame::Application, Blame::Unknown], Blame::as_str);
        check(
            &[
                EvidenceSource::Slurm,
                EvidenceSource::Xid,
                EvidenceSource::NodeEvent,
                EvidenceSource::PingmeshLoss,
                EvidenceSource::PingmeshRtt,
                EvidenceSource::LinkErrors,
                EvidenceSource::Ecc,
            ],
            EvidenceSource::as_str,
        );
        check(
            &[
                EvidenceStrength::Strong,
                EvidenceStrength::Weak,
                EvidenceStrength::Application,
                EvidenceStrength::Fact,
                EvidenceStrength::Context,
            ],
            EvidenceStrength::as_str,
        );
        check(&[ReportSource::Live, ReportSource::Final, ReportSource::Archived], ReportSource::as_str);
        check(&[MetricsState::Ok, MetricsState::NoData, MetricsState::Unavailable], MetricsState::as_str);
        check(&[ValuesState::Ok, ValuesState::Unavailable], ValuesState::as_str);
        check(
            &[Attribution::HpcJobLabel, Attribution::PluginRecord, Attribution::WholeNode, Attribution::NodeOnly],
            Attribution::as_str,
        );
        check(&[Severity::Info, Severity::Warning, Severity::Critical], Severity::as_str);
        check(&[Direction::Tx, Direction::Rx], Direction::as_str);
        check(&[BurstStatus::Measured, BurstStatus::Unknown], BurstStatus::as_str);
        check(&[IoSource::Jobstats, IoSource::Nodes], IoSource::as_str);
        check(&[GpusSource::SingleNode, GpusSource::EvenSplit, GpusSource::Unknown], GpusSource::as_str);
        check(
            &[
                TraceBottleneck::ComputeBound,
                TraceBottleneck::CommunicationBound,
                TraceBottleneck::InputBound,
                TraceBottleneck::MemoryCopyBound,
                TraceBottleneck::GpusIdle,
            ],
            TraceBottleneck::as_str,
        );
        check(&[TokenState::Live, TokenState::Expired, TokenState::Revoked], TokenState::as_str);
        check(&[LogsStatus::Ok, LogsStatus::Unavailable, LogsStatus::NotConfigured], LogsStatus::as_str);
        check(
            &[ProfileStatus::Ok, ProfileStatus::Empty, ProfileStatus::Unavailable, ProfileStatus::NotConfigured],
            ProfileStatus::as_str,
        );
        check(
            &[
                LogKind::Xid,
                LogKind::NcclError,
                LogKind::NcclTimeout,
                LogKind::OomKill,
                LogKind::LinkDown,
                LogKind::Slurm,
            ],
            LogKind::as_str,
        );
        check(
            &[
                VerdictKind::IdleGpus,
                VerdictKind::OutlierNode,
                VerdictKind::LowTensorActivity,
                VerdictKind::MemoryNearlyFull,
                VerdictKind::UnbalancedGpus,
                VerdictKind::XidErrors,
                VerdictKind::ProgramGpuFaults,
                VerdictKind::Good,
                VerdictKind::IoBound,
                VerdictKind::NodeMemoryPressure,
                VerdictKind::NodePower,
                VerdictKind::PowerReadingsDisagree,
                VerdictKind::MicroBursts,
                VerdictKind::AttributionUncertain,
                VerdictKind::TelemetryGap,
            ],
            VerdictKind::as_str,
        );
        check(
            &[
                TraceCategory::CudaApi,
                TraceCategory::Kernel,
                TraceCategory::Memcpy,
                TraceCategory::Nccl,
                TraceCategory::Sync,
            ],
            TraceCategory::as_str,
        );
        check(
            &[
                NotifyRule::IdleGpus,
                NotifyRule::InfrastructureFailure,
                NotifyRule::NodeFaulting,
                NotifyRule::MonthlyUsage,
            ],
            NotifyRule::as_str,
        );
    }

    /// `from_word` reads back every word `as_str` gives, and nothing else.
    #[test]
    fn from_word_reads_as_str_exactly() {
        for &kind in VerdictKind::ALL {
            assert_eq!(VerdictKind::from_word(kind.as_str()), Some(kind));
        }
        assert_eq!(TraceCategory::from_word("kernel"), Some(TraceCategory::Kernel));
        assert_eq!(TraceCategory::from_word("Kernel"), None);
        assert_eq!(NotifyRule::from_word(" idle_gpus"), None);
    }
}

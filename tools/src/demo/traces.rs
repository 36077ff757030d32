//! Demo trace summaries: what node-side eBPF collectors would have sent for a few of the demo's jobs,
//! consistent with their GPU profiles — a multi-node training run that waits in NCCL, one that keeps its
//! tensor cores fed, and an input-bound run whose GPUs idle between host-to-device copies.

use chrono::{DateTime, Utc};

use slurmlens::domain::cluster::ClusterName;
use slurmlens::domain::trace::{TraceCategory, TraceName, TraceSummary};
use slurmlens::store::{Store, StoreError};

/// The shape of a traced job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TracedKind {
    /// Large all-reduces over a slow or congested fabric: NCCL takes most of the time.
    CommunicationBound,
    /// Dense GEMMs with overlapped communication.
    ComputeBound,
    /// The data loader does not keep up: idle gaps between host-to-device copies.
    InputBound,
}

/// One traced GPU of a job.
#[derive(Debug, Clone)]
pub struct TracedGpu {
    pub job_id: u32,
    pub node: String,
    pub gpu: u16,
    pub start: i64,
    pub end: i64,
    pub kind: TracedKind,
}

/// Summaries per minute over the last `hours` of each GPU's run (a collector's 60 s aggregation).
const INTERVAL_S: i64 = 60;

fn summaries(gpu: &TracedGpu, hours: i64) -> Vec<TraceSummary> {
    let from = gpu.start.max(gpu.end - hours * 3600);
    let second = 1_000_000_000u64;
    // (category, name, calls per minute, share of the minute, bytes per call)
    let shape: &[(TraceCategory, &str, u64, f64, u64)] = match gpu.kind {
        TracedKind::CommunicationBound => &[
            (TraceCategory::Kernel, "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x256x64", 2400, 0.28, 0),
            (TraceCategory::Kernel, "flash_fwd_kernel", 1200, 0.07, 0),
            (TraceCategory::Nccl, "AllReduce", 600, 0.44, 256 << 20),
            (TraceCategory::Nccl, "AllGather", 300, 0.08, 64 << 20),
            (TraceCategory::Sync, "cudaStreamSynchronize", 60, 0.05, 0),
        ],
        TracedKind::ComputeBound => &[
            (TraceCategory::Kernel, "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x256x64", 4800, 0.62, 0),
            (TraceCategory::Kernel, "flash_fwd_kernel", 2400, 0.18, 0),
            (TraceCategory::Nccl, "ReduceScatter", 300, 0.09, 128 << 20),
            (TraceCategory::Memcpy, "HtoD", 60, 0.01, 32 << 20),
        ],
        TracedKind::InputBound => &[
            (TraceCategory::Kernel, "implicit_convolve_sgemm", 3000, 0.30, 0),
            (TraceCategory::Kernel, "bn_fw_tr_1C11_kernel_NCHW", 3000, 0.08, 0),
            (TraceCategory::Memcpy, "HtoD", 120, 0.06, 48 << 20),
            (TraceCategory::Sync, "cudaStreamSynchronize", 120, 0.07, 0),
        ],
    };
    let mut out = Vec::new();
    let mut at = from - from.rem_euclid(INTERVAL_S);
    while at + INTERVAL_S <= gpu.end {
        // A little variation per minute, the same on every run.
        let wobble = 1.0 + 0.06 * (((at / INTERVAL_S) * 7 + i64::from(gpu.gpu)) % 5 - 2) as f64 / 2.0;
        let Some(interval_start) = DateTime::<Utc>::from_timestamp(at, 0) else { break };
        for &(category, name, calls, share, bytes) in shape {
            let total_ns = ((share * wobble).min(0.95) * (INTERVAL_S as f64) * second as f64) as u64;
            let Ok(name) = TraceName::parse(category, name) else { continue };
            out.push(TraceSummary {
                job_id: gpu.job_id,
                gpu: gpu.gpu,
                pid: 40_000 + u32::from(gpu.gpu),
                interval_start,
                interval_s: INTERVAL_S as u32,
                category,
                name,
                count: calls,
                total_ns,
                max_ns: total_ns.div_ceil(calls).saturating_mul(3).min(total_ns),
                bytes: if matches!(category, TraceCategory::Memcpy | TraceCategory::Nccl) { bytes * calls } else { 0 },
            });
        }
        at += INTERVAL_S;
    }
    out
}

/// Stores the demo summaries of `gpus` (the last `hours` of each); returns the rows stored.
pub async fn seed(store: &Store, cluster: &ClusterName, gpus: &[TracedGpu], hours: i64) -> Result<u64, StoreError> {
    let mut stored = 0;
    for gpu in gpus {
        for chunk in summaries(gpu, hours).chunks(1000) {
            stored += store.insert_trace_summaries(cluster, &gpu.node, chunk).await?;
        }
    }
    Ok(stored)
}

#[cfg(test)]
mod tests {
    use super::*;
    use slurmlens::domain::bottleneck::{self, ActivityTotals};

    fn verdict_of(kind: TracedKind) -> &'static str {
        let gpu = TracedGpu { job_id: 1, node: "gpu001".into(), gpu: 0, start: 0, end: 7200, kind };
        let mut totals = ActivityTotals::default();
        let mut intervals = std::collections::BTreeSet::new();
        for summary in summaries(&gpu, 1) {
            intervals.insert(summary.interval_start);
            match summary.category {
                TraceCategory::Kernel => totals.kernel_ns += summary.total_ns,
                TraceCategory::Nccl => totals.nccl_ns += summary.total_ns,
                TraceCategory::Memcpy => {
                    totals.memcpy_ns += summary.total_ns;
                    totals.htod_count += summary.count;
                    totals.htod_ns += summary.total_ns;
                    totals.htod_bytes += summary.bytes;
                }
                TraceCategory::Sync => totals.sync_ns += summary.total_ns,
                _ => {}
            }
        }
        totals.traced_ns = intervals.len() as u64 * INTERVAL_S as u64 * 1_000_000_000;
        bottleneck::verdict(&totals).map_or("none", |verdict| verdict.bottleneck.as_str())
    }

    #[test]
    fn each_demo_shape_reads_as_its_bottleneck() {
        assert_eq!(verdict_of(TracedKind::CommunicationBound), "communication-bound");
        assert_eq!(verdict_of(TracedKind::ComputeBound), "compute-bound");
        assert_eq!(verdict_of(TracedKind::InputBound), "input-bound");
    }
}

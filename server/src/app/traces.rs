//! Where a job's traced GPU time went (the trace breakdown): the stored trace summaries of a job summed per GPU and
//! for the whole job, shared in compute, NCCL, memory copies, synchronisation and idle, with the top
//! kernels and collectives and the bottleneck verdict. Used by `GET /api/v1/jobs/{id}/traces` and by
//! the report.

use slurmlens_wire as wire;

use crate::domain::bottleneck::{self, ActivityTotals, TimeShares};
use crate::domain::cluster::ClusterName;
use crate::domain::job::RunWindow;
use crate::store::traces::{JobTraceTotals, NamedTotals};
use crate::store::{Store, StoreError};

/// The breakdown of one run's trace summaries (all shares zero and no verdict when none were sent, or
/// when the job has not started: `run` is `None`).
pub async fn job_traces(
    store: &Store,
    cluster: &ClusterName,
    job_id: u32,
    run: Option<RunWindow>,
) -> Result<wire::JobTraces, StoreError> {
    let totals = match run {
        Some(run) => store.job_trace_totals(cluster, job_id, &run).await?,
        None => JobTraceTotals::default(),
    };
    let mut job_total = ActivityTotals::default();
    let gpus = totals
        .gpus
        .iter()
        .map(|(gpu, activity)| {
            job_total.add(activity);
            wire::GpuTraceBreakdown { node: gpu.node.clone(), gpu: gpu.index, breakdown: breakdown(activity) }
        })
        .collect();
    let top = |entries: Vec<NamedTotals>| {
        entries
            .into_iter()
            .map(|entry| wire::TraceTop {
                name: entry.name,
                count: entry.count,
                total_ns: entry.total_ns,
                max_ns: entry.max_ns,
                bytes: entry.bytes,
            })
            .collect()
    };
    Ok(wire::JobTraces {
        cluster: cluster.to_string(),
        job_id,
        total: breakdown(&job_total),
        gpus,
        top_kernels: top(totals.top_kernels),
        top_collectives: top(totals.top_collectives),
    })
}

fn breakdown(totals: &ActivityTotals) -> wire::TraceBreakdown {
    let shares = TimeShares::of(totals);
    wire::TraceBreakdown {
        traced_s: totals.traced_ns as f64 / 1e9,
        compute_share: shares.compute,
        communication_share: shares.communication,
        memcpy_share: shares.memcpy,
        sync_share: shares.sync,
        idle_share: shares.idle,
        kernel_ns: totals.kernel_ns,
        nccl_ns: totals.nccl_ns,
        memcpy_ns: totals.memcpy_ns,
        sync_ns: totals.sync_ns,
        verdict: bottleneck::verdict(totals)
            .map(|verdict| wire::TraceVerdict { kind: bottleneck_of(verdict.bottleneck), evidence: verdict.evidence }),
    }
}

/// The wire's word for a bottleneck.
fn bottleneck_of(bottleneck: bottleneck::Bottleneck) -> wire::TraceBottleneck {
    match bottleneck {
        bottleneck::Bottleneck::ComputeBound => wire::TraceBottleneck::ComputeBound,
        bottleneck::Bottleneck::CommunicationBound => wire::TraceBottleneck::CommunicationBound,
        bottleneck::Bottleneck::InputBound => wire::TraceBottleneck::InputBound,
        bottleneck::Bottleneck::MemoryCopyBound => wire::TraceBottleneck::MemoryCopyBound,
        bottleneck::Bottleneck::GpusIdle => wire::TraceBottleneck::GpusIdle,
    }
}

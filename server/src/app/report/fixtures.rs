//! Jobs and readings for the report's unit tests: a two-node, sixteen-GPU training job that ended
//! badly, and what VictoriaMetrics could have answered for it.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};

use super::gather::{Gathered, GpuData, NodeData};
use super::{ReportSettings, Reporter};
use crate::domain::exit_code::ExitCode;
use crate::domain::gpu::GpuRef;
use crate::domain::hostlist::Hostlist;
use crate::domain::ids::JobIdentity;
use crate::domain::job::JobRecord;
use crate::domain::report::{AttributedGpu, AttributionRule};
use crate::domain::state::JobState;
use crate::domain::time::TimeLimit;
use crate::domain::tres::{MemRequest, TresMap};

/// slurmdbd's raw state of a failed job.
const JOB_FAILED: u32 = 5;
/// The job's window: 2026-11-29 10:00 to 11:00 UTC.
pub const START: i64 = 1_795_946_400;
pub const END: i64 = START + 3600;

/// A report maker with the default series catalogue and no sources.
pub(super) fn reporter() -> Reporter {
    Reporter::new(None, None, ReportSettings::default())
}

pub fn at(seconds: i64) -> DateTime<Utc> {
    DateTime::from_timestamp(seconds, 0).unwrap_or_default()
}

/// Job 4242 on `gpu[001-002]`, eight GPUs each, FAILED with exit code 1 after an hour.
pub fn failed_job() -> JobRecord {
    let node_list = "gpu[001-002]".to_string();
    JobRecord {
        db_index: 1,
        identity: JobIdentity::plain(4242),
        job_name: "train".into(),
        user: "alice".into(),
        uid: 1001,
        gid: 1001,
        account: "ml".into(),
        partition: "gpu".into(),
        qos: "normal".into(),
        state: JobState::from_raw(JOB_FAILED),
        kill_requid: None,
        exit_code: ExitCode::from_wait_status(1 << 8),
        derived_exit_code: ExitCode::from_wait_status(0),
        time_submit: START as u64 - 60,
        time_eligible: START as u64 - 60,
        time_start: START as u64,
        time_end: END as u64,
        time_suspended: 0,
        timelimit: TimeLimit::from_raw(120),
        nodes: Hostlist::parse(&node_list).unwrap_or_default(),
        node_list,
        alloc_nodes: 2,
        cpus_req: 64,
        mem_req: MemRequest::from_raw(0),
        tres_alloc: TresMap::parse("1=64,4=2,1001=16").unwrap_or_default(),
        tres_req: TresMap::parse("1=64,4=2,1001=16").unwrap_or_default(),
        comment: None,
        work_dir: "/home/alice".into(),
        submit_line: "sbatch train.sh".into(),
        sluid: None,
        restarts: None,
    }
}

/// What the job's sixteen GPUs and two nodes read over its hour, in minute steps: GPU `index` of
/// each node at `10 * index` % utilisation (GPU 0 idle), 300 W; node `gpu001` drew 4 kW.
pub(super) fn gathered() -> Gathered {
    let mut data = BTreeMap::new();
    let mut attributed = Vec::new();
    for node in ["gpu001", "gpu002"] {
        for index in 0..8u16 {
            let gpu = GpuRef { node: node.into(), index };
            let util = 10.0 * f64::from(index);
            let timeline: Vec<(i64, f64)> = (1..=60).map(|minute| (START + 60 * minute, util)).collect();
            let mut entry = GpuData::default();
            entry.timelines.insert("gpu_util".into(), timeline);
            for (key, mean) in
                [("gpu_util", util), ("tensor_active", util / 2.0), ("power", 300.0), ("fb_used", 40_000.0)]
            {
                entry.means.insert(key.into(), mean);
                entry.maxes.insert(key.into(), mean);
                entry.counts.insert(key.into(), 240.0);
            }
            entry.idle_share = Some(if index == 0 { 1.0 } else { 0.0 });
            entry.energy_mj = Some(300.0 * 3600.0 * 1000.0);
            data.insert(gpu.clone(), entry);
            attributed.push(AttributedGpu { gpu, rule: AttributionRule::WholeNode, uncertain: false });
        }
    }
    let mut network = BTreeMap::new();
    let mut power = NodeData::default();
    power.means.insert("node_power".into(), 4000.0);
    network.insert("gpu001".to_string(), power);
    Gathered {
        faults: Vec::new(),
        bursts: BTreeMap::new(),
        attributed,
        data,
        network,
        io: BTreeMap::new(),
        whole_nodes: true,
        step_s: 60,
        window_s: 3600,
        reads: slurmlens_wire::MetricsReads::Raw,
        reads_note: None,
        rules_incomplete: Vec::new(),
    }
}

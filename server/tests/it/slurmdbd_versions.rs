//! Every slurmdbd a site runs (22.05 to 26.05): the lab's 22.05 tables are copied and given each later
//! release's shape (the columns it added, the association bounds 25.05 removed; see
//! `server/src/sources/slurmdbd/shape.rs`), and the reader answers the same from each, using what a
//! newer column carries where it exists (26.05's `sluid`, 24.11's `restart_cnt` and event `deleted`).

use chrono::{Duration, Utc};
use slurmlens::config::AnonymousAccess;
use slurmlens::domain::ids::JobSelector;
use slurmlens::domain::job::{JobFilter, TimeWindow};
use slurmlens::domain::scope::ViewerScope;
use slurmlens::sources::slurmdbd::{SlurmDbd, TableShape};

use crate::support::{admin, database_shared, finished_lab_job, test_config};

/// What each release after 22.05 changed in the tables read, cumulatively applied in this order.
const RELEASES: [(&str, &[&str]); 6] = [
    (
        "23.02",
        &[
            "ALTER TABLE {c}_job_table ADD COLUMN extra TEXT, ADD COLUMN failed_node TINYTEXT, ADD COLUMN licenses TEXT",
            "ALTER TABLE {c}_assoc_table ADD COLUMN comment TEXT",
        ],
    ),
    (
        "23.11",
        &[
            "ALTER TABLE {c}_event_table ADD COLUMN extra TEXT, ADD COLUMN instance_id TEXT, ADD COLUMN instance_type TEXT",
            "ALTER TABLE {c}_assoc_table ADD COLUMN id_parent INT UNSIGNED NOT NULL DEFAULT 0, ADD COLUMN lineage TEXT",
        ],
    ),
    (
        "24.05",
        &[
            "ALTER TABLE {c}_job_table ADD COLUMN std_err TEXT NOT NULL DEFAULT '', ADD COLUMN std_in TEXT NOT NULL DEFAULT '', \
         ADD COLUMN std_out TEXT NOT NULL DEFAULT ''",
            "ALTER TABLE {c}_assoc_table ADD COLUMN flags INT UNSIGNED NOT NULL DEFAULT 0",
        ],
    ),
    (
        "24.11",
        &[
            "ALTER TABLE {c}_job_table ADD COLUMN qos_req TEXT, ADD COLUMN restart_cnt SMALLINT UNSIGNED DEFAULT 0",
            "ALTER TABLE {c}_event_table ADD COLUMN deleted TINYINT NOT NULL DEFAULT 0",
        ],
    ),
    (
        "25.05",
        &[
            "ALTER TABLE {c}_job_table ADD COLUMN resv_req TEXT, ADD COLUMN segment_size SMALLINT UNSIGNED NOT NULL DEFAULT 0",
            "ALTER TABLE {c}_step_table ADD COLUMN cwd TEXT NOT NULL DEFAULT '', ADD COLUMN std_err TEXT NOT NULL DEFAULT '', \
         ADD COLUMN std_in TEXT NOT NULL DEFAULT '', ADD COLUMN std_out TEXT NOT NULL DEFAULT '', \
         ADD COLUMN timelimit INT UNSIGNED NOT NULL DEFAULT 0",
            "ALTER TABLE {c}_assoc_table DROP COLUMN lft, DROP COLUMN rgt",
        ],
    ),
    (
        "26.05",
        &["ALTER TABLE {c}_job_table ADD COLUMN exclusive TINYTEXT, ADD COLUMN oversubscribe TINYTEXT, \
         ADD COLUMN sluid BIGINT UNSIGNED NOT NULL DEFAULT 0"],
    ),
];

/// The lab's tables as they were when the test began (the lab runs other tests' jobs meanwhile): every
/// release's copy is made from this one, so all hold the same rows.
const BASE: &str = "v2205";

/// The tables a reader reads, per cluster.
const TABLES: [&str; 4] = ["job_table", "step_table", "event_table", "assoc_table"];

/// A SLUID as 26.05 makes one: cluster id, milliseconds, sequence.
const SLUID: u64 = (17 << 52) | (1_764_000_000_000 << 10) | 3;

/// Cluster `cluster`: a copy of cluster `from`'s tables.
fn copy_tables(from: &str, cluster: &str) {
    for table in TABLES {
        admin(&format!(
            "DROP TABLE IF EXISTS {cluster}_{table}; CREATE TABLE {cluster}_{table} LIKE {from}_{table}; \
             INSERT INTO {cluster}_{table} SELECT * FROM {from}_{table}"
        ));
    }
}

/// Cluster `cluster`: a copy of `BASE` with the shape of every release up to `release`.
fn copy_base_as(cluster: &str, release: &str) {
    copy_tables(BASE, cluster);
    for (name, changes) in RELEASES {
        for change in changes {
            admin(&change.replace("{c}", cluster));
        }
        if name == release {
            break;
        }
    }
}

/// The facts a listing and a job page show, without what later releases add.
fn listing(jobs: &[slurmlens::domain::job::JobRecord]) -> Vec<(u32, String, String, u64, u64, String)> {
    jobs.iter()
        .map(|job| {
            let (user, nodes) = (job.user.clone(), job.node_list.clone());
            (job.identity.id_job, user, job.state.name().to_string(), job.time_start, job.time_end, nodes)
        })
        .collect()
}

async fn read_all(reader: &SlurmDbd, window: TimeWindow) -> Vec<slurmlens::domain::job::JobRecord> {
    let catalog = reader.tres_catalog().await.expect("tres");
    let (jobs, _) = reader
        .jobs_in_window(&ViewerScope::Staff, window, &JobFilter::default(), &catalog, None, 100_000)
        .await
        .expect("a listing");
    jobs
}

#[tokio::test(flavor = "multi_thread")]
async fn every_slurmdbd_release_reads_the_same_and_newer_columns_are_used() {
    let _db = database_shared().await;
    let job_id = finished_lab_job().await;
    copy_tables("lab", BASE);
    let mut config = test_config(AnonymousAccess::Staff);
    let releases: Vec<String> = RELEASES.iter().map(|(name, _)| format!("v{}", name.replace('.', ""))).collect();
    for cluster in releases.iter().map(String::as_str).chain([BASE]) {
        config.clusters.push(cluster.parse().expect("a cluster name"));
    }
    let app = slurmlens::serve::app(&config).expect("the application");
    assert_eq!(
        app.cluster(Some("lab")).expect("the lab reader").shape().await.expect("the lab's shape"),
        TableShape::default(),
        "the lab is 22.05"
    );
    let base_reader = app.cluster(Some(BASE)).expect("the copy of the lab's tables");
    let window = TimeWindow::new(Utc::now() - Duration::days(30), Utc::now() + Duration::minutes(5)).expect("window");
    let expected = listing(&read_all(base_reader, window).await);
    assert!(!expected.is_empty(), "the lab has jobs");
    let expected_events = base_reader.node_events(window, None).await.expect("the lab's node events").len();
    let (lab_job, lab_steps) =
        base_reader.job(&ViewerScope::Staff, JobSelector::Id(job_id)).await.expect("job").expect("the job in the copy");

    for ((release, _), cluster) in RELEASES.iter().zip(&releases) {
        copy_base_as(cluster, release);
        let at_least = |since: &str| release >= &since;
        if at_least("24.11") {
            admin(&format!("UPDATE {cluster}_job_table SET restart_cnt = 2 WHERE id_job = {job_id}"));
            // An event slurmdbd marked deleted is no longer an event.
            admin(&format!(
                "INSERT INTO {cluster}_event_table (node_name, cluster_nodes, state, reason, reason_uid, time_start, time_end, tres, deleted) \
                 VALUES ('gpu-gone', '', 1, 'deleted by slurmdbd', 0, UNIX_TIMESTAMP() - 3600, 0, '', 1)"
            ));
        }
        if at_least("26.05") {
            admin(&format!("UPDATE {cluster}_job_table SET sluid = {SLUID} WHERE id_job = {job_id}"));
        }
        let reader = app.cluster(Some(cluster)).expect("the release's reader");
        let shape = reader.shape().await.expect("its shape");
        assert_eq!(
            shape,
            TableShape {
                job_sluid: at_least("26.05"),
                job_restarts: at_least("24.11"),
                event_deleted: at_least("24.11")
            },
            "{release}"
        );
        assert_eq!(listing(&read_all(reader, window).await), expected, "{release}: the same listing as 22.05's");
        let (job, steps) =
            reader.job(&ViewerScope::Staff, JobSelector::Id(job_id)).await.expect("job").expect("the copied job");
        assert_eq!((job.db_index, steps.len()), (lab_job.db_index, lab_steps.len()), "{release}: job {job_id}");
        assert_eq!(job.restarts, at_least("24.11").then_some(2), "{release}: restart_cnt");
        let sluid = job.sluid.map(|sluid| sluid.to_string());
        let expected_sluid = at_least("26.05").then(|| slurmlens_slurm::sluid::Sluid::from_stored(SLUID));
        assert_eq!(job.sluid, expected_sluid.flatten(), "{release}: sluid ({sluid:?})");
        let events = reader.node_events(window, None).await.expect("node events");
        assert_eq!(events.len(), expected_events, "{release}: node events (a deleted one is none)");
        assert!(reader.nodes(&reader.tres_catalog().await.expect("tres")).await.is_ok(), "{release}: nodes");
        let user = &lab_job.user;
        assert_eq!(
            reader.scope_for_user(user).await.expect("scope"),
            base_reader.scope_for_user(user).await.expect("scope"),
            "{release}: {user}'s scope"
        );
    }
    for cluster in releases.iter().map(String::as_str).chain([BASE]) {
        for table in TABLES {
            admin(&format!("DROP TABLE IF EXISTS {cluster}_{table}"));
        }
    }
}

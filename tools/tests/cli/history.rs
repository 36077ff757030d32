//! `demo seed-history` span by span against the lab: the rows bulk-loaded (`LOAD DATA LOCAL INFILE`)
//! are the jobs and steps it reports, numbered without a gap, and the secondary indexes dropped for the
//! load are all back. Seeded twice: the second history replaces the first, and gives back the indexes
//! the first left without (as a seeding killed mid-way leaves them).

use std::path::Path;

use sqlx::MySqlPool;

use super::live::{dev_against_lab, lab_vars};

/// The table's secondary indexes as `name(columns)`, sorted.
async fn indexes(pool: &MySqlPool, table: &str) -> Vec<String> {
    sqlx::query_scalar(
        "SELECT CONCAT(INDEX_NAME, '(', GROUP_CONCAT(COLUMN_NAME ORDER BY SEQ_IN_INDEX), ')') \
         FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ? \
         GROUP BY INDEX_NAME ORDER BY INDEX_NAME",
    )
    .bind(table)
    .fetch_all(pool)
    .await
    .expect("reading indexes")
}

/// (rows, lowest job_db_inx, highest job_db_inx) of `table`.
async fn extent(pool: &MySqlPool, table: &str) -> (i64, u64, u64) {
    sqlx::query_as(&format!(
        "SELECT COUNT(*), CAST(IFNULL(MIN(job_db_inx), 0) AS UNSIGNED), CAST(IFNULL(MAX(job_db_inx), 0) AS UNSIGNED) \
         FROM `{table}`"
    ))
    .fetch_one(pool)
    .await
    .expect("counting rows")
}

/// The jobs and steps `seed-history` says it wrote.
fn written(printed: &str) -> (i64, i64) {
    let line = printed.lines().find(|line| line.starts_with("cluster spanprobe:")).expect("a summary line");
    let number = |word: &str| -> i64 {
        let before = line.split(&format!(" {word}")).next().expect("the count");
        before.rsplit(' ').next().expect("a number").parse().expect("a count")
    };
    (number("jobs"), number("steps"))
}

#[tokio::test(flavor = "multi_thread")]
async fn a_long_history_is_loaded_span_by_span_with_every_row_and_index() {
    let vars = lab_vars();
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("tools/ has a parent");
    let registered = std::process::Command::new("bash")
        .current_dir(root)
        .envs(&vars)
        .args(["lab/lab.sh", "history-cluster", "spanprobe"])
        .output()
        .expect("lab.sh runs");
    assert!(registered.status.success(), "{}", String::from_utf8_lossy(&registered.stderr));
    let pool = MySqlPool::connect(&vars["SLURMLENS_SEEDER_URL"]).await.expect("the seeder's connection");
    let (jobs_table, steps_table) = ("spanprobe_job_table", "spanprobe_step_table");
    // The indexes slurmdbd gave the lab's own cluster, which no seeding touches: a run of this test
    // killed mid-way may have left spanprobe's tables without theirs.
    let (job_indexes, step_indexes) = (indexes(&pool, "lab_job_table").await, indexes(&pool, "lab_step_table").await);
    assert!(job_indexes.len() > 10, "slurmdbd's job table has its indexes: {job_indexes:?}");
    // 45 days: two spans, written side by side.
    for seed in ["1", "2"] {
        let printed = dev_against_lab(&[
            "demo",
            "seed-history",
            "--cluster",
            "spanprobe",
            "--days",
            "45",
            "--jobs",
            "12000",
            "--seed",
            seed,
        ]);
        let (jobs, steps) = written(&printed);
        assert!(jobs >= 12_000 && steps > jobs, "{printed}");
        assert_eq!(extent(&pool, jobs_table).await, (jobs, 1, jobs as u64), "seed {seed}: every job, numbered from 1");
        let (step_rows, first, last) = extent(&pool, steps_table).await;
        assert_eq!(step_rows, steps, "seed {seed}: every step");
        assert!(first >= 1 && last <= jobs as u64, "seed {seed}: steps belong to the jobs ({first}..{last})");
        assert_eq!(indexes(&pool, jobs_table).await, job_indexes, "seed {seed}: the job table's indexes are back");
        assert_eq!(indexes(&pool, steps_table).await, step_indexes, "seed {seed}: the step table's indexes are back");
        // As a seeding killed between dropping the indexes and building them leaves the tables: the
        // next seeding builds them all the same (another cluster's tables say which).
        let last = seed == "2";
        for (table, kept) in [(jobs_table, "rollup"), (steps_table, "")].into_iter().filter(|_| !last) {
            let names: Vec<String> = sqlx::query_scalar(
                "SELECT DISTINCT INDEX_NAME FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = DATABASE() \
                 AND TABLE_NAME = ? AND INDEX_NAME NOT IN ('PRIMARY', ?)",
            )
            .bind(table)
            .bind(kept)
            .fetch_all(&pool)
            .await
            .expect("index names");
            let drops: Vec<String> = names.iter().map(|name| format!("DROP INDEX `{name}`")).collect();
            sqlx::raw_sql(&format!("ALTER TABLE `{table}` {}", drops.join(", ")))
                .execute(&pool)
                .await
                .expect("dropping");
        }
    }
}

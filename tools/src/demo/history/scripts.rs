//! Batch scripts as slurmdbd 22.05 stores them where the site sets `AccountingStoreFlags=job_script`: one
//! row per distinct text in `<cluster>_job_script_table` (`hash_inx`, `script_hash`, `batch_script`),
//! named by each job row's `script_hash_inx` (0: no script, as for `srun --pty`). The text is made from
//! the job's template, its user and its working directory, so one user's repeated runs of a training
//! script are one text and share a hash, as on a real cluster, and two users' runs of it do not.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use anyhow::Result;
use sha2::{Digest, Sha256};
use sqlx::mysql::MySqlArguments;

use super::rows::JobRow;
use super::workload::Mode;
use super::write::{RowSink, insert_sql};

/// Script rows per statement.
const SCRIPTS_PER_STATEMENT: usize = 200;

/// The batch script of `job`, `None` for an interactive job (it has none).
pub(super) fn batch_script(job: &JobRow) -> Option<String> {
    let template = &job.template;
    let steps = match job.mode {
        Mode::Interactive => return None,
        Mode::Srun(steps) => usize::from(steps.max(1)),
        Mode::BatchOnly => 0,
    };
    let mut text = format!(
        "#!/bin/bash\n#SBATCH --job-name={}\n# {} ({})\nset -euo pipefail\ncd {}\nsource .venv/bin/activate\n",
        template.name, template.project, template.script, job.work_dir
    );
    if steps == 0 {
        let _ = writeln!(text, "{}", template.cmd);
    }
    for _ in 0..steps {
        let _ = writeln!(text, "srun {}", template.cmd);
    }
    Some(text)
}

/// A script's `hash_inx` (from its digest, never 0) and `script_hash` (the digest in hex).
pub(super) fn script_key(text: &str) -> (u64, String) {
    let digest = Sha256::digest(text.as_bytes());
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    // A positive BIGINT: slurmdbd's column is unsigned, but the lab's readers cast it.
    let inx = (u64::from_be_bytes(first) & 0x7FFF_FFFF_FFFF_FFFF).max(1);
    let mut hex = String::with_capacity(64);
    for byte in digest {
        let _ = write!(hex, "{byte:02x}");
    }
    (inx, hex)
}

/// `job`'s `script_hash_inx`: 0 without a script.
pub(super) fn script_hash_inx(job: &JobRow) -> u64 {
    batch_script(job).map_or(0, |text| script_key(&text).0)
}

/// The distinct scripts of `jobs`, by `hash_inx`: `(script_hash, text)`.
pub(super) fn distinct_scripts(jobs: &[JobRow]) -> BTreeMap<u64, (String, String)> {
    let mut scripts = BTreeMap::new();
    for text in jobs.iter().filter_map(batch_script) {
        let (inx, hash) = script_key(&text);
        scripts.entry(inx).or_insert((hash, text));
    }
    scripts
}

/// The statements that insert `scripts` into `table` (a script already there, from an earlier span, is kept).
/// The script table's columns and a row's placeholders.
pub(super) const SCRIPT_COLS: &str = "hash_inx, script_hash, batch_script";
pub(super) const SCRIPT_TUPLE: &str = "(?,?,?)";

pub(super) fn encode_scripts(
    table: &str,
    scripts: &BTreeMap<u64, (String, String)>,
) -> Result<Vec<(String, MySqlArguments)>> {
    let rows: Vec<_> = scripts.iter().collect();
    rows.chunks(SCRIPTS_PER_STATEMENT)
        .map(|chunk| {
            let sql = insert_sql(table, SCRIPT_COLS, SCRIPT_TUPLE, chunk.len()).replacen(
                "INSERT INTO",
                "INSERT IGNORE INTO",
                1,
            );
            let mut args = MySqlArguments::default();
            for (inx, (hash, text)) in chunk {
                script_row(&mut args, **inx, hash, text)?;
            }
            Ok((sql, args))
        })
        .collect()
}

/// One script's values, as [`SCRIPT_TUPLE`]'s placeholders take them.
pub(super) fn script_row<S: RowSink>(sink: &mut S, inx: u64, hash: &str, text: &str) -> Result<()> {
    sink.value(inx)?;
    sink.value(hash)?;
    sink.value(text)?;
    sink.end_row();
    Ok(())
}

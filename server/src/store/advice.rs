//! Advice at submission: each user's opt-out (`advice_opt_outs`) and how many GPUs each of a few
//! archived reports kept busy.

use std::collections::BTreeMap;

use chrono::Utc;
use serde::Deserialize;

use super::{Store, StoreError};
use crate::domain::cluster::ClusterName;

/// The part of an archived report's GPU that busy-GPU counting reads.
#[derive(Deserialize)]
struct Summary {
    metric: String,
    mean: f64,
}

impl Store {
    /// Whether `user` turned advice off.
    pub async fn advice_opted_out(&self, user: &str) -> Result<bool, StoreError> {
        let row: Option<(String,)> = sqlx::query_as("SELECT user FROM advice_opt_outs WHERE user = ?")
            .bind(user)
            .fetch_optional(&self.pool)
            .await?;
        Ok(row.is_some())
    }

    /// Turns advice on or off for `user` (idempotent).
    pub async fn set_advice_enabled(&self, user: &str, enabled: bool) -> Result<(), StoreError> {
        if enabled {
            sqlx::query("DELETE FROM advice_opt_outs WHERE user = ?").bind(user).execute(&self.pool).await?;
        } else {
            sqlx::query("INSERT IGNORE INTO advice_opt_outs (user, opted_out_at) VALUES (?, ?)")
                .bind(user)
                .bind(Utc::now())
                .execute(&self.pool)
                .await?;
        }
        Ok(())
    }

    /// For each of these job records (id, submit time; a handful) with an archived report that holds
    /// GPU metrics: how many of its GPUs had a mean `gpu_util` of at least `busy_util`. MariaDB extracts
    /// the GPUs' summaries, so the reports' series never leave the database.
    pub async fn busy_gpus_among(
        &self,
        cluster: &ClusterName,
        records: &[(u32, u64)],
        busy_util: f64,
    ) -> Result<BTreeMap<(u32, u64), u64>, StoreError> {
        if records.is_empty() {
            return Ok(BTreeMap::new());
        }
        let pairs = vec!["(?, ?)"; records.len()].join(", ");
        let sql = format!(
            "SELECT job_id, time_submit, JSON_EXTRACT(report, '$.gpus[*].summary') FROM job_reports \
             WHERE cluster = ? AND has_metrics AND (job_id, time_submit) IN ({pairs})"
        );
        let mut query = sqlx::query_as::<_, (u32, u64, Option<String>)>(&sql).bind(cluster.as_str());
        for (job_id, time_submit) in records {
            query = query.bind(job_id).bind(time_submit);
        }
        let rows = query.fetch_all(&self.pool).await?;
        let mut busy = BTreeMap::new();
        for (job_id, time_submit, summaries) in rows {
            let Some(summaries) = summaries else { continue };
            // A wildcard path's matches come wrapped in an array, but MariaDB leaves a single match bare.
            let gpus = match serde_json::from_str::<Vec<Vec<Summary>>>(&summaries) {
                Ok(gpus) => gpus,
                Err(_) => match serde_json::from_str::<Vec<Summary>>(&summaries) {
                    Ok(one) => vec![one],
                    Err(_) => continue,
                },
            };
            let count = gpus
                .iter()
                .filter(|summary| summary.iter().any(|metric| metric.metric == "gpu_util" && metric.mean >= busy_util))
                .count();
            busy.insert((job_id, time_submit), count as u64);
        }
        Ok(busy)
    }
}

-- Job reports archived when a job ends (summaries and downsampled series as served by
-- GET /api/v1/jobs/{id}/report), so they outlive VictoriaMetrics' retention. One row per job record:
-- a requeued job has a new time_submit and so a row of its own.
CREATE TABLE job_reports (
    cluster      VARCHAR(64)   NOT NULL,
    job_id       INT UNSIGNED  NOT NULL,
    time_submit  BIGINT UNSIGNED NOT NULL,
    archived_at  DATETIME(3)   NOT NULL,
    report       LONGTEXT      NOT NULL,
    PRIMARY KEY (cluster, job_id, time_submit)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4;

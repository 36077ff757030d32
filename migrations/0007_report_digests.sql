-- Digests for every finished job, not only those with metrics: a report made without any metrics of
-- the job's GPUs (past VictoriaMetrics' retention, or never exported) is archived too, with
-- has_metrics = FALSE, so the listing can say "no data" instead of "not computed yet". Every report
-- archived before this migration had metrics.
ALTER TABLE job_reports ADD COLUMN has_metrics BOOLEAN NOT NULL DEFAULT TRUE;

-- Jobs whose report could not be made because the metrics source did not answer in time (a timeout
-- on a huge job): the archiver counts its tries and gives up after a few, instead of trying again
-- every round forever.
CREATE TABLE report_attempts (
    cluster      VARCHAR(64)       NOT NULL,
    job_id       INT UNSIGNED      NOT NULL,
    time_submit  BIGINT UNSIGNED   NOT NULL,
    tries        SMALLINT UNSIGNED NOT NULL,
    last_try     DATETIME(3)       NOT NULL,
    last_error   VARCHAR(255)      NOT NULL,
    PRIMARY KEY (cluster, job_id, time_submit)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4;

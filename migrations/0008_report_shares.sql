-- Shared report links: a job's owner (or staff) makes an expiring, revocable, read-only link to that
-- one job's report. Only the SHA-256 of a link's secret is kept; the link is shown once, when made.
-- The job is named by cluster, id and submit time, as slurmdbd names it (ids are reused).
CREATE TABLE report_shares (
    id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY,
    secret_sha256 CHAR(64) NOT NULL,
    cluster VARCHAR(64) NOT NULL,
    job_id VARCHAR(64) NOT NULL,
    id_job INT UNSIGNED NOT NULL,
    time_submit BIGINT NOT NULL,
    owner VARCHAR(64) NOT NULL,
    created_by VARCHAR(64) NOT NULL,
    note VARCHAR(200) NOT NULL,
    created_at DATETIME(3) NOT NULL,
    expires_at DATETIME(3) NOT NULL,
    revoked_at DATETIME(3) NULL,
    UNIQUE KEY secret_sha256 (secret_sha256),
    KEY by_job (cluster, id_job, time_submit)
);

-- Every opening of a shared link, answered or refused.
CREATE TABLE report_share_uses (
    id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY,
    share_id BIGINT UNSIGNED NOT NULL,
    used_at DATETIME(3) NOT NULL,
    status SMALLINT UNSIGNED NOT NULL,
    peer VARCHAR(64) NOT NULL,
    KEY by_share (share_id, used_at)
);

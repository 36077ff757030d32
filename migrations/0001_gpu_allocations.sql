-- Which GPUs (by index on their node, and UUID when known) each job or step held, as recorded on the
-- node while it ran (slurm-plugin) or sent through the ingest API. slurmdbd keeps only the count.
CREATE TABLE gpu_allocations (
    cluster      VARCHAR(64)       NOT NULL,
    job_id       INT UNSIGNED      NOT NULL,
    -- `job` for the allocation as a whole, else sacct's step suffix: `batch`, `extern`, `0`, `1`, ...
    step         VARCHAR(32)       NOT NULL,
    node         VARCHAR(255)      NOT NULL,
    gpu_index    SMALLINT UNSIGNED NOT NULL,
    gpu_uuid     VARCHAR(64)       NULL,
    cgroup_path  VARCHAR(1024)     NULL,
    first_seen   DATETIME(3)       NOT NULL,
    last_seen    DATETIME(3)       NOT NULL,
    ended_at     DATETIME(3)       NULL,
    PRIMARY KEY (cluster, job_id, step, node, gpu_index),
    KEY by_gpu (cluster, node, gpu_index, first_seen)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4;

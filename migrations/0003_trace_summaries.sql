-- eBPF trace summaries (POST /api/v1/traces, POST /api/v1/traces/nsys): what the node-side collectors
-- (uprobes on libcudart, libcuda, libnccl) aggregated per process, GPU and interval. One row per
-- (cluster, job, node, GPU, pid, interval, category, name); a replayed batch hits the primary key and
-- stores nothing (INSERT IGNORE keeps the first values).
--
-- Sizing: a 100-node x 8-GPU cluster with 10 s intervals and ~70 distinct names per GPU and interval
-- writes ~5,600 rows/s. Rows are kept narrow (~90 bytes with the key): the category is a 1-byte ENUM
-- and a name is a 16-byte hash here, its text stored once in `trace_names` (kernel names run to
-- thousands of characters). Retention deletes by `interval_start` through `by_interval`.
CREATE TABLE trace_names (
    -- The first 16 bytes of SHA-256 of `name`: UNHEX(LEFT(SHA2(name, 256), 32)).
    name_hash  BINARY(16)    NOT NULL,
    name       TEXT          NOT NULL,
    PRIMARY KEY (name_hash)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4;

CREATE TABLE trace_summaries (
    cluster         VARCHAR(64)       NOT NULL,
    job_id          INT UNSIGNED      NOT NULL,
    node            VARCHAR(128)      NOT NULL,
    -- Slurm's GPU index on the node (as in SLURM_JOB_GPUS).
    gpu             SMALLINT UNSIGNED NOT NULL,
    -- 0 when the source does not know the process (an nsys report).
    pid             INT UNSIGNED      NOT NULL,
    interval_start  DATETIME          NOT NULL,
    interval_s      INT UNSIGNED      NOT NULL,
    -- cuda_api: host-side API time; kernel: GPU execution; memcpy: name = HtoD/DtoH/DtoD/PtoP;
    -- nccl: name = collective (AllReduce, ...); sync: cudaStreamSynchronize/cudaDeviceSynchronize waits.
    category        ENUM('cuda_api', 'kernel', 'memcpy', 'nccl', 'sync') NOT NULL,
    name_hash       BINARY(16)        NOT NULL,
    count           BIGINT UNSIGNED   NOT NULL,
    total_ns        BIGINT UNSIGNED   NOT NULL,
    max_ns          BIGINT UNSIGNED   NOT NULL,
    bytes           BIGINT UNSIGNED   NOT NULL,
    PRIMARY KEY (cluster, job_id, node, gpu, pid, interval_start, category, name_hash),
    KEY by_interval (interval_start)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4;

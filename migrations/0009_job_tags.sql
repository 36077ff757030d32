-- Job tags: words users put on their own jobs (staff on any) and the rules put on every job they read
-- (the application its script or traced processes show). A job record is named as the archived
-- reports name it: cluster, job id and submit time (ids are reused). `set_by` is the user who set it,
-- or `:rule` (no Slurm user name holds a colon). At most 16 tags per job record (the application's rule).
CREATE TABLE job_tags (
    cluster      VARCHAR(64)     NOT NULL,
    job_id       INT UNSIGNED    NOT NULL,
    time_submit  BIGINT UNSIGNED NOT NULL,
    tag          VARCHAR(32)     NOT NULL,
    set_by       VARCHAR(64)     NOT NULL,
    set_at       DATETIME(3)     NOT NULL,
    PRIMARY KEY (cluster, job_id, time_submit, tag),
    -- "The jobs with tag T in cluster C", newest submission first, as the listing reads them.
    KEY by_tag (cluster, tag, time_submit, job_id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4;

-- When the rules last looked at a job record (so a job page reads its script once, not on every view).
CREATE TABLE job_tag_rules_seen (
    cluster      VARCHAR(64)     NOT NULL,
    job_id       INT UNSIGNED    NOT NULL,
    time_submit  BIGINT UNSIGNED NOT NULL,
    seen_at      DATETIME(3)     NOT NULL,
    -- Whether the job had ended with its script stored then: until so, it is read again on the next ask
    -- (a running job's traces grow; slurmdbd may store a short job's script after its end).
    job_ended    BOOLEAN         NOT NULL,
    PRIMARY KEY (cluster, job_id, time_submit)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4;

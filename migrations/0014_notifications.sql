-- Notifications: what the rules found (a running job's idle GPUs, a job ended by an infrastructure
-- fault, a node that keeps faulting), one row per delivery (a finding, a channel and an address), kept
-- before it is sent so that a restart loses nothing. The unique key makes a finding's delivery happen
-- once however many rounds or replicas see it.
CREATE TABLE notifications (
    id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY,
    rule VARCHAR(32) NOT NULL,
    -- What the finding is about, e.g. `sakura/1234/1767225600` (a job record) or `sakura/gpu017/20441`.
    subject_key VARCHAR(191) NOT NULL,
    channel VARCHAR(16) NOT NULL,
    -- An e-mail address, or the configured name of a webhook.
    address VARCHAR(191) NOT NULL,
    -- Whose notification it is (the job's user), for their own list; NULL for staff's.
    user VARCHAR(64) NULL,
    cluster VARCHAR(64) NOT NULL,
    title VARCHAR(255) NOT NULL,
    body TEXT NOT NULL,
    link VARCHAR(512) NOT NULL,
    created_at DATETIME(3) NOT NULL,
    next_try_at DATETIME(3) NOT NULL,
    sent_at DATETIME(3) NULL,
    -- Given up after the last try; the cause stays in last_error.
    failed_at DATETIME(3) NULL,
    attempts INT UNSIGNED NOT NULL DEFAULT 0,
    last_error VARCHAR(512) NULL,
    UNIQUE KEY delivery (rule, subject_key, channel, address),
    KEY pending (sent_at, failed_at, next_try_at),
    KEY by_address (address, sent_at),
    KEY by_user (user, created_at)
);

-- A user's "not this rule for me".
CREATE TABLE notification_optouts (
    user VARCHAR(64) NOT NULL,
    rule VARCHAR(32) NOT NULL,
    created_at DATETIME(3) NOT NULL,
    PRIMARY KEY (user, rule)
);

-- The failure rule reads the reports archived since its last round that blame the infrastructure.
CREATE INDEX by_blame_archived ON job_reports (blame, archived_at);

-- The share of an archived report's GPU hours that were measured: on GPUs placed as the job's own. The
-- rest ran on a shared node's GPUs no record placed (the report lists them and counts none), so
-- showback applies the job's mean utilisation and energy to this share of its GPU hours only. NULL:
-- all of them, as for every report archived before this column (no back-fill: it would read every
-- stored report once, and such reports predate the unattributed hours anyway).
ALTER TABLE job_reports ADD COLUMN measured_share DOUBLE NULL;

-- The share of an archived report's GPU hours that were measured: on GPUs placed as the job's own. The
-- rest ran on a shared node's GPUs no record placed (the report lists them and counts none), so
-- showback applies the job's mean utilisation and energy to this share of its GPU hours only. NULL:
-- all of them. Reports archived before this migration get theirs from the JSON once, here.
ALTER TABLE job_reports ADD COLUMN measured_share DOUBLE NULL;
UPDATE job_reports
    SET measured_share = GREATEST(0, 1 - (JSON_VALUE(report, '$.totals.unattributed_gpu_hours') + 0)
                                        / (JSON_VALUE(report, '$.totals.gpu_hours') + 0))
    WHERE JSON_VALUE(report, '$.totals.unattributed_gpu_hours') + 0 > 0
      AND JSON_VALUE(report, '$.totals.gpu_hours') + 0 > 0;

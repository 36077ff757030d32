-- The efficiency figures of archived reports, next to the report, so that the jobs listing (and the
-- Gantt coloured by efficiency) can read them for thousands of jobs without parsing report JSON.
ALTER TABLE job_reports
    ADD COLUMN mean_gpu_util      DOUBLE NULL,
    ADD COLUMN mean_tensor_active DOUBLE NULL,
    ADD INDEX by_submit (cluster, time_submit);

UPDATE job_reports
SET mean_gpu_util      = JSON_VALUE(report, '$.totals.mean_gpu_util'),
    mean_tensor_active = JSON_VALUE(report, '$.totals.mean_tensor_active');

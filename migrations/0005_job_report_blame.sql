-- Whether a badly ended job failed because of the infrastructure or the application, from its
-- archived report, for the jobs listing's "failure" column and filter.
ALTER TABLE job_reports ADD COLUMN blame VARCHAR(16) NULL;

UPDATE job_reports SET blame = JSON_VALUE(report, '$.failure.blame');

-- What each archived report was made by: a report made before a change to what reports say (their
-- wording, their coverage of the run) is made again while VictoriaMetrics still holds its job's series.
ALTER TABLE job_reports ADD COLUMN generation SMALLINT UNSIGNED NOT NULL DEFAULT 1;

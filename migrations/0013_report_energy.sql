-- The GPUs' energy of each archived report (kWh, its totals' energy_kwh), beside the other digest
-- columns, so that showback (`/api/v1/usage`) sums a month of reports without reading their JSON.
-- Reports archived before this migration get theirs from the JSON once, here.
ALTER TABLE job_reports ADD COLUMN energy_kwh DOUBLE NULL;
UPDATE job_reports SET energy_kwh = JSON_VALUE(report, '$.totals.energy_kwh')
    WHERE JSON_VALUE(report, '$.totals.energy_kwh') IS NOT NULL;

-- Accounting (`GET /api/v1/usage`) reads the jobs that ended in a time range, and groups
-- them by one label's value: a lookup by job and key, covering the value (else SQLite
-- scans every label of the key, through the primary key, for each job).
CREATE INDEX jobs_by_finished ON jobs (finished_at_us);
CREATE INDEX job_labels_by_job ON job_labels (job_seq, key, value);

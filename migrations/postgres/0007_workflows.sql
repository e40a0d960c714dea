-- Accounting (`GET /api/v1/usage`) reads the jobs that ended in a time range, and groups
-- them by one label's value (a lookup by job and key: the primary key leads with key, value).
CREATE INDEX jobs_by_finished ON jobs (finished_at_us);
CREATE INDEX job_labels_by_job ON job_labels (job_seq, key);

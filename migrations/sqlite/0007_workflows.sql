-- Accounting (`GET /api/v1/usage`) reads the jobs that ended in a time range.
CREATE INDEX jobs_by_finished ON jobs (finished_at_us);

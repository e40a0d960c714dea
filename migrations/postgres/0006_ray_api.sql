-- Ray's job API as a front door (docs/ray-api.md).
-- A job's second id, chosen by its submitter (Ray's `submission_id`): unique, searchable.
ALTER TABLE jobs ADD COLUMN submission_id TEXT;
CREATE UNIQUE INDEX jobs_by_submission_id ON jobs (submission_id);
-- When Ray's `DELETE /api/jobs/{id}` took the finished job out of Ray's view (Berth keeps it).
ALTER TABLE jobs ADD COLUMN ray_deleted_at_us BIGINT;
-- The search scans (seq, id, name, submission_id) only.
DROP INDEX jobs_search;
CREATE INDEX jobs_search ON jobs (seq, id, name, submission_id);

-- Working directories and py_modules uploaded as Ray packages. The bytes are files named by
-- their SHA-256 in the data dir; `used_at_us` is the last upload, check or submission that
-- named the package: garbage collection removes packages unused for a while that no
-- unfinished job names.
CREATE TABLE packages (
    name           TEXT   PRIMARY KEY,
    sha256         TEXT   NOT NULL,
    size_bytes     BIGINT NOT NULL,
    uploaded_by    TEXT   NOT NULL,
    uploaded_at_us BIGINT NOT NULL,
    used_at_us     BIGINT NOT NULL
);
CREATE INDEX packages_by_sha256 ON packages (sha256);

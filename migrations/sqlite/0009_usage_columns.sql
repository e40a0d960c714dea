-- Accounting sums request × run time over every job of a range. The requested CPU, GPU and
-- memory as columns, kept with the request by every write of spec_json, so that sum reads no
-- JSON: parsing each job's request was most of its time.
ALTER TABLE jobs ADD COLUMN req_cpu REAL NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN req_gpu REAL NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN req_memory_gb REAL NOT NULL DEFAULT 0;
UPDATE jobs SET
    req_cpu = COALESCE(json_extract(spec_json, '$.resources.cpu'), 0),
    req_gpu = COALESCE(json_extract(spec_json, '$.resources.gpu'), 0),
    req_memory_gb = COALESCE(json_extract(spec_json, '$.resources.memory_gb'), 0);

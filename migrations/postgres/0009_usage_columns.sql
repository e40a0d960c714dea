-- Accounting sums request × run time over every job of a range. The requested CPU, GPU and
-- memory as columns, kept with the request by every write of spec_json, so that sum reads no
-- JSON: parsing each job's request was most of its time.
ALTER TABLE jobs ADD COLUMN req_cpu DOUBLE PRECISION NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN req_gpu DOUBLE PRECISION NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN req_memory_gb DOUBLE PRECISION NOT NULL DEFAULT 0;
UPDATE jobs SET
    req_cpu = COALESCE((spec_json::json #>> '{resources,cpu}')::float8, 0),
    req_gpu = COALESCE((spec_json::json #>> '{resources,gpu}')::float8, 0),
    req_memory_gb = COALESCE((spec_json::json #>> '{resources,memory_gb}')::float8, 0);

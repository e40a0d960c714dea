-- Accounting reads every job that ended in a range. This index holds each ended job's
-- finish time and every column the report reads (grouping, state, requests, the four
-- times, runs and retries), so the report scans the index alone instead of looking up each
-- wide row (request JSON and all); only ended jobs are in it, so a running job's updates
-- never touch it. It replaces the plain index on the finish time.
DROP INDEX jobs_by_finished;
CREATE INDEX jobs_ended ON jobs (finished_at_us, submitter, queue, state, req_cpu, req_gpu, req_memory_gb,
    started_at_us, admitted_at_us, enqueued_at_us, runs, retries, seq)
    WHERE finished_at_us IS NOT NULL;

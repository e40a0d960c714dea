-- 100,000 finished jobs cloned from the first real job in a Berth SQLite database, for the
-- jobs-list benches (server/benches/dashboard.rs and end2end/tests/bench.test.mjs). Run it
-- while the server is stopped. Ids, names, submitters, states, queues, priorities, times and
-- a `team` label vary, so every filter has something to find and something to skip.
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 100000)
INSERT INTO jobs (id, name, submitter, stage_id, state, spec_json, queue, rule_index, config_version, priority,
                  submitted_at_us, enqueued_at_us, updated_at_us, runs, retries, retry_at_us, flavors_json, node,
                  backend, handle, admitted_at_us, started_at_us, finished_at_us, exit_code, reason)
SELECT 'j-bench' || i, 'bench-' || i, 'user-' || (i % 20), NULL,
       CASE i % 10 WHEN 0 THEN 'failed' WHEN 1 THEN 'cancelled' ELSE 'succeeded' END,
       t.spec_json, CASE WHEN i % 4 = 0 THEN 'q' || (i % 10) ELSE t.queue END, t.rule_index, t.config_version, i % 7,
       t.submitted_at_us - (100000 - i) * 5000000, t.submitted_at_us - (100000 - i) * 5000000, t.updated_at_us,
       1, 0, NULL, t.flavors_json, t.node, t.backend, NULL,
       t.submitted_at_us - (100000 - i) * 5000000 + 1000, t.submitted_at_us - (100000 - i) * 5000000 + 2000,
       t.submitted_at_us - (100000 - i) * 5000000 + 3000000, CASE i % 10 WHEN 0 THEN 1 ELSE 0 END, NULL
FROM n, (SELECT * FROM jobs ORDER BY seq LIMIT 1) AS t;
INSERT INTO job_labels (key, value, job_seq) SELECT 'team', 't' || (seq % 7), seq FROM jobs WHERE id LIKE 'j-bench%';

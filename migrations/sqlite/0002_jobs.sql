-- Jobs, their labels (indexed for filters), stages, the event log and resource history.
-- Timestamps are microseconds since the epoch (UTC). `seq` orders jobs by submission.
CREATE TABLE jobs (
    seq             INTEGER PRIMARY KEY AUTOINCREMENT,
    id              TEXT    NOT NULL UNIQUE,
    name            TEXT    NOT NULL,
    submitter       TEXT    NOT NULL,
    stage_id        TEXT,
    state           TEXT    NOT NULL,
    -- The request as submitted: entrypoint, runtime_env, labels, resources, timeouts…
    spec_json       TEXT    NOT NULL,
    queue           TEXT,
    rule_index      BIGINT,
    config_version  BIGINT,
    priority        BIGINT  NOT NULL,
    submitted_at_us BIGINT  NOT NULL,
    enqueued_at_us  BIGINT  NOT NULL,
    updated_at_us   BIGINT  NOT NULL,
    runs            BIGINT  NOT NULL DEFAULT 0,
    retries         BIGINT  NOT NULL DEFAULT 0,
    retry_at_us     BIGINT,
    flavors_json    TEXT,
    node            TEXT,
    backend         TEXT,
    handle          TEXT,
    admitted_at_us  BIGINT,
    started_at_us   BIGINT,
    finished_at_us  BIGINT,
    exit_code       BIGINT,
    reason          TEXT
);
CREATE INDEX jobs_by_state ON jobs (state, seq);
CREATE INDEX jobs_by_queue ON jobs (queue, seq);
CREATE INDEX jobs_by_submitter ON jobs (submitter, seq);
CREATE INDEX jobs_by_stage ON jobs (stage_id, seq);
CREATE INDEX jobs_by_submitted ON jobs (submitted_at_us);

CREATE TABLE job_labels (
    key     TEXT   NOT NULL,
    value   TEXT   NOT NULL,
    job_seq BIGINT NOT NULL,
    PRIMARY KEY (key, value, job_seq)
);

CREATE TABLE stages (
    id                 TEXT   PRIMARY KEY,
    name               TEXT   NOT NULL,
    submitter          TEXT   NOT NULL,
    created_at_us      BIGINT NOT NULL,
    parallelism_json   TEXT   NOT NULL
);

CREATE TABLE events (
    seq            INTEGER PRIMARY KEY AUTOINCREMENT,
    at_us          BIGINT NOT NULL,
    kind           TEXT   NOT NULL,
    job_id         TEXT,
    queue          TEXT,
    flavor         TEXT,
    node           TEXT,
    config_version BIGINT,
    rule_index     BIGINT,
    message        TEXT   NOT NULL,
    detail_json    TEXT
);
CREATE INDEX events_by_job ON events (job_id, seq);
CREATE INDEX events_by_kind ON events (kind, seq);
CREATE INDEX events_by_time ON events (at_us);

CREATE TABLE resource_samples (
    at_us         BIGINT NOT NULL,
    queue         TEXT   NOT NULL,
    flavor        TEXT   NOT NULL,
    resource      TEXT   NOT NULL,
    used_milli    BIGINT NOT NULL,
    -- NULL: unlimited.
    nominal_milli BIGINT
);
CREATE INDEX resource_samples_by_time ON resource_samples (at_us);
CREATE INDEX resource_samples_by_queue ON resource_samples (queue, at_us);

-- Versioned scheduler config: every apply is a new immutable row; the head row names the
-- active version and is the lock that serializes concurrent applies.
CREATE TABLE config_versions (
    version       INTEGER PRIMARY KEY,
    created_at_us BIGINT  NOT NULL,
    creator_id    TEXT    NOT NULL,
    message       TEXT,
    config_json   TEXT    NOT NULL
);

CREATE TABLE config_head (
    id             INTEGER PRIMARY KEY CHECK (id = 1),
    active_version BIGINT  NOT NULL
);

INSERT INTO config_head (id, active_version) VALUES (1, 0);

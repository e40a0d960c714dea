-- The lease replicas on PostgreSQL lead by (see the PostgreSQL migration). SQLite runs one
-- process, held by a lock file beside the database; the table is here so both schemas
-- match, and stays unused.
CREATE TABLE leader_lease (
    id            INTEGER PRIMARY KEY CHECK (id = 1),
    holder        TEXT    NOT NULL DEFAULT '',
    instance      TEXT    NOT NULL DEFAULT '',
    epoch         BIGINT  NOT NULL DEFAULT 0,
    expires_at_us BIGINT  NOT NULL DEFAULT 0
);
INSERT INTO leader_lease (id) VALUES (1);

-- The waiting list a leader publishes for followers (see the PostgreSQL migration). SQLite
-- runs one process, which keeps its waiting list in memory; the table is here so both
-- schemas match, and stays unused.
CREATE TABLE waiting_view (
    id    INTEGER PRIMARY KEY CHECK (id = 1),
    epoch BIGINT  NOT NULL DEFAULT 0,
    at_us BIGINT  NOT NULL DEFAULT 0,
    body  TEXT    NOT NULL DEFAULT ''
);
INSERT INTO waiting_view (id) VALUES (1);

-- Replicas (docs/operations.md, "Several replicas"): only the leader decides, so only it
-- knows where each waiting job stands. It publishes its waiting list here (one row: each
-- waiting job's position, reason and headline, as JSON) when a full admission cycle changed
-- it, fenced by its lease epoch like its other writes; followers show what it says.
CREATE TABLE waiting_view (
    id    INTEGER PRIMARY KEY CHECK (id = 1),
    epoch BIGINT  NOT NULL DEFAULT 0,
    at_us BIGINT  NOT NULL DEFAULT 0,
    body  TEXT    NOT NULL DEFAULT ''
);
INSERT INTO waiting_view (id) VALUES (1);

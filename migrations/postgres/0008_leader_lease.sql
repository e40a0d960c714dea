-- Replicas (docs/operations.md, "Several replicas"): the one row naming the replica that
-- runs the admission loop. A replica leads while `expires_at_us` (PostgreSQL's clock, µs)
-- is ahead; it renews about every second. Each takeover bumps `epoch`, the fencing token:
-- the leader's every admission and start write checks, in its own transaction, that the
-- epoch is still the one it took (a deposed leader's write is refused).
CREATE TABLE leader_lease (
    id            INTEGER PRIMARY KEY CHECK (id = 1),
    holder        TEXT    NOT NULL DEFAULT '',
    instance      TEXT    NOT NULL DEFAULT '',
    epoch         BIGINT  NOT NULL DEFAULT 0,
    expires_at_us BIGINT  NOT NULL DEFAULT 0
);
INSERT INTO leader_lease (id) VALUES (1);

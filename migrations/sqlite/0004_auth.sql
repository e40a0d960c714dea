-- Who may do what: API tokens (stored as SHA-256 of the secret, never the secret itself),
-- dashboard sessions opened with a token, and the audit log of changes.
CREATE TABLE tokens (
    id              TEXT    PRIMARY KEY,
    secret_sha256   TEXT    NOT NULL UNIQUE,
    user_id         TEXT    NOT NULL,
    role            TEXT    NOT NULL,
    label           TEXT,
    created_at_us   BIGINT  NOT NULL,
    created_by      TEXT    NOT NULL,
    last_used_at_us BIGINT,
    revoked_at_us   BIGINT,
    revoked_by      TEXT
);

-- A session lives as long as its token is not revoked and it has not expired.
CREATE TABLE sessions (
    id_sha256      TEXT    PRIMARY KEY,
    token_id       TEXT    NOT NULL REFERENCES tokens (id),
    created_at_us  BIGINT  NOT NULL,
    expires_at_us  BIGINT  NOT NULL
);
CREATE INDEX sessions_token ON sessions (token_id);

CREATE TABLE audit (
    seq       INTEGER PRIMARY KEY AUTOINCREMENT,
    at_us     BIGINT  NOT NULL,
    actor     TEXT    NOT NULL,
    action    TEXT    NOT NULL,
    target    TEXT    NOT NULL,
    detail    TEXT    NOT NULL
);
CREATE INDEX audit_action ON audit (action, seq);

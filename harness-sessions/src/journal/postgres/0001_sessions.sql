-- harness-sessions, version 1: sessions, their records, tool receipts.
CREATE TABLE harness_session (
    session   text PRIMARY KEY,
    -- SessionMeta as JSON text
    meta      text NOT NULL,
    -- the newest fence acquired (0: none)
    fence     bigint NOT NULL DEFAULT 0,
    -- the head: last seq (0: empty) and its content hash (hex)
    head_seq  bigint NOT NULL DEFAULT 0,
    head_hash text
);

CREATE TABLE harness_record (
    session      text NOT NULL REFERENCES harness_session (session) ON DELETE CASCADE,
    seq          bigint NOT NULL CHECK (seq >= 1),
    prev_hash    text,
    content_hash text NOT NULL,
    fence        bigint NOT NULL,
    -- the event's RFC 8785 canonical JSON: the exact bytes content_hash covers
    event        text NOT NULL,
    -- one record per seq: the backstop of the head's compare-and-set
    PRIMARY KEY (session, seq)
);

CREATE TABLE harness_receipt (
    session text NOT NULL,
    key     text NOT NULL,
    -- the ToolResult as JSON text
    result  text NOT NULL,
    PRIMARY KEY (session, key)
);

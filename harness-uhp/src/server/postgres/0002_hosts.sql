-- harness-uhp, version 2: several hosts serving from one database.
-- The host that last wrote each object: a running task's host. A host is alive while its
-- marker connection (application_name `harness-uhp <host>`) is.
ALTER TABLE harness_uhp_object ADD COLUMN host text;

-- Idempotency keys, per principal, claimed in the transaction that stores their task.
CREATE TABLE harness_uhp_idempotency (
    principal   text NOT NULL,
    key         text NOT NULL,
    -- SHA-256 of the request body, hex
    fingerprint text NOT NULL,
    response_id text NOT NULL,
    claimed_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (principal, key)
);

CREATE INDEX harness_uhp_idempotency_claimed ON harness_uhp_idempotency (claimed_at);

-- The task running in each session (lifecycle.md §5: one at a time), taken with the task's
-- record, released with its final record; a dead host's is taken over.
CREATE TABLE harness_uhp_running (
    session_id  text PRIMARY KEY,
    response_id text NOT NULL,
    host        text NOT NULL
);

CREATE INDEX harness_uhp_running_response ON harness_uhp_running (response_id);

-- The keys of the tasks stored so far (one host at a time kept them in its records only).
INSERT INTO harness_uhp_idempotency (principal, key, fingerprint, response_id)
SELECT r->>'principal', r->'task'->'idempotency'->>'key',
       r->'task'->'idempotency'->>'fingerprint', id
FROM (SELECT id, record::jsonb AS r FROM harness_uhp_object WHERE kind = 'response') o
WHERE r->'task'->'idempotency'->>'key' IS NOT NULL
  AND r->'task'->'idempotency'->>'fingerprint' IS NOT NULL
ON CONFLICT DO NOTHING;

-- harness-tanstack, version 3: a forwarded request is a `POST control` input or a `POST run`
-- (an AG-UI RunAgentInput). The owner runs a run with no stream attached and answers
-- `{runId, after}`; the host that received it streams the run's events from the log.
ALTER TABLE harness_tanstack_inbox
    -- `control` (the body of POST control) or `run` (the body of POST run)
    ADD COLUMN kind text NOT NULL DEFAULT 'control';

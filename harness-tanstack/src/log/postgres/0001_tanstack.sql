-- harness-tanstack, version 1: each thread's event log, one cursor space per thread shared
-- by every host on the database.
CREATE TABLE harness_tanstack_thread (
    key       text PRIMARY KEY,
    -- the last sequence number given (0: none yet); bumped under the row's lock
    head      bigint NOT NULL DEFAULT 0,
    -- the first record still kept (records before it were truncated)
    first_seq bigint NOT NULL DEFAULT 1,
    -- membersOnly(): the user whose input made the thread
    owner     text,
    -- the waits record (never sent to a client, takes no sequence number)
    waits     text
);

CREATE TABLE harness_tanstack_event (
    key          text NOT NULL REFERENCES harness_tanstack_thread (key) ON DELETE CASCADE,
    seq          bigint NOT NULL,
    operation_id text NOT NULL,
    -- the thread id the frame names (the key may be user + thread id)
    thread_id    text NOT NULL,
    -- the AG-UI event JSON
    event        text NOT NULL,
    PRIMARY KEY (key, seq)
);

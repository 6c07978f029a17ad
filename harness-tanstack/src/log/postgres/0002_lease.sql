-- harness-tanstack, version 2: thread ownership as a lease. One host at a time holds a
-- thread's lease and is the only one whose appends land (fencing: an append names the holder
-- and the epoch it holds, checked under the thread row's lock in the same statement).
ALTER TABLE harness_tanstack_thread
    -- the host that holds the lease (a random id per process); NULL: never held
    ADD COLUMN lease_holder   text,
    -- +1 on every change of holder; the epoch of `harness.ownership.changed`
    ADD COLUMN lease_epoch    bigint NOT NULL DEFAULT 0,
    -- the database's clock (now()) past which another host may take the lease over
    ADD COLUMN lease_expires  timestamptz,
    -- the holder let it go (idle thread, graceful shutdown): the next holder `acquired` it
    ADD COLUMN lease_released boolean NOT NULL DEFAULT false;

-- the renewer's statement: every live lease of one holder
CREATE INDEX harness_tanstack_thread_lease_holder ON harness_tanstack_thread (lease_holder)
    WHERE NOT lease_released;

-- Inputs that reached a host that does not own their thread, forwarded to the owner
-- (NOTIFY harness_tanstack_inbox '<schema> <holder>'); the owner runs each as a local input
-- and writes its answer back (NOTIFY harness_tanstack_answer '<schema> <sender> <id>'). The
-- sender deletes a row once it read the answer, or withdraws one the owner never took.
CREATE TABLE harness_tanstack_inbox (
    id          bigserial PRIMARY KEY,
    -- the owner it goes to, and the host that received it
    holder      text NOT NULL,
    sender      text NOT NULL,
    key         text NOT NULL,
    request_id  text NOT NULL,
    user_name   text,
    -- the body of POST control, as received
    body        text NOT NULL,
    -- the traceparent header, as received (the owner validates it as for a local input)
    traceparent text,
    taken       boolean NOT NULL DEFAULT false,
    status      integer,
    answer      text,
    created     timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX harness_tanstack_inbox_holder ON harness_tanstack_inbox (holder) WHERE NOT taken;

-- harness-uhp, version 1: the server's live objects (tasks with their idempotency keys,
-- sessions, configured harnesses, uploads), one row each, in the order last written.
CREATE SEQUENCE harness_uhp_order;

CREATE TABLE harness_uhp_object (
    kind   text NOT NULL,
    id     text NOT NULL,
    -- the order of the last write (restore feeds records back in this order)
    ord    bigint NOT NULL,
    -- the Record as JSON text
    record text NOT NULL,
    PRIMARY KEY (kind, id)
);

CREATE INDEX harness_uhp_object_ord ON harness_uhp_object (ord);

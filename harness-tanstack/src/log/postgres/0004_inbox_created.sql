-- harness-tanstack, version 4: rows a sender left behind (it stopped before it read the
-- answer) are swept by age each time a host reads its inbox; an index on `created` keeps that
-- sweep from reading the whole table.
CREATE INDEX harness_tanstack_inbox_created ON harness_tanstack_inbox (created);

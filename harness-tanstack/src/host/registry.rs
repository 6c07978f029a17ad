//! Which threads the host has, and which are in memory: the key of each user's thread, a
//! thread read from the log when it is first used and dropped from memory when idle, and
//! the limits on threads per user and per host.
//!
//! **Each user's threads are their own.** A thread id is the client's own string ("The
//! first prompt also makes the thread"), so with one namespace for every user, whoever
//! sends an id first owns it, and its intended owner gets `403` for good. Under
//! [`AccessPolicy::MembersOnly`] the host therefore keeps a user's thread under a key made
//! of the user and the id ([`Host::thread_key`]): ann's `thread-1` and bob's `thread-1` are
//! two threads, each read and written by its owner only, and every frame still names the
//! thread by the id its client sent. (`GET host-events` is per user the same way.) With
//! [`AccessPolicy::Open`] every user may read every thread, so the key is the id. A thread
//! a host made before keys were per user (its key is its id, its owner in the log) stays
//! its owner's under its id.
//!
//! **Memory does not grow with the log.** [`Host::new`] reads no thread; a thread's state
//! is rebuilt from its records when it is first used ([`Host::ensure`]), and an idle thread
//! (no turn running, no input waiting) leaves memory, least recently used first, past
//! [`max_resident_threads`](super::HostConfig::max_resident_threads) or
//! [`max_resident_bytes`](super::HostConfig::max_resident_bytes).

use super::thread::{self, Caps, Thread};
use super::{AccessPolicy, HOST_EVENTS, Host};
use crate::log::EventLog;

/// The key of a user's thread: the length of the user id, the user id, and the thread id
/// (so that no two pairs make one key).
fn scoped_key(user: &str, thread_id: &str) -> String {
    format!("{}:{user}:{thread_id}", user.len())
}

impl<L: EventLog> Host<L> {
    /// The key under which the host keeps the thread `thread_id` of `user` (see the
    /// [module docs](super)): the id itself, or under
    /// [`MembersOnly`](AccessPolicy::MembersOnly) a key of the user's own. The methods that
    /// take a thread without a user ([`emit`](Self::emit), [`finish_turn`](Self::finish_turn),
    /// [`messages`](Self::messages), [`has_thread`](Self::has_thread), the log's) take this
    /// key; it is the `thread_id` of a [`TurnRequest`](super::TurnRequest).
    pub fn thread_key(&self, user: Option<&str>, thread_id: &str) -> String {
        let (AccessPolicy::MembersOnly, Some(user)) = (&self.cfg.access, user) else {
            return thread_id.to_owned();
        };
        let scoped = scoped_key(user, thread_id);
        // A thread made before keys were per user: its key is its id, and it stays its
        // owner's (an id that is itself one of the user's keys is not such a thread).
        let earlier = !self.has_thread(&scoped)
            && !thread_id.starts_with(&scoped_key(user, ""))
            && self.has_thread(thread_id)
            && self.owner_of(thread_id).as_deref() == Some(user);
        if earlier {
            thread_id.to_owned()
        } else {
            scoped
        }
    }

    /// The owner of a thread, from memory or from the log.
    fn owner_of(&self, key: &str) -> Option<String> {
        match self.threads.get(key) {
            Some(t) => t.owner.clone(),
            None => self.log.owner(key),
        }
    }

    /// The stream of `GET host-events` a user reads: every status under
    /// [`Open`](AccessPolicy::Open), the user's own threads' under
    /// [`MembersOnly`](AccessPolicy::MembersOnly) ("the status changes and session list
    /// changes that the user may read").
    pub(super) fn host_events_key(&self, user: Option<&str>) -> String {
        match (&self.cfg.access, user) {
            (AccessPolicy::MembersOnly, Some(user)) => format!(":{user}"),
            _ => HOST_EVENTS.to_owned(),
        }
    }

    /// Puts the thread stored under `key` in memory, rebuilding it from the log when it is
    /// not there (`thread_id`: the id its clients use, when the caller knows it). Whether the
    /// host has the thread.
    pub(super) fn ensure(&mut self, key: &str, thread_id: Option<&str>) -> bool {
        if self.threads.contains_key(key) {
            self.resident.touch(key);
            return true;
        }
        if !self.log.contains(key) {
            return false;
        }
        let t = thread::restore(&mut self.log, key, thread_id, Caps::of(&self.cfg));
        self.threads.insert(key.to_owned(), t);
        self.resident.touch(key);
        self.trim(key);
        crate::telemetry::threads_open(self.threads.len());
        true
    }

    /// A thread the host did not have: in memory, and counted (for `user`, when it has one).
    pub(super) fn insert_thread(&mut self, key: &str, t: Thread, user: Option<&str>) {
        self.threads.insert(key.to_owned(), t);
        self.resident.touch(key);
        self.thread_count += 1;
        if let Some(u) = user {
            *self.user_threads.entry(u.to_owned()).or_default() += 1;
        }
        self.trim(key);
        crate::telemetry::threads_open(self.threads.len());
    }

    /// Whether `user` may not make one more thread: the host has
    /// [`max_threads`](super::HostConfig::max_threads), or the user
    /// [`max_threads_per_user`](super::HostConfig::max_threads_per_user).
    pub(super) fn at_thread_limit(&self, user: Option<&str>) -> bool {
        self.thread_count >= self.cfg.max_threads
            || user.is_some_and(|u| {
                self.user_threads.get(u).copied().unwrap_or(0) >= self.cfg.max_threads_per_user
            })
    }

    /// Drops idle threads from memory, least recently used first (never `keep`, the thread
    /// in use), while more than
    /// [`max_resident_threads`](super::HostConfig::max_resident_threads) are idle or all
    /// hold more than [`max_resident_bytes`](super::HostConfig::max_resident_bytes). They
    /// are read back from the log when next used.
    pub(super) fn trim(&mut self, keep: &str) {
        loop {
            let idle = self.threads.values().filter(|t| !t.is_busy()).count();
            let bytes: usize = self.threads.values().map(Thread::bytes).sum();
            if idle <= self.cfg.max_resident_threads && bytes <= self.cfg.max_resident_bytes {
                return;
            }
            let victim = self
                .resident
                .iter()
                .find(|k| *k != keep && self.threads.get(*k).is_some_and(|t| !t.is_busy()))
                .map(str::to_owned);
            let Some(victim) = victim else { return };
            self.resident.remove(&victim);
            self.threads.remove(&victim);
        }
    }
}

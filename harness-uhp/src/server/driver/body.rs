//! What a request gets back: a whole body, an event stream pulled from the machine as the
//! agent works, or (for a non-streaming task) a wait for the task's end (streaming.md §1, §6).

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use futures::{Future, Stream};

use super::Shared;
use crate::server::{StreamId, StreamPoll, WaitId};

/// A response body.
#[derive(Debug)]
pub enum Body {
    /// The whole body.
    Full(Vec<u8>),
    /// An event stream: each item is sent as it comes.
    Stream(EventStream),
}

/// An event stream's body: each chunk as the machine queues it. Dropping it (the client
/// went away) closes the stream; the task goes on.
pub struct EventStream {
    shared: Arc<Shared>,
    id: StreamId,
    done: bool,
}

impl EventStream {
    pub(super) fn new(shared: Arc<Shared>, id: StreamId) -> Self {
        EventStream {
            shared,
            id,
            done: false,
        }
    }
}

impl std::fmt::Debug for EventStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventStream").field("id", &self.id).finish()
    }
}

impl Stream for EventStream {
    type Item = Vec<u8>;
    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Vec<u8>>> {
        if self.done {
            return Poll::Ready(None);
        }
        let id = self.id;
        let mut st = self.shared.lock();
        match st.server.poll_stream(id) {
            StreamPoll::Data(b) => Poll::Ready(Some(b)),
            StreamPoll::End => {
                drop(st);
                self.done = true;
                Poll::Ready(None)
            }
            StreamPoll::Pending => {
                st.stream_wakers.insert(id, cx.waker().clone());
                Poll::Pending
            }
        }
    }
}

impl Drop for EventStream {
    fn drop(&mut self) {
        let mut st = self.shared.lock();
        st.stream_wakers.remove(&self.id);
        if !self.done {
            st.server.close_stream(self.id);
        }
    }
}

/// A request waiting for its task.
pub(super) struct WaitFor {
    shared: Arc<Shared>,
    id: WaitId,
    done: bool,
}

impl WaitFor {
    pub(super) fn new(shared: Arc<Shared>, id: WaitId) -> Self {
        WaitFor {
            shared,
            id,
            done: false,
        }
    }
}

impl Future for WaitFor {
    type Output = http::Response<Vec<u8>>;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let id = self.id;
        let mut st = self.shared.lock();
        match st.server.poll_wait(id) {
            Some(r) => {
                drop(st);
                self.done = true;
                Poll::Ready(r)
            }
            None => {
                st.wait_wakers.insert(id, cx.waker().clone());
                Poll::Pending
            }
        }
    }
}

impl Drop for WaitFor {
    fn drop(&mut self) {
        let mut st = self.shared.lock();
        st.wait_wakers.remove(&self.id);
        if !self.done {
            st.server.drop_wait(self.id);
        }
    }
}

//! # The run loop: the contract every harness-rs state machine follows
//!
//! Every protocol object in harness-rs is *sans-IO* (after quinn-proto, str0m and rustls): it
//! never opens a socket, spawns a task, sleeps or reads a clock. You own the I/O and the
//! time; the object owns the rules. This page is the contract between the two, written once.
//! Each machine's own docs link here and list only what is particular to it.
//!
//! | machine | crate | its inputs | its outputs |
//! | --- | --- | --- | --- |
//! | [`SseDecoder`](crate::sse::SseDecoder), [`NdjsonDecoder`](crate::ndjson::NdjsonDecoder) | harness-core | `push(bytes)`, `finish()` | `poll_event()` / `poll_line()` |
//! | `HarnessCall` (harness side), `Simulator` (jambonz side) | harness-jambonz | `handle_frame(now, …)`, the app's actions, `handle_timeout(now)` | `poll_event`, `poll_transmit`, `poll_timeout` |
//! | `Host`, `Client` | harness-tanstack | `open_sse`, `control`, `handle_frame`, `emit`, `handle_timeout(now)`, … | `poll_event`, `poll_transmit`, `poll_timeout` |
//! | `StreamDecoder`, `TaskAccumulator`, `TaskClient` | harness-uhp | `push`, `handle_head(now, …)`, `handle_data(now, …)`, `handle_timeout(now)` | `poll_event`, `poll_transmit`, `poll_timeout` |
//!
//! ## The rules
//!
//! 1. **Inputs never do I/O and never block.** Bytes come in through `push` (a codec) or a
//!    `handle_*(now, …)` method (a machine). `push` never fails and never parses; parsing
//!    happens when you poll, so a caller that stops polling applies back-pressure for free.
//! 2. **Drain after every input.** After any call that can change state, call
//!    `poll_event()` until it returns `None`, then `poll_transmit()` until it returns `None`
//!    (send each frame, in order), then read `poll_timeout()`. Outputs are queued in the
//!    order the rules produced them; draining late loses nothing, but what you leave in a
//!    machine's queues is memory it holds for you, and a frame polled late is a frame sent
//!    late. (str0m's "single mutation, then drain" rule.)
//! 3. **Time comes in as a parameter, and only moves forward.** Every method that needs the
//!    time takes `now: Instant` (monotonic). Pass the current time each call; never pass a
//!    `now` earlier than one you passed before (an earlier `now` is a caller bug: no machine
//!    panics on it, but a timer may fire late). Wall-clock timestamps written into records
//!    (a journal's `created_at`) are a different thing and come from a wall clock the host
//!    passes in, never from `Instant`.
//! 4. **Timers are pulled, not pushed.** `poll_timeout()` says when the machine next needs
//!    to run (`None`: no timer). Arm one timer for that instant; when it fires, call
//!    `handle_timeout(now)` and drain again (rule 2). Calling `handle_timeout` early is
//!    harmless: nothing that is not due fires.
//! 5. **Bad input is an error, never a panic.** Decoders return `Result`; a malformed frame
//!    is refused with a typed error (or answered on the wire as the protocol says), and the
//!    machine stays usable unless its error says the connection is closed. Every buffer has a
//!    configurable bound; past it you get an error, not an allocation.
//! 6. **End of input is said explicitly.** When the transport ends, call the machine's
//!    `finish`/`handle_end`/`handle_close` so it can report what was cut off (an event
//!    with no terminating blank line, a task with no terminal event). An object dropped
//!    without it reports nothing.
//! 7. **Outputs are owned.** Events and frames handed out by `poll_*` are owned values (or
//!    cheap `Bytes`); keep or send them as you like. Where a hot path offers a borrowed view,
//!    it borrows from the machine only until your next call on it.
//!
//! ## The loop, in code
//!
//! A codec, fed a stream in whatever chunks the transport hands over:
//!
//! ```
//! use harness_core::sse::SseDecoder;
//!
//! let chunks: [&[u8]; 3] = [b"data: hel", b"lo\n\nda", b"ta: world\n\n"];
//! let mut dec = SseDecoder::new();
//! let mut seen = Vec::new();
//! for chunk in chunks {
//!     dec.push(chunk); // rule 1: never fails, never parses
//!     while let Some(ev) = dec.poll_event()? {
//!         // rule 2: drain after every input
//!         seen.push(ev.data().to_owned());
//!     }
//! }
//! dec.finish()?; // rule 6: say the stream ended
//! assert_eq!(seen, ["hello", "world"]);
//! # Ok::<(), harness_core::sse::SseError>(())
//! ```
//!
//! A state machine, driven by any runtime (here written against a made-up machine `sm`
//! and a transport `io`; every machine in the table above has this shape):
//!
//! ```text
//! loop {
//!     // 1. Feed what happened, with the time it happened.
//!     match io.next(sm.poll_timeout()).await {
//!         Io::Frame(bytes) => sm.handle_frame(now(), &bytes)?,
//!         Io::Timer        => sm.handle_timeout(now()),
//!         Io::Closed       => { sm.handle_close(now()); }
//!     }
//!     // 2. Drain: events to the app, frames to the wire, in order.
//!     while let Some(ev) = sm.poll_event() { app.on_event(ev); }
//!     while let Some(frame) = sm.poll_transmit() { io.send(frame).await?; }
//!     // 3. The next deadline is read at the top of the loop (poll_timeout).
//! }
//! ```
//!
//! The drivers in each protocol crate (`serve`, `run_turns`, the examples' servers) are
//! exactly this loop around an async [`Harness`](crate::Harness); tests are another driver,
//! with a virtual clock instead of a real one.

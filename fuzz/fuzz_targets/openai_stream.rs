//! Arbitrary bytes as a streamed Chat Completions body never panic the OpenAI-compatible
//! stream decoder, and pushing them in pieces of any size (the first byte picks it) gives the
//! same events, the same error and the same finish reason as one push.
#![no_main]

use harness_core::openai::{ChatStreamConfig, ChatStreamDecoder};
use harness_core::sse::SseConfig;
use libfuzzer_sys::fuzz_target;

/// Small limits, so that the fuzzer reaches them.
const LIMITS: ChatStreamConfig = ChatStreamConfig {
    sse: SseConfig { max_line_bytes: 4096, max_event_bytes: 8192 },
    max_response_bytes: 16 << 10,
    max_tool_calls: 8,
};

/// Everything the decoder says, as text: each event or error, then the end.
fn transcript(body: &[u8], piece: usize) -> Vec<String> {
    let mut dec = ChatStreamDecoder::with_config(LIMITS);
    let mut said = Vec::new();
    for bytes in body.chunks(piece) {
        dec.push(bytes);
        while let Some(step) = dec.poll_event().transpose() {
            let failed = step.is_err();
            said.push(format!("{step:?}"));
            if failed {
                break;
            }
        }
    }
    said.push(format!("end {:?} done={}", dec.finish(), dec.is_done()));
    said.extend(std::iter::from_fn(|| dec.poll_event().ok().flatten()).map(|ev| format!("{ev:?}")));
    said.push(format!("{:?} {:?}", dec.finish_reason(), dec.response_id()));
    said
}

fuzz_target!(|data: &[u8]| {
    let Some((&size, body)) = data.split_first() else { return };
    let piece = usize::from(size % 64) + 1;
    assert_eq!(transcript(body, body.len().max(1)), transcript(body, piece));
});

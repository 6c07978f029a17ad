//! Chapter: harness-core. Decode a captured SSE stream the way a real client receives it
//! (odd chunk sizes, CRLF line ends, a BOM), then unit-test the tour's FAQ agent
//! (`harness_core::agent::faq`, served unchanged in every chapter) with no protocol at all.

use harness_core::Start;
use harness_core::agent::faq::{FaqAgent, Refunds, faq_model, faq_tools};
use harness_core::message::Message;
use harness_core::sse::SseDecoder;
use harness_core::testing::{RecordingSink, SinkCall};

const CAPTURE: &[u8] = include_bytes!("data/uhp_simple_text.sse");

pub fn run() -> Result<(), Box<dyn std::error::Error>> {
    // A server that writes CRLF and a BOM, read in 7-byte chunks: the events do not change.
    let mut wire = b"\xEF\xBB\xBF".to_vec();
    for line in CAPTURE.split(|&b| b == b'\n') {
        wire.extend_from_slice(line);
        wire.extend_from_slice(b"\r\n");
    }
    wire.truncate(wire.len() - 2);

    let mut dec = SseDecoder::new();
    let mut n = 0;
    for chunk in wire.chunks(7) {
        dec.push(chunk);
        while let Some(ev) = dec.poll_event()? {
            let v: serde_json::Value = serde_json::from_str(ev.data())?;
            n += 1;
            let detail = v["delta"]
                .as_str()
                .map(|d| format!(" delta={d:?}"))
                .unwrap_or_default();
            println!(
                "  event {:>2}: {:<32} seq={}{}",
                n,
                v["type"].as_str().unwrap_or("?"),
                v["sequence_number"],
                detail
            );
        }
    }
    dec.finish()?;
    println!(
        "  {n} events from {} bytes in 7-byte pushes (CRLF, BOM)",
        wire.len()
    );

    // One agent, no protocol: the RecordingSink plays the host (with every feature, as the
    // strictest host's rules). The model is scripted unless `--model openai:MODEL` names a
    // real one.
    let model = crate::model_arg::from_spec(crate::model_spec(), faq_model)?;
    let refunds = Refunds::default();
    let mut sink = RecordingSink::new(model).with_tools(faq_tools(&refunds));
    let agent = FaqAgent::new();
    futures::executor::block_on(async {
        // "What are your hours?": the agent asks which day, and goes on with the answer.
        let hours = Start::with_inputs(vec![Message::user("What are your hours?")]);
        if sink.drive(&agent, hours.clone()).await.is_err() {
            for q in sink.pending_questions().to_vec() {
                println!("  the agent asks: {:?} -> Saturday", q.message);
                sink.answer(&q.id, "Saturday");
            }
            sink.drive(&agent, hours).await?;
        }
        // "Please refund order 42": gated; parked until approved, then run once.
        let refund = Start::with_inputs(vec![Message::user("Please refund order 42")]);
        if sink.drive(&agent, refund.clone()).await.is_err() {
            for call in sink.pending_approvals().to_vec() {
                println!("  parked at {} ({}): approved", call.tool, call.id);
                sink.approve(&call.id);
            }
            sink.drive(&agent, refund).await?;
        }
        Ok::<(), harness_core::HarnessError>(())
    })?;
    println!("  the refund ran {} time(s)", refunds.count());
    println!("\n  the agent, unit-tested with RecordingSink:");
    for call in sink.calls() {
        match call {
            SinkCall::Model {
                response: Ok(r),
                deltas,
                ..
            } => {
                println!(
                    "    model -> {:?} ({} deltas)",
                    r.message.text(),
                    deltas.len()
                )
            }
            SinkCall::ToolCall { call, result } => println!(
                "    tool_call {} key={} -> {}",
                call.tool,
                call.idempotency_key,
                serde_json::to_string(&result.output)?
            ),
            other => println!("    {other:?}"),
        }
    }
    Ok(())
}

//! Chapter: harness-core. Decode a captured SSE stream the way a real client receives it
//! (odd chunk sizes, CRLF line ends, a BOM), then unit-test an agent with no protocol at all.

use harness_core::agent::ToolLoopAgent;
use harness_core::message::Message;
use harness_core::model::ScriptedModel;
use harness_core::sse::SseDecoder;
use harness_core::testing::{RecordingSink, SinkCall};
use harness_core::{Harness, Start, Tool, Tools};

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

    // One agent, no protocol: the RecordingSink plays the host. The model is scripted unless
    // `--model openai:MODEL` names a real one.
    let model = crate::model_arg::from_spec(crate::model_spec(), || {
        ScriptedModel::new()
            .tool_call("get_hours", serde_json::json!({}))
            .reply("We're open eight to six on weekdays.")
    })?;
    let tools = Tools::new().with(Tool::json("get_hours", "Opening hours", |_| {
        Ok(serde_json::json!({"weekdays": "8am to 6pm"}))
    }));
    let agent = ToolLoopAgent::new("faq").with_tools(&tools); // offers what the host runs
    let mut sink = RecordingSink::new(model).with_tools(tools);
    let start = Start::with_inputs(vec![Message::user("When are you open?")]);
    futures::executor::block_on(agent.run(start, &mut sink))?;
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

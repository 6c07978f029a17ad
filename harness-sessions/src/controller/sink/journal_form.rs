//! Values in their journal form (canonical JSON numbers), handed over live as replay serves them.

use harness_core::message::{Part, ToolResult};

/// What the journal will serve on replay of a value the host hands the harness live. The
/// journal holds events in canonical (RFC 8785) form: a number there is written as its
/// float64 value prints (`2.0` as `2`, `-0.0` as `0`, `1e21` as `1e+21`) and read back as
/// that. A completion or tool result is handed over in that form, so a harness that builds
/// its next request or its output from it does the same live and on replay from a file (the
/// I0 hash writes `-0` and `0` differently, as Go does; serde_json prints `2.0` and `2`).
fn journal_form_value(v: &mut serde_json::Value) {
    match v {
        serde_json::Value::Number(n) => {
            if let Some(x) = crate::jcs::to_string(&*n)
                .ok()
                .and_then(|s| serde_json::from_str::<serde_json::Number>(&s).ok())
            {
                *n = x;
            }
        }
        serde_json::Value::Array(a) => a.iter_mut().for_each(journal_form_value),
        serde_json::Value::Object(m) => m.values_mut().for_each(journal_form_value),
        _ => {}
    }
}

pub(super) fn journal_form_parts(parts: &mut [Part]) {
    for p in parts {
        match p {
            Part::Data(d) => d.data.values_mut().for_each(journal_form_value),
            Part::ToolCall(c) => c.args.values_mut().for_each(journal_form_value),
            Part::ToolResult(r) => journal_form_result(r),
            Part::Reasoning(r) => journal_form_parts(&mut r.summary),
            _ => {}
        }
    }
}

pub(super) fn journal_form_result(r: &mut ToolResult) {
    if let Some(out) = &mut r.output {
        out.values_mut().for_each(journal_form_value);
    }
    journal_form_parts(&mut r.content);
}

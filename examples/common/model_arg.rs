//! `--model SPEC` for the examples, in one place: an example adopts it with
//! `let model = model_arg::from_args(&mut args, || ScriptedModel::echo())?;`.
//!
//! - `scripted` (the default): the example's own `ScriptedModel`: no key, no network.
//! - `openai:MODEL`: any OpenAI-compatible server, configured from `OPENAI_API_KEY` and
//!   `OPENAI_BASE_URL` (see the README's "A real model"), e.g. `openai:gpt-4.1-mini`, or
//!   `openai:llama3.2` with `OPENAI_BASE_URL=http://localhost:11434/v1` (Ollama).

use std::sync::Arc;

use harness_core::model::{Model, ScriptedModel};
use harness_core::openai::OpenAiModel;

/// Takes `--model SPEC` (or `--model=SPEC`) out of `args`; `None` when it is not there.
pub fn take_spec(args: &mut Vec<String>) -> Result<Option<String>, String> {
    let Some(i) = args
        .iter()
        .position(|a| a == "--model" || a.starts_with("--model="))
    else {
        return Ok(None);
    };
    let flag = args.remove(i);
    match flag.strip_prefix("--model=") {
        Some(spec) => Ok(Some(spec.to_owned())),
        None if i < args.len() => Ok(Some(args.remove(i))),
        None => Err("--model needs a value: scripted or openai:MODEL".into()),
    }
}

/// The model a spec names: `scripted` (or no spec) is `scripted()`, `openai:MODEL` an
/// [`OpenAiModel`] from the environment.
pub fn from_spec(
    spec: Option<&str>,
    scripted: impl FnOnce() -> ScriptedModel,
) -> Result<Arc<dyn Model>, String> {
    match spec.map(str::trim) {
        None | Some("scripted") => Ok(Arc::new(scripted())),
        Some(spec) => OpenAiModel::from_spec(spec)
            .map(|m| Arc::new(m) as Arc<dyn Model>)
            .map_err(|e| format!("--model {spec}: {e}")),
    }
}

/// [`take_spec`] then [`from_spec`].
#[allow(dead_code)] // not every example that includes this file takes both steps
pub fn from_args(
    args: &mut Vec<String>,
    scripted: impl FnOnce() -> ScriptedModel,
) -> Result<Arc<dyn Model>, String> {
    let spec = take_spec(args)?;
    from_spec(spec.as_deref(), scripted)
}

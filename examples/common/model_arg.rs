//! `--model SPEC` for the examples, in one place: an example adopts it with
//! `let model = model_arg::from_args(&mut args, || ScriptedModel::echo())?;`, or, when its
//! own parser reads the command line (and skips [`is_model_flag`] and its value), with
//! `model_arg::from_command_line(|| Arc::new(its_scripted_model()))`.
//!
//! - `scripted` (the default): the example's own `ScriptedModel`: no key, no network.
//! - `openai:MODEL`: any OpenAI-compatible server, configured from `OPENAI_API_KEY` and
//!   `OPENAI_BASE_URL` (see the README's "A real model"), e.g. `openai:gpt-4.1-mini`, or
//!   `openai:llama3.2` with `OPENAI_BASE_URL=http://localhost:11434/v1` (Ollama).

#![allow(dead_code)] // each example that includes this file takes what it needs

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
    from_spec_or(spec, || Arc::new(scripted()))
}

/// The model a spec names: `scripted` (or no spec) is the example's own built-in model
/// (`builtin()`, which need not be a bare `ScriptedModel`), `openai:MODEL` an
/// [`OpenAiModel`] from the environment.
pub fn from_spec_or(
    spec: Option<&str>,
    builtin: impl FnOnce() -> Arc<dyn Model>,
) -> Result<Arc<dyn Model>, String> {
    match spec.map(str::trim) {
        None | Some("scripted") => Ok(builtin()),
        Some(spec) => OpenAiModel::from_spec(spec)
            .map(|m| Arc::new(m) as Arc<dyn Model>)
            .map_err(|e| format!("--model {spec}: {e}")),
    }
}

/// The model `--model` names on the command line (the built-in one without it). The
/// example's own parser skips the flag ([`is_model_flag`]) and the value after a bare
/// `--model`.
pub fn from_command_line(
    builtin: impl FnOnce() -> Arc<dyn Model>,
) -> Result<Arc<dyn Model>, String> {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let spec = take_spec(&mut args)?;
    from_spec_or(spec.as_deref(), builtin)
}

/// Whether `arg` is `--model` or `--model=SPEC`.
pub fn is_model_flag(arg: &str) -> bool {
    arg == "--model" || arg.starts_with("--model=")
}

/// What `--help` says about `--model`.
pub const HELP: &str = "--model scripted|openai:MODEL: the model (default scripted: the \
example's built-in model, no key, no network; openai:MODEL: an OpenAI-compatible server, \
OPENAI_API_KEY and OPENAI_BASE_URL)";

/// [`take_spec`] then [`from_spec`].
pub fn from_args(
    args: &mut Vec<String>,
    scripted: impl FnOnce() -> ScriptedModel,
) -> Result<Arc<dyn Model>, String> {
    let spec = take_spec(args)?;
    from_spec(spec.as_deref(), scripted)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn args(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| (*s).to_owned()).collect()
    }

    /// Issue 18: "The examples and the tour take `--model openai:MODEL`; the default stays
    /// the scripted model, with no key and no network."
    #[test]
    fn the_flag_is_taken_out_in_both_forms_and_the_rest_is_left() {
        let mut a = args(&["--addr", "x", "--model", "openai:m", "--memory"]);
        assert_eq!(take_spec(&mut a).unwrap().as_deref(), Some("openai:m"));
        assert_eq!(a, args(&["--addr", "x", "--memory"]));
        let mut a = args(&["--model=scripted"]);
        assert_eq!(take_spec(&mut a).unwrap().as_deref(), Some("scripted"));
        assert!(a.is_empty());
        let mut a = args(&["--memory"]);
        assert_eq!(take_spec(&mut a).unwrap(), None);
        assert!(take_spec(&mut args(&["--model"])).is_err());
        assert!(is_model_flag("--model") && is_model_flag("--model=openai:m"));
        assert!(!is_model_flag("--models"));
    }

    #[test]
    fn no_spec_or_scripted_is_the_builtin_model_and_anything_else_is_refused() {
        for spec in [None, Some("scripted"), Some(" scripted ")] {
            let mut called = false;
            let m = from_spec_or(spec, || {
                called = true;
                Arc::new(ScriptedModel::echo())
            });
            assert!(m.is_ok() && called, "{spec:?}");
        }
        for spec in ["gpt-4", "anthropic:claude", "openai:"] {
            let e = from_spec(Some(spec), ScriptedModel::echo).err().unwrap();
            assert!(e.starts_with(&format!("--model {spec}")), "{e}");
        }
    }
}

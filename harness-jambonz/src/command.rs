//! Commands: `{type: "command", command_id, name, args}`; each gets a `command:result`.

use serde_json::{Map, Value};

use harness_core::wire_struct;

wire_struct! {
    /// `command`: `{command_id, name, args}`. See [`JambonzCommand`] for the typed view.
    pub struct CommandMessage [as_given] [skip "type"] {
        /// The command, chosen by the harness, unique within the call.
        val command_id: String = "command_id",
        /// Its name: `hangup`, `play`, `listen`, …
        val name: String = "name",
        /// Its arguments.
        val args: Map<String, Value> = "args",
    }
}

/// What a command asks for. The spec details `hangup {reason}`; `play` and `listen` "are not
/// supported yet: they get command:result with ok: false"; any other name is kept as given.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum JambonzCommand {
    /// `hangup {reason}`: end the call (`session:end` reason `harness_hangup` follows).
    Hangup {
        /// Why, e.g. `resolved`.
        reason: Option<String>,
    },
    /// `play`: not supported yet by jambonz.
    Play(Map<String, Value>),
    /// `listen` (with hints): not supported yet by jambonz.
    Listen(Map<String, Value>),
    /// Any other command, kept as given.
    Other {
        /// Its name.
        name: String,
        /// Its arguments.
        args: Map<String, Value>,
    },
}

impl JambonzCommand {
    /// The wire name.
    pub fn name(&self) -> &str {
        match self {
            JambonzCommand::Hangup { .. } => "hangup",
            JambonzCommand::Play(_) => "play",
            JambonzCommand::Listen(_) => "listen",
            JambonzCommand::Other { name, .. } => name,
        }
    }

    /// As a message with this id.
    pub fn into_message(self, command_id: impl Into<String>) -> CommandMessage {
        let name = self.name().to_owned();
        let args = match self {
            JambonzCommand::Hangup { reason } => {
                let mut m = Map::new();
                if let Some(r) = reason {
                    m.insert("reason".into(), Value::String(r));
                }
                m
            }
            JambonzCommand::Play(a)
            | JambonzCommand::Listen(a)
            | JambonzCommand::Other { args: a, .. } => a,
        };
        CommandMessage {
            command_id: command_id.into(),
            name,
            args,
            ..Default::default()
        }
    }
}

impl CommandMessage {
    /// The typed view.
    pub fn command(&self) -> JambonzCommand {
        match self.name.as_str() {
            "hangup" => JambonzCommand::Hangup {
                reason: self
                    .args
                    .get("reason")
                    .and_then(Value::as_str)
                    .map(str::to_owned),
            },
            "play" => JambonzCommand::Play(self.args.clone()),
            "listen" => JambonzCommand::Listen(self.args.clone()),
            other => JambonzCommand::Other {
                name: other.to_owned(),
                args: self.args.clone(),
            },
        }
    }
}

wire_struct! {
    /// `command:result`: `{command_id, ok}`.
    pub struct CommandResultMessage [as_given] [skip "type"] {
        /// The call's id.
        lenient call_sid: Option<String> = "call_sid",
        /// The command this answers.
        lenient command_id: String = "command_id",
        /// Whether it was carried out.
        lenient ok: bool = "ok",
    }
}

impl From<harness_core::interaction::Command> for JambonzCommand {
    /// A command an agent sent with `sink.command`, typed by its name.
    fn from(c: harness_core::interaction::Command) -> Self {
        CommandMessage {
            name: c.name,
            args: c.args,
            ..Default::default()
        }
        .command()
    }
}

impl CommandResultMessage {
    /// The error text, when the result carries one. The spec shows only `{command_id, ok}`;
    /// an `error` field is read when jambonz sends one (a string as given, any other value
    /// as its JSON).
    pub fn error_text(&self) -> Option<String> {
        match self.extra.get("error") {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => Some(s.clone()),
            Some(other) => Some(other.to_string()),
        }
    }

    /// As a [`harness_core`] command result: `ok`, the error text, and every other field
    /// jambonz sent kept in `data` (all but `call_sid`, `command_id` and `error`).
    pub fn to_command_result(&self) -> harness_core::interaction::CommandResult {
        let mut data = self.extra.clone();
        data.remove("error");
        harness_core::interaction::CommandResult {
            ok: self.ok,
            error: self.error_text(),
            data,
        }
    }
}

//! The hosts of the every-host test, each serving the FAQ agent through its own API and
//! reporting each turn the same way ([`Turn`]).

use super::*;

// ---------------------------------------------------------------------------------------
// RecordingSink

/// `RecordingSink` with every feature: approvals and questions park the turn, and
/// `approve`/`deny`/`answer` drive it on.
pub(crate) struct RecordingHost {
    pub(crate) sink: RecordingSink,
    pub(crate) refunds: Refunds,
    pub(crate) start: Start,
    pub(crate) seen: usize,
    pub(crate) turns: usize,
}

impl RecordingHost {
    fn with(sink: impl FnOnce(RecordingSink) -> RecordingSink) -> Self {
        let refunds = Refunds::default();
        let sink = sink(RecordingSink::new(faq_model()).with_tools(faq_tools(&refunds)));
        RecordingHost {
            sink,
            refunds,
            start: Start::default(),
            seen: 0,
            turns: 0,
        }
    }

    fn drive(&mut self) -> Turn {
        let _ = futures::executor::block_on(self.sink.drive(&FaqAgent::new(), self.start.clone()));
        let mut t = Turn::default();
        for c in &self.sink.calls()[self.seen..] {
            match c {
                SinkCall::Model {
                    response: Ok(r), ..
                } => t.said.push_str(&r.message.text()),
                SinkCall::Output(d) => t.said.push_str(d),
                SinkCall::Handoff(_) => t.handed_off = true,
                SinkCall::Command { command, .. } => t.hung_up |= command.name == "hangup",
                SinkCall::ToolCall { call, result } if call.tool == "refund" => {
                    let carried = match &result.output {
                        Some(o) => serde_json::to_string(o).unwrap(),
                        None => result.error.clone(),
                    };
                    t.refund_results.push((result.is_error, carried));
                }
                _ => {}
            }
        }
        self.seen = self.sink.calls().len();
        if !self.sink.pending_approvals().is_empty() {
            t.waiting = Some(Waiting::Approval);
        } else if let Some(q) = self.sink.pending_questions().first() {
            t.waiting = Some(Waiting::Question(q.message.clone()));
        }
        t
    }
}

impl FaqHost for RecordingHost {
    const OFFERS: &'static [Feature] = &Feature::ALL;
    fn new(_: ApprovalPolicy) -> Self {
        RecordingHost::with(|s| s)
    }
    fn prompt(&mut self, text: &str) -> Turn {
        self.turns += 1;
        self.start = Start {
            execution_id: format!("x{}", self.turns),
            session_uid: "s".into(),
            inputs: vec![Message::user(text)],
            ..Start::default()
        };
        self.drive()
    }
    fn decide(&mut self, approved: bool) -> Turn {
        for call in self.sink.pending_approvals().to_vec() {
            if approved {
                self.sink.approve(&call.id);
            } else {
                self.sink.deny(&call.id, "the user denied it");
            }
        }
        self.drive()
    }
    fn answer(&mut self, value: &str) -> Turn {
        for q in self.sink.pending_questions().to_vec() {
            self.sink.answer(&q.id, value);
        }
        self.drive()
    }
    fn refunds(&self) -> &Refunds {
        &self.refunds
    }
}

/// `RecordingSink` as a phone call is: platform commands, no one to ask (a policy decides
/// gated calls, no questions, no hand-off).
pub(crate) struct RecordingPhone(pub(crate) RecordingHost);

impl FaqHost for RecordingPhone {
    const OFFERS: &'static [Feature] = &[Feature::Commands];
    fn new(policy: ApprovalPolicy) -> Self {
        RecordingPhone(RecordingHost::with(|s| {
            Feature::ALL
                .into_iter()
                .filter(|f| !Self::OFFERS.contains(f))
                .fold(s, RecordingSink::without)
                .with_approval_policy(policy)
        }))
    }
    fn prompt(&mut self, text: &str) -> Turn {
        self.0.prompt(text)
    }
    fn decide(&mut self, _: bool) -> Turn {
        unreachable!("no one to ask")
    }
    fn answer(&mut self, _: &str) -> Turn {
        unreachable!("no questions")
    }
    fn refunds(&self) -> &Refunds {
        &self.0.refunds
    }
}

// ---------------------------------------------------------------------------------------
// jambonz

/// A phone call per prompt: the jambonz simulator calls the driver serving the agent; the
/// platform runs `get_hours` (`tool:call`), the harness its own `refund`, gated and decided by
/// the driver's policy (jambonz has no approval message).
pub(crate) struct JambonzHost {
    pub(crate) policy: ApprovalPolicy,
    pub(crate) refunds: Refunds,
}

impl FaqHost for JambonzHost {
    const OFFERS: &'static [Feature] = &[Feature::Commands];
    fn new(policy: ApprovalPolicy) -> Self {
        JambonzHost {
            policy,
            refunds: Refunds::default(),
        }
    }
    fn prompt(&mut self, text: &str) -> Turn {
        use harness_jambonz::driver::ServeConfig;
        use harness_jambonz::simulator::{Script, SimConfig, Simulator};
        use harness_jambonz::testing::{Direction, simulate_call};

        let split = |own: bool| -> Tools {
            faq_tools(&self.refunds)
                .iter()
                .filter(|t| (t.name() == "get_hours") != own)
                .cloned()
                .collect()
        };
        let start = Instant::now();
        let sim = Simulator::new(start, SimConfig::default(), Script::new().say(text))
            .with_tools(split(false));
        let mut cfg = ServeConfig::default();
        cfg.approval_policy = self.policy.clone();
        let call = simulate_call(FaqAgent::new(), faq_model(), split(true), sim, start, cfg);
        assert!(
            call.transcript.violations.is_empty(),
            "{:?}",
            call.transcript.violations
        );
        let sent: Vec<Value> = call
            .texts(Direction::ToJambonz)
            .into_iter()
            .map(|t| serde_json::from_str(t).unwrap())
            .collect();
        let mut t = Turn {
            said: call.transcript.heard().concat(),
            ..Turn::default()
        };
        for f in &sent {
            if f["type"] == "command" && f["name"] == "hangup" {
                t.hung_up = true;
            }
            // The harness's own tools never reach jambonz; the turn record says how they went.
            for own in f["turn_record"]["own_tools"]
                .as_array()
                .into_iter()
                .flatten()
            {
                if own["name"] == "refund" {
                    let ok = own["ok"] == true;
                    t.refund_results.push((!ok, own.to_string()));
                }
            }
            assert!(
                !(f["type"] == "tool:call" && f["name"] == "refund"),
                "the harness's own tool was sent to jambonz"
            );
        }
        t
    }
    fn decide(&mut self, _: bool) -> Turn {
        unreachable!("jambonz has no approval message")
    }
    fn answer(&mut self, _: &str) -> Turn {
        unreachable!("jambonz has no questions")
    }
    fn refunds(&self) -> &Refunds {
        &self.refunds
    }
}

// ---------------------------------------------------------------------------------------
// TanStack

/// The TanStack host and driver in process, through `POST control` bodies and the thread's
/// event log (every event valid AG-UI 1.0, read strictly).
pub(crate) struct TanstackHost {
    pub(crate) svc: harness_tanstack::driver::Service<harness_tanstack::log::MemoryLog>,
    pub(crate) pool: LocalPool,
    pub(crate) refunds: Refunds,
    pub(crate) seen: usize,
    pub(crate) wait_id: Option<String>,
    pub(crate) question_id: Option<String>,
    /// The events of the last input.
    pub(crate) last: Vec<Value>,
}

impl TanstackHost {
    fn serving(
        svc: harness_tanstack::driver::Service<harness_tanstack::log::MemoryLog>,
        refunds: Refunds,
    ) -> Self {
        let pool = LocalPool::new();
        let tools = faq_tools(&refunds);
        pool.spawner()
            .spawn_local(harness_tanstack::driver::run_turns(
                svc.clone(),
                FaqAgent::new(),
                faq_model(),
                tools,
            ))
            .unwrap();
        TanstackHost {
            svc,
            pool,
            refunds,
            seen: 0,
            wait_id: None,
            question_id: None,
            last: Vec::new(),
        }
    }

    fn send(&mut self, input: Value) -> Turn {
        let r = driver_support::send(&self.svc, &mut self.pool, "faq", input);
        assert_eq!(r["status"], "accepted", "{r}");
        let all = tanstack_events(&self.svc, &mut self.pool);
        let new = &all[self.seen..];
        self.seen = all.len();
        self.last = new.to_vec();
        let of = |name: &'static str| {
            new.iter()
                .filter(move |e| e["name"] == name || e["type"] == name)
        };
        let refund_calls: Vec<&Value> = all
            .iter()
            .filter(|e| e["type"] == "TOOL_CALL_START" && e["toolCallName"] == "refund")
            .map(|e| &e["toolCallId"])
            .collect();
        let mut t = Turn {
            said: of("TEXT_MESSAGE_CONTENT")
                .map(|e| e["delta"].as_str().unwrap())
                .collect(),
            handed_off: of("harness.handoff").next().is_some(),
            ..Turn::default()
        };
        for r in of("TOOL_CALL_RESULT").filter(|r| refund_calls.contains(&&r["toolCallId"])) {
            let content = r["content"].as_str().unwrap_or_default().to_owned();
            t.refund_results.push((content.contains("error"), content));
        }
        if let Some(w) = of("harness.wait.opened").find(|w| w["value"]["kind"] == "approval") {
            t.waiting = Some(Waiting::Approval);
            self.wait_id = w["value"]["waitId"].as_str().map(str::to_owned);
        }
        if let Some(q) = of("harness.question").next() {
            t.waiting = Some(Waiting::Question(
                q["value"]["message"].as_str().unwrap().to_owned(),
            ));
            self.question_id = q["value"]["questionId"].as_str().map(str::to_owned);
        }
        t
    }
}

/// The `faq` thread's events, each checked to be AG-UI 1.0.
pub(crate) fn tanstack_events<L: harness_tanstack::log::EventLog + 'static>(
    svc: &harness_tanstack::driver::Service<L>,
    pool: &mut LocalPool,
) -> Vec<Value> {
    driver_support::read_thread(pool, svc, "faq")
        .into_iter()
        .filter(|f| f["type"] == "harness.event")
        .map(|f| {
            harness_tanstack::agui::AguiEvent::from_json_strict(&f["event"].to_string())
                .unwrap_or_else(|e| panic!("not AG-UI: {} ({e})", f["event"]));
            f["event"].clone()
        })
        .collect()
}

pub(crate) fn resolve(wait_id: &str, approved: bool) -> Value {
    json!({"op": "resolve", "resume": [{"interruptId": wait_id, "status": "resolved",
        "payload": {"approved": approved}}]})
}

impl FaqHost for TanstackHost {
    const OFFERS: &'static [Feature] = &[
        Feature::Approvals,
        Feature::Questions,
        Feature::Handoff,
        Feature::Reasoning,
        Feature::State,
        Feature::Steps,
    ];
    fn new(_: ApprovalPolicy) -> Self {
        TanstackHost::serving(driver_support::service().0, Refunds::default())
    }
    fn prompt(&mut self, text: &str) -> Turn {
        self.send(json!({"op": "prompt", "message": text}))
    }
    fn decide(&mut self, approved: bool) -> Turn {
        let id = self.wait_id.take().expect("no approval wait");
        self.send(resolve(&id, approved))
    }
    fn answer(&mut self, value: &str) -> Turn {
        let id = self.question_id.take().expect("no question");
        self.send(json!({"op": "answer", "questionId": id, "value": value}))
    }
    fn refunds(&self) -> &Refunds {
        &self.refunds
    }
}

// ---------------------------------------------------------------------------------------
// agentsessions

/// The agentsessions controller over a memory journal, with receipts: a gated call parks the
/// turn (APPROVAL_REQUEST) until `approve`, and `resume` drives it on.
pub(crate) struct SessionsHost {
    pub(crate) host: harness_sessions::Controller,
    pub(crate) refunds: Refunds,
    pub(crate) seen: usize,
}

pub(crate) fn sessions_controller(
    journal: Arc<dyn harness_sessions::journal::Journal>,
    refunds: &Refunds,
    receipts: &Arc<harness_sessions::tools::MemoryReceipts>,
) -> harness_sessions::Controller {
    harness_sessions::Controller::builder(journal)
        .model(faq_model())
        .tools(faq_tools(refunds))
        .receipts(Arc::clone(receipts))
        .harness("faq", FaqAgent::new())
        .build()
}

impl SessionsHost {
    fn turn(&mut self, output: String, parked: bool) -> Turn {
        let records = self.host.records("s").unwrap();
        let refund_ids: Vec<String> = records
            .iter()
            .filter_map(|r| match &r.event.body {
                EventBody::ToolCall(c) if c.tool == "refund" => Some(c.id.clone()),
                _ => None,
            })
            .collect();
        let mut t = Turn {
            said: output,
            waiting: parked.then_some(Waiting::Approval),
            ..Turn::default()
        };
        for r in &records[self.seen..] {
            if let EventBody::ToolResult(res) = &r.event.body {
                if refund_ids.contains(&res.id) {
                    let carried = match &res.output {
                        Some(o) => serde_json::to_string(o).unwrap(),
                        None => res.error.clone(),
                    };
                    t.refund_results.push((res.is_error, carried));
                }
            }
        }
        self.seen = records.len();
        t
    }
}

impl FaqHost for SessionsHost {
    const OFFERS: &'static [Feature] = &[Feature::Approvals, Feature::Reasoning];
    fn new(_: ApprovalPolicy) -> Self {
        let refunds = Refunds::default();
        let host = sessions_controller(
            Arc::new(harness_sessions::MemoryJournal::new()),
            &refunds,
            &Arc::default(),
        );
        host.create_session("s", Some("faq")).unwrap();
        SessionsHost {
            host,
            refunds,
            seen: 0,
        }
    }
    fn prompt(&mut self, text: &str) -> Turn {
        let req = harness_sessions::ExecRequest::text("s", text);
        let turn = futures::executor::block_on(self.host.exec(req)).unwrap();
        let parked = self.host.pending_approval("s").unwrap().is_some();
        self.turn(turn.output, parked)
    }
    fn decide(&mut self, approved: bool) -> Turn {
        let p = self
            .host
            .pending_approval("s")
            .unwrap()
            .expect("no approval pending");
        self.host
            .approve("s", &p.call.id, approved, "the user denied it")
            .unwrap();
        let turn = futures::executor::block_on(self.host.resume("s"))
            .unwrap()
            .unwrap();
        self.turn(turn.output, false)
    }
    fn answer(&mut self, _: &str) -> Turn {
        unreachable!("agentsessions has no questions")
    }
    fn refunds(&self) -> &Refunds {
        &self.refunds
    }
}

// ---------------------------------------------------------------------------------------
// UHP

/// The UHP server's driver in process: each prompt a `POST /v1/responses`; UHP cannot ask a
/// person, so the host's policy decides gated calls.
pub(crate) struct UhpHost {
    pub(crate) rt: tokio::runtime::Runtime,
    pub(crate) host: harness_uhp::server::driver::UhpService,
    pub(crate) refunds: Refunds,
}

impl FaqHost for UhpHost {
    const OFFERS: &'static [Feature] = &[Feature::Reasoning];
    fn new(policy: ApprovalPolicy) -> Self {
        use harness_uhp::server::driver::UhpService;
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let refunds = Refunds::default();
        let wall = || 1_700_000_000_000_i64;
        let host = rt
            .block_on(
                UhpService::builder(faq_model())
                    .harness("faq", "FAQ agent", FaqAgent::new())
                    .models(["scripted-faq"])
                    .tools(faq_tools(&refunds))
                    .approval_policy(policy)
                    .api_key("k", "alice")
                    .build(Instant::now, wall),
            )
            .unwrap();
        rt.spawn(host.run(tokio::time::sleep));
        UhpHost { rt, host, refunds }
    }
    fn prompt(&mut self, text: &str) -> Turn {
        use harness_uhp::server::driver::{Body, CallerAuth};
        let req = http::Request::post("/v1/responses")
            .header("authorization", "Bearer k")
            .header("content-type", "application/json")
            .body(json!({"input": text}).to_string().into_bytes())
            .unwrap();
        let resp = self.rt.block_on(self.host.handle(CallerAuth::Bearer, req));
        let Body::Full(body) = resp.into_body() else {
            panic!("a stream for a non-streaming request")
        };
        let v: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(v["status"], "completed", "{v}");
        let mut t = Turn::default();
        let items = v["output"].as_array().cloned().unwrap_or_default();
        let refund_ids: Vec<&Value> = items
            .iter()
            .filter(|i| i["type"] == "function_call" && i["name"] == "refund")
            .map(|i| &i["call_id"])
            .collect();
        for item in &items {
            match item["type"].as_str() {
                Some("message") => {
                    for c in item["content"].as_array().into_iter().flatten() {
                        t.said.push_str(c["text"].as_str().unwrap_or_default());
                    }
                }
                Some("function_call_output") if refund_ids.contains(&&item["call_id"]) => {
                    let out = item["output"].as_str().unwrap_or_default().to_owned();
                    t.refund_results.push((out.contains("\"error\""), out));
                }
                _ => {}
            }
        }
        t
    }
    fn decide(&mut self, _: bool) -> Turn {
        unreachable!("UHP has no approval channel")
    }
    fn answer(&mut self, _: &str) -> Turn {
        unreachable!("UHP has no questions")
    }
    fn refunds(&self) -> &Refunds {
        &self.refunds
    }
}

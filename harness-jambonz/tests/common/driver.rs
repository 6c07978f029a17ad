//! The setup of the driver's tests: a call served by the driver against the simulator
//! ([`Call`], [`call`]), the frames the harness sent ([`sent`]), tools that count their runs
//! ([`counted`]), and a driver fed raw frames by hand ([`Live`]).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Instant;

use futures::channel::mpsc;
use harness_core::model::{Model, ScriptedModel};
use harness_core::{Harness, Tool, Tools};
use harness_jambonz::driver::{CallReport, Incoming, ServeConfig, ServeError, serve};
use harness_jambonz::harness_side::Transmit;
use harness_jambonz::simulator::{Script, SimConfig, Simulator};
use harness_jambonz::testing::{Direction, SimulatedCall, simulate_call};
use serde_json::{Value, json};

/// The platform's tools: jambonz runs them (the simulator, here).
pub fn platform_tools() -> Tools {
    Tools::new().with(Tool::json("get_hours", "Opening hours", |_| {
        Ok(json!({"weekdays": "8am to 6pm"}))
    }))
}

/// A tool that answers `{"done": name}` and counts its runs.
pub fn counted(name: &str) -> (Tool, Arc<AtomicUsize>) {
    let runs = Arc::new(AtomicUsize::new(0));
    let counter = runs.clone();
    let done = name.to_owned();
    let tool = Tool::json(name, "counted", move |_| {
        counter.fetch_add(1, Ordering::SeqCst);
        Ok(json!({ "done": done }))
    });
    (tool, runs)
}

pub fn runs(n: &AtomicUsize) -> usize {
    n.load(Ordering::SeqCst)
}

/// A call served by the driver against the simulator, on a virtual clock.
pub struct Call {
    /// The harness's own tools.
    pub tools: Tools,
    /// The platform's tools, run by the simulator.
    pub platform: Tools,
    pub sim: SimConfig,
    pub cfg: ServeConfig,
}

impl Default for Call {
    fn default() -> Self {
        Call {
            tools: Tools::new(),
            platform: platform_tools(),
            sim: SimConfig::default(),
            cfg: ServeConfig::default(),
        }
    }
}

impl Call {
    pub fn run(
        self,
        agent: impl Harness + 'static,
        model: impl Model + 'static,
        script: Script,
    ) -> SimulatedCall {
        self.run_with(agent, model, script, |s| s)
    }

    /// `f` adds to the simulator.
    pub fn run_with(
        self,
        agent: impl Harness + 'static,
        model: impl Model + 'static,
        script: Script,
        f: impl FnOnce(Simulator) -> Simulator,
    ) -> SimulatedCall {
        let start = Instant::now();
        let sim = f(Simulator::new(start, self.sim, script).with_tools(self.platform));
        simulate_call(agent, model, self.tools, sim, start, self.cfg)
    }
}

/// A call with no tools of the harness's own and the platform's `get_hours`.
pub fn call(
    agent: impl Harness + 'static,
    model: impl Model + 'static,
    script: Script,
    cfg: ServeConfig,
) -> SimulatedCall {
    Call {
        cfg,
        ..Call::default()
    }
    .run(agent, model, script)
}

/// The frames of type `ty` the harness sent.
pub fn sent(c: &SimulatedCall, ty: &str) -> Vec<Value> {
    c.texts(Direction::ToJambonz)
        .into_iter()
        .map(|t| serde_json::from_str::<Value>(t).unwrap())
        .filter(|v| v["type"] == ty)
        .collect()
}

/// The driver serving `agent` on a started call (`session:start` fed), fed raw frames by hand and polled with a no-op waker (for
/// answers the simulator does not give).
pub struct Live {
    fut: Pin<Box<dyn Future<Output = Result<CallReport, ServeError>>>>,
    to_driver: mpsc::UnboundedSender<Incoming>,
    from_driver: mpsc::UnboundedReceiver<Transmit>,
    pub report: Option<Result<CallReport, ServeError>>,
}

impl Live {
    pub fn new(agent: impl Harness + 'static, tools: Tools, cfg: ServeConfig) -> Self {
        let (to_driver, incoming) = mpsc::unbounded::<Incoming>();
        let (outgoing, from_driver) = mpsc::unbounded::<Transmit>();
        let fut = Box::pin(serve(
            agent,
            ScriptedModel::new(),
            tools,
            Instant::now,
            incoming,
            futures::SinkExt::sink_map_err(outgoing, |e| e.to_string()),
            cfg,
        ));
        let mut live = Live {
            fut,
            to_driver,
            from_driver,
            report: None,
        };
        live.feed(json!({"type":"session:start","protocol":1}));
        live
    }

    /// Sends a frame from jambonz (`call_sid` added).
    pub fn feed(&mut self, mut f: Value) {
        f["call_sid"] = "CA1".into();
        self.to_driver
            .unbounded_send(Incoming::Text(f.to_string()))
            .unwrap();
    }

    /// `turn:start` of turn `id`, the caller saying `text`.
    pub fn turn(&mut self, id: u64, text: &str) {
        self.feed(json!({"type":"turn:start","turn_id":id,"input":{"type":"speech","text":text}}));
    }

    /// Lets the driver and its turns run until they wait.
    pub fn poll(&mut self) {
        let waker = futures::task::noop_waker();
        let mut cx = Context::from_waker(&waker);
        for _ in 0..10 {
            if self.report.is_some() {
                return;
            }
            if let Poll::Ready(r) = self.fut.as_mut().poll(&mut cx) {
                self.report = Some(r);
            }
        }
    }

    /// The text frames the driver sent since the last call, as JSON.
    pub fn sent(&mut self) -> Vec<Value> {
        let mut out = Vec::new();
        while let Ok(t) = self.from_driver.try_recv() {
            if let Transmit::Text(t) = t {
                out.push(serde_json::from_str(&t).unwrap());
            }
        }
        out
    }
}

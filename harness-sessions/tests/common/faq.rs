//! The tour's FAQ agent (`harness_sessions::harnesses::faq`) on this host, with a payment
//! service that records every refund.

use std::sync::{Arc, Mutex};

use harness_core::model::ScriptedModel;
use harness_core::tool::Tools;
use harness_sessions::controller::Controller;
#[allow(unused_imports)]
pub use harness_sessions::harnesses::{DEFAULT_DAY, FaqAgent, NO_HANDOFF, faq_model};
use harness_sessions::journal::{Journal, MemoryJournal};
use harness_sessions::tools::MemoryReceipts;

use super::approval_rig::GatedRig;

/// The payment service behind `refund`: every refund it paid, with the session and the
/// idempotency key the tool passed it.
#[derive(Debug, Default)]
pub struct Payments(Mutex<Vec<(String, String, u64)>>);

impl Payments {
    /// The refunds paid: (session, idempotency key, order).
    pub fn paid(&self) -> Vec<(String, String, u64)> {
        self.0.lock().unwrap().clone()
    }
}

/// The agent's tools, its `refund` paying through `payments`.
pub fn faq_tools(payments: &Arc<Payments>) -> Tools {
    let service = Arc::clone(payments);
    harness_sessions::harnesses::faq_tools(move |cx, call, order| {
        service.0.lock().unwrap().push((
            cx.session_uid.clone(),
            call.idempotency_key.clone(),
            order,
        ));
    })
}

/// The FAQ agent on this host: a memory journal with session `s`, the agent's tools run by the
/// controller with receipts, the scripted model.
pub struct FaqHost {
    pub host: Controller,
    pub journal: Arc<MemoryJournal>,
    pub model: Arc<ScriptedModel>,
    pub payments: Arc<Payments>,
}

/// The controller for the FAQ agent over `journal`: its tools (`receipts` kept across
/// controllers), `model`, and the agent (`ungated`: offering `refund` without its gate).
pub fn faq_controller(
    journal: impl Journal + 'static,
    model: &Arc<ScriptedModel>,
    payments: &Arc<Payments>,
    receipts: &Arc<MemoryReceipts>,
    ungated: bool,
) -> Controller {
    let tools = faq_tools(payments);
    let agent = if ungated {
        FaqAgent::ungated(&tools)
    } else {
        FaqAgent::new(&tools)
    };
    Controller::builder(journal)
        .model(Arc::clone(model))
        .tools(tools)
        .receipts(Arc::clone(receipts))
        .harness("faq", agent)
        .build()
}

/// [`faq_controller`] over a new memory journal, with an empty session `s`.
pub fn faq_host(ungated: bool) -> FaqHost {
    let journal = Arc::new(MemoryJournal::new());
    let model = Arc::new(faq_model());
    let payments = Arc::new(Payments::default());
    let receipts = Arc::new(MemoryReceipts::default());
    let host = faq_controller(journal.clone(), &model, &payments, &receipts, ungated);
    host.create_session("s", None).unwrap();
    FaqHost {
        host,
        journal,
        model,
        payments,
    }
}

/// The FAQ agent in the crash rig of the approval path.
pub fn faq_rig(ungated: bool) -> GatedRig {
    let model = Arc::new(faq_model());
    let payments = Arc::new(Payments::default());
    let receipts = Arc::new(MemoryReceipts::default());
    let (m, p) = (Arc::clone(&model), Arc::clone(&payments));
    GatedRig {
        build: Box::new(move |journal| faq_controller(journal, &m, &p, &receipts, ungated)),
        effects: Box::new(move || payments.paid().len()),
        provider_calls: Box::new(move || model.calls()),
    }
}

//! The tour's FAQ agent (`harness_core::agent::faq`) on this host, with its payment service
//! (`Refunds`) recording every refund.

use std::sync::Arc;

#[allow(unused_imports)]
pub use harness_core::agent::faq::{
    FaqAgent, NO_PERSON, Refunds as Payments, faq_model, faq_tools,
};
use harness_core::model::ScriptedModel;
use harness_sessions::controller::Controller;
use harness_sessions::journal::{Journal, MemoryJournal};
use harness_sessions::tools::MemoryReceipts;

use super::approval_rig::GatedRig;

/// The FAQ agent on this host: a memory journal with session `s`, the agent's tools run by the
/// controller with receipts, the scripted model.
pub struct FaqHost {
    pub host: Controller,
    pub journal: Arc<MemoryJournal>,
    pub model: Arc<ScriptedModel>,
    pub payments: Payments,
}

/// The controller for the FAQ agent over `journal`: its tools (`receipts` kept across
/// controllers), `model`, and the agent (`ungated`: offering `refund` without its gate).
pub fn faq_controller(
    journal: impl Journal + 'static,
    model: &Arc<ScriptedModel>,
    payments: &Payments,
    receipts: &Arc<MemoryReceipts>,
    ungated: bool,
) -> Controller {
    let tools = faq_tools(payments);
    let agent = if ungated {
        FaqAgent::ungated()
    } else {
        FaqAgent::new()
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
    let payments = Payments::default();
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
    let payments = Payments::default();
    let receipts = Arc::new(MemoryReceipts::default());
    let (m, p) = (Arc::clone(&model), payments.clone());
    GatedRig {
        build: Box::new(move |journal| faq_controller(journal, &m, &p, &receipts, ungated)),
        effects: Box::new(move || payments.count()),
        provider_calls: Box::new(move || model.calls()),
    }
}

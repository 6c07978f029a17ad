//! Pinning a session's head outside the journal. The hash chain makes every record vouch for
//! the ones before it, so a journal cut after a whole record still verifies: only the last
//! record's seq and content hash, kept elsewhere (agentctl `verify` checks the journal against
//! the `last_seq` the session metadata reports), tell that records are missing from its tail.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::fs;
use std::sync::Arc;

use common::*;
use harness_sessions::controller::{Controller, ExecRequest};
use harness_sessions::journal::{FileJournal, Journal};
use harness_sessions::verify::{HeadPin, VerifyError};
use harness_sessions::{Code, Error};

fn controller(j: Arc<dyn Journal>) -> Controller {
    Controller::builder(j)
        .model(counting_model())
        .harness("script", ScriptHarness::new(vec![Op::Model]))
        .build()
}

/// Two turns in `s` on a file journal in `dir`; the head after each.
fn two_turns(dir: &std::path::Path, inputs: [&str; 2]) -> [HeadPin; 2] {
    let host = controller(Arc::new(FileJournal::open(dir).unwrap()));
    host.create_session("s", None).unwrap();
    inputs.map(|input| {
        let turn = block(host.exec(ExecRequest::text("s", input))).unwrap();
        let pin = turn.head_pin().unwrap();
        assert_eq!(pin.seq, turn.head_seq);
        assert_eq!(Some(pin), host.head("s").unwrap());
        pin
    })
}

/// The issue: "a journal cut after record N verifies fine". Cut whole records off the tail of
/// a file journal: plain verify still passes, verify against the pinned head fails, as
/// DATA_LOSS, naming the records that are missing.
#[test]
fn whole_records_cut_off_the_tail_fail_against_the_pinned_head() {
    let dir = scratch_dir("cut");
    let [first, head] = two_turns(&dir, ["one", "two"]);
    assert_eq!((first.seq, head.seq), (5, 10));
    let path = dir.join("s.journal");
    let whole = fs::read_to_string(&path).unwrap();
    // Keep everything up to and including record 7's line.
    let end = whole.find("{\"seq\":\"8\"").unwrap();
    fs::write(&path, &whole[..end]).unwrap();

    let host = controller(Arc::new(FileJournal::open_read_only(&dir).unwrap()));
    assert_eq!(host.verify("s").unwrap().records, 7);
    let err = host.verify_head("s", &head).unwrap_err();
    assert!(
        matches!(
            err,
            Error::Verify(VerifyError::Truncated {
                last: 7,
                pinned: 10
            })
        ),
        "{err}"
    );
    assert_eq!(err.code(), Code::DataLoss);
    let text = err.to_string();
    assert!(
        text.contains("8..=10") && text.contains("missing"),
        "{text}"
    );
    // The earlier pin is still in the journal: a journal that grew past a pin holds.
    assert_eq!(host.verify_head("s", &first).unwrap().records, 7);

    // Cut everything: an empty journal is missing all of them.
    fs::write(&path, &whole[..whole.find("{\"fence\"").unwrap()]).unwrap();
    let host = controller(Arc::new(FileJournal::open_read_only(&dir).unwrap()));
    assert_eq!(host.verify("s").unwrap().records, 0);
    assert!(matches!(
        host.verify_head("s", &first),
        Err(Error::Verify(VerifyError::Truncated { last: 0, pinned: 5 }))
    ));
    let _ = fs::remove_dir_all(&dir);
}

/// A journal replaced by another that holds on its own (every hash recomputed) verifies, but
/// not against the pin: the record at the pinned seq is not the pinned one.
#[test]
fn a_replaced_history_fails_against_the_pinned_head() {
    let dir = scratch_dir("replaced");
    let other = scratch_dir("replaced-other");
    let [_, head] = two_turns(&dir, ["one", "two"]);
    two_turns(&other, ["one", "TWO"]);
    fs::copy(other.join("s.journal"), dir.join("s.journal")).unwrap();
    let host = controller(Arc::new(FileJournal::open_read_only(&dir).unwrap()));
    assert_eq!(host.verify("s").unwrap().records, 10);
    let err = host.verify_head("s", &head).unwrap_err();
    let Error::Verify(VerifyError::NotPinnedHead { seq, pinned, found }) = &err else {
        panic!("{err}")
    };
    assert_eq!((*seq, *pinned), (10, head.hash));
    assert_ne!(*found, head.hash);
    assert_eq!(err.code(), Code::DataLoss);
    let _ = fs::remove_dir_all(&dir);
    let _ = fs::remove_dir_all(&other);
}

/// The memory journal answers the same, through the trait's default `verify_head`.
#[test]
fn the_memory_journal_checks_a_pinned_head_too() {
    let (_, host) = on_memory(controller);
    let turn = block(host.exec(ExecRequest::text("s", "one"))).unwrap();
    let head = turn.head_pin().unwrap();
    assert_eq!(host.verify_head("s", &head).unwrap().records, 5);
    let beyond = HeadPin {
        seq: 6,
        hash: head.hash,
    };
    assert!(matches!(
        host.verify_head("s", &beyond),
        Err(Error::Verify(VerifyError::Truncated { last: 5, pinned: 6 }))
    ));
    let earlier = HeadPin {
        seq: 4,
        hash: head.hash,
    };
    assert!(matches!(
        host.verify_head("s", &earlier),
        Err(Error::Verify(VerifyError::NotPinnedHead { seq: 4, .. }))
    ));
    // Unknown sessions are NOT_FOUND, as for verify.
    assert_eq!(
        host.verify_head("nope", &head).unwrap_err().code(),
        Code::NotFound
    );
}

/// The pin's text form is `SEQ:HASH`: the seq in decimal, the 64 lowercase hex digits of the
/// content hash; anything else is refused.
#[test]
fn a_pin_reads_back_from_its_text() {
    let (_, host) = on_memory(controller);
    let pin = block(host.exec(ExecRequest::text("s", "one")))
        .unwrap()
        .head_pin()
        .unwrap();
    let text = pin.to_string();
    assert_eq!(text, format!("5:{}", pin.hash));
    assert_eq!(text.parse::<HeadPin>().unwrap(), pin);
    let hex = pin.hash.to_string();
    for bad in [
        String::new(),
        "5".into(),
        hex.clone(),
        format!("0:{hex}"),
        format!("-1:{hex}"),
        format!("x:{hex}"),
        format!("5:{}", hex.to_uppercase()),
        format!("5:{}", &hex[1..]),
        format!("5:{hex}0"),
        format!(" 5:{hex}"),
        format!("5:{hex}:1"),
    ] {
        assert!(bad.parse::<HeadPin>().is_err(), "{bad:?}");
    }
}

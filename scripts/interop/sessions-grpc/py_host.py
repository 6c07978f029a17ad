"""A foreign agentsessions host: drives harness-rs's served harness (`harness_node --harness
faq`) over `Harness.Connect` with grpcio, written from the spec and the Go bridge's wire facts,
with code generated at test time from harness-rs's own proto.

    py_host.py ADDRESS [AUTHORITY]

AUTHORITY sets the channel's `:authority`. Over a unix socket grpc-core (this client) sends
the socket path, percent-encoded, which is no valid authority: the h2 server under tonic
resets the stream (PROTOCOL_ERROR). grpc-go sends `localhost`; pass that.

It plays the host's side by hand (its own scripted model and tools, its own seqs) and checks
every event it receives: the execution id on each, one request at a time, the tools offered,
the correlation the harness echoes, exactly one END and nothing after it, and the parked
acknowledgement's tuple followed by a clean close with no END. Turns:

  1. "Are you open on monday?": MODEL_CALL, a controller-mediated get_hours, MODEL_CALL, END;
  2. "Please refund order 42": MODEL_CALL, the gated refund, `park`: EVENT_PARKED, close;
  3. the same execution resumed with its decision (approved): `approval` then `tool`,
     MODEL_CALL, END; and once more denied;
  4. bad hosts: a model result for another call, and a park naming another call: the harness
     ends the turn with one END{FAILED} and a non-OK status.
"""

import queue
import sys

import grpc

import agentsessions_pb2 as pb
import agentsessions_pb2_grpc as pbg

SESSION = "py-session"
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print(f"FAIL: {what}", file=sys.stderr)
    return cond


def text_of(message):
    return "".join(p.text.text for p in message.parts if p.WhichOneof("part") == "text")


def kind_name(ev):
    return pb.EventKind.Name(ev.kind)


class Stream:
    """One Connect stream: frames go out through a queue as the host decides them."""

    def __init__(self, stub, execution_id):
        self.exec = execution_id
        self.out = queue.Queue()
        self.kinds = []
        self.reasoning = []

        def frames():
            while True:
                f = self.out.get()
                if f is None:
                    return
                yield f

        self.call = stub.Connect(frames(), timeout=20)
        self.events = iter(self.call)

    def send(self, **frame):
        self.out.put(pb.ControllerFrame(session=SESSION, execution_id=self.exec, **frame))

    def recv(self):
        """The next event; None at the end of the stream (status OK). The agent's reasoning
        (an OUTPUT of reasoning parts only, which the FAQ agent streams around a look-up on a
        host that journals reasoning) is kept apart, in `self.reasoning`."""
        while True:
            try:
                ev = next(self.events)
            except StopIteration:
                return None
            parts = ev.message.parts if ev.WhichOneof("body") == "message" else []
            if ev.kind == pb.EVENT_OUTPUT and parts and all(
                    p.WhichOneof("part") == "reasoning" for p in parts):
                check(ev.execution_id == self.exec, f"event execution_id {ev.execution_id!r}")
                self.reasoning.append(ev)
                continue
            break
        self.kinds.append(kind_name(ev))
        check(ev.execution_id == self.exec, f"event execution_id {ev.execution_id!r}")
        return ev

    def expect(self, kind):
        ev = self.recv()
        check(ev is not None and ev.kind == kind,
              f"expected {pb.EventKind.Name(kind)}, got {ev and kind_name(ev)}")
        return ev

    def finish(self):
        """Half-closes; the stream must end (status OK) with nothing more."""
        self.out.put(None)
        rest = []
        while (ev := self.recv()) is not None:
            rest.append(kind_name(ev))
        check(not rest, f"events after the end of the turn: {rest}")
        check(self.call.code() == grpc.StatusCode.OK, f"status {self.call.code()}")

    def failed(self):
        """The turn must end with exactly one END{FAILED}, then a non-OK status."""
        self.out.put(None)
        ends = []
        try:
            while (ev := self.recv()) is not None:
                if ev.kind == pb.EVENT_END:
                    ends.append(ev.end)
        except grpc.RpcError as e:
            check(e.code() != grpc.StatusCode.OK, "a failed turn ended OK")
            status = e.code()
        else:
            status = grpc.StatusCode.OK
        check(len(ends) == 1 and ends[0].state == "FAILED", f"ENDs of a failed turn: {ends}")
        check(status != grpc.StatusCode.OK, "a failed turn's RPC ended OK")
        return ends[0].error.description if ends else ""


def start(stub, execution_id, text, history=()):
    s = Stream(stub, execution_id)
    s.send(start=pb.Start(inputs=[pb.Message(role="user",
                                             parts=[pb.Part(text=pb.TextPart(text=text))])],
                          history=list(history)))
    return s


def model_call(s, offered=("get_hours", "refund")):
    ev = s.expect(pb.EVENT_MODEL_CALL)
    mc = ev.model
    check(mc.id != "", "a MODEL_CALL without id")
    check(mc.input_hash == "", "the harness computed an input_hash")
    check(sorted(t.name for t in mc.tools) == sorted(offered),
          f"tools offered: {[t.name for t in mc.tools]}")
    return mc


def answer_tool_call(s, mc, tool, args, call_id):
    part = pb.Part(tool_call=pb.ToolCall(id=call_id, tool=tool))
    part.tool_call.args.update(args)
    s.send(model=pb.ModelResult(model_call_id=mc.id,
                                message=pb.Message(role="assistant", parts=[part])))


def answer_text(s, mc, text):
    s.send(model=pb.ModelResult(model_call_id=mc.id, message=pb.Message(
        role="assistant", parts=[pb.Part(text=pb.TextPart(text=text))])))


def tool_result_in(mc):
    """The tool result the harness put in the model's context."""
    for m in mc.messages:
        for p in m.parts:
            if p.WhichOneof("part") == "tool_result":
                return p.tool_result
    return None


def main():
    address = sys.argv[1]
    options = [("grpc.default_authority", sys.argv[2])] if len(sys.argv) > 2 else []
    with grpc.insecure_channel(address, options=options) as channel:
        # The harness node may still be binding.
        grpc.channel_ready_future(channel).result(timeout=30)
        stub = pbg.HarnessStub(channel)

        d = stub.Describe(pb.DescribeRequest(), timeout=10)
        check(d.id == "acme-faq", f"descriptor id {d.id!r}")
        check(d.capabilities.resumability == pb.RESUMABILITY_STATELESS_REPLAY,
              "a remote harness must be STATELESS_REPLAY")
        tools = {t.name: t.mediation for t in d.tools}
        check(tools.get("refund") == pb.MEDIATION_REQUIRES_APPROVAL, f"tools {tools}")
        check("get_hours" in tools, f"tools {tools}")

        # 1. A model call, a controller-mediated tool call, the final answer, one END.
        s = start(stub, "py-exec-1", "Are you open on monday?")
        mc = model_call(s)
        check(any(text_of(m) == "Are you open on monday?" for m in mc.messages),
              "the input is not in the model's context")
        answer_tool_call(s, mc, "get_hours", {"day": "monday"}, "call_1")
        call = s.expect(pb.EVENT_TOOL_CALL).tool
        check(call.id == "call_1" and call.tool == "get_hours", f"tool call {call}")
        check(call.mediation == pb.MEDIATION_CONTROLLER_MEDIATED, f"mediation {call.mediation}")
        check(call.idempotency_key != "", "a host-executed call without idempotency key")
        check(call.args["day"] == "monday", f"args {call.args}")
        result = pb.ToolResult(id=call.id)
        result.output.update({"day": "monday", "hours": "8am to 6pm"})
        s.send(tool=result)
        mc = model_call(s)
        r = tool_result_in(mc)
        check(r is not None and r.id == "call_1" and r.output["hours"] == "8am to 6pm",
              "the tool result is not in the model's context")
        answer_text(s, mc, "On monday we're open 8am to 6pm.")
        end = s.expect(pb.EVENT_END)
        check(end.end.state == "COMPLETED", f"END {end.end}")
        s.finish()
        check(s.kinds == ["EVENT_MODEL_CALL", "EVENT_TOOL_CALL", "EVENT_MODEL_CALL", "EVENT_END"],
              f"turn 1 events {s.kinds}")
        check(len(s.reasoning) == 2, f"turn 1 reasoning outputs: {len(s.reasoning)}")
        print(f"turn 1: {len(s.reasoning)} reasoning OUTPUTs, {' '.join(s.kinds)}")

        # 2. The gated call parks: one EVENT_PARKED echoing the tuple, then a clean close.
        request_seq, decision_seq = 7, 9
        s = start(stub, "py-exec-2", "Please refund order 42")
        mc = model_call(s)
        answer_tool_call(s, mc, "refund", {"order_id": 42}, "call_2")
        gated = s.expect(pb.EVENT_TOOL_CALL).tool
        check(gated.mediation == pb.MEDIATION_REQUIRES_APPROVAL, f"mediation {gated.mediation}")
        check(gated.idempotency_key != "", "a gated call without idempotency key")
        s.send(park=pb.ApprovalRef(execution_id=s.exec, tool_call_id=gated.id,
                                   request_seq=request_seq))
        ack = s.expect(pb.EVENT_PARKED)
        check(ack.WhichOneof("body") == "parked", "EVENT_PARKED without its ApprovalRef")
        check((ack.parked.execution_id, ack.parked.tool_call_id, ack.parked.request_seq)
              == (s.exec, gated.id, request_seq), f"parked tuple {ack.parked}")
        s.finish()
        check(s.kinds == ["EVENT_MODEL_CALL", "EVENT_TOOL_CALL", "EVENT_PARKED"],
              f"turn 2 events {s.kinds}")
        print(f"turn 2: {' '.join(s.kinds)} {ack.parked.tool_call_id}@{ack.parked.request_seq}")

        # 3. Resumed with the decision: `approval` then the receipt; approved, then denied.
        history = [
            pb.Event(execution_id="py-exec-2", kind=pb.EVENT_INPUT, message=pb.Message(
                role="user", parts=[pb.Part(text=pb.TextPart(text="Please refund order 42"))])),
            pb.Event(execution_id="py-exec-2", kind=pb.EVENT_TOOL_CALL, tool=gated),
            pb.Event(execution_id="py-exec-2", kind=pb.EVENT_APPROVAL_REQUEST,
                     approval=pb.ApprovalRequest(tool_call_id=gated.id)),
        ]
        for approved, want in ((True, "Done: refunded order 42."),
                               (False, "The refund was not done: not this one.")):
            s = start(stub, "py-exec-2", "Please refund order 42", history)
            mc = model_call(s)
            answer_tool_call(s, mc, "refund", {"order_id": 42}, "call_2")
            again = s.expect(pb.EVENT_TOOL_CALL).tool
            check(again == gated, f"the re-driven call differs: {again} vs {gated}")
            s.send(approval=pb.ApprovalResult(tool_call_id=gated.id, approved=approved,
                                              reason="" if approved else "not this one",
                                              request_seq=request_seq))
            receipt = pb.ToolResult(id=gated.id, approval_request_seq=request_seq,
                                    approval_decision_seq=decision_seq)
            if approved:
                receipt.output.update({"result": "refunded order 42"})
            else:
                receipt.is_error = True
                receipt.error = "not this one"
                receipt.code = pb.ToolResult.APPROVAL_DENIED
            s.send(tool=receipt)
            mc = model_call(s)
            r = tool_result_in(mc)
            check(r is not None and r.id == gated.id and r.is_error == (not approved),
                  f"the receipt is not in the model's context: {r}")
            answer_text(s, mc, want)
            end = s.expect(pb.EVENT_END)
            check(end.end.state == "COMPLETED", f"END {end.end}")
            s.finish()
            check(s.kinds == ["EVENT_MODEL_CALL", "EVENT_TOOL_CALL", "EVENT_MODEL_CALL",
                              "EVENT_END"], f"turn 3 events {s.kinds}")
            print(f"turn 3 ({'approved' if approved else 'denied'}): {' '.join(s.kinds)}")

        # 4. Bad hosts: the harness refuses, with one END{FAILED} and an error status.
        s = start(stub, "py-exec-4", "Are you open on monday?")
        mc = model_call(s)
        s.send(model=pb.ModelResult(model_call_id=mc.id + "-other",
                                    message=pb.Message(role="assistant")))
        why = s.failed()
        check("correlation" in why, f"wrong model_call_id: {why!r}")
        print(f"bad host (another model call's result): END FAILED: {why}")

        s = start(stub, "py-exec-5", "Please refund order 42")
        mc = model_call(s)
        answer_tool_call(s, mc, "refund", {"order_id": 42}, "call_2")
        gated = s.expect(pb.EVENT_TOOL_CALL).tool
        s.send(park=pb.ApprovalRef(execution_id=s.exec, tool_call_id="another-call",
                                   request_seq=request_seq))
        why = s.failed()
        check("park" in why, f"park of another call: {why!r}")
        print(f"bad host (a park naming another call): END FAILED: {why}")

    if failures:
        print(f"{len(failures)} check(s) failed", file=sys.stderr)
        sys.exit(1)
    print("python host: every frame checked, 0 failures")


if __name__ == "__main__":
    main()

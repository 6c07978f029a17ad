"""A foreign agentsessions harness: the `agentsessions.v1.Harness` gRPC service in Python
(grpcio), written from the spec ("Running out of process") and the Go bridge's wire facts,
with code generated at test time from harness-rs's own proto. harness-rs's controller (the
`sessions` example, `--harness py=127.0.0.1:PORT`) drives it.

    py_harness.py PORT_FILE MODE_FILE LOG_FILE UNIX_SOCKET

Binds 127.0.0.1 on a port the OS picks, and UNIX_SOCKET, then writes the port to PORT_FILE
(the same service answers at both addresses). Each call reads its
behaviour from MODE_FILE, so the run script switches it between turns:

  good           MODEL_CALL; a controller-mediated TOOL_CALL (get_hours); a gated TOOL_CALL
                 (publish, REQUIRES_APPROVAL): on `park` it acknowledges with EVENT_PARKED
                 and closes (no END); on `approval` then `tool` it says what became of it and
                 ends with one END{COMPLETED}
  close-early    MODEL_CALL, then ends the stream (status OK) without END
  two-ends       MODEL_CALL, then END{COMPLETED} twice
  wrong-exec     its first event carries another execution id
  mute-describe  never answers Describe

Every frame the host sends is checked as the Go bridge's harness side checks it (the
session and execution id of every frame, the model call's correlation, the tool result's
id, the park tuple, approval before its receipt and the receipt's tuple). Each Connect
appends one JSON line to LOG_FILE: the mode, the frames received in order, the history
length, the park tuple, and the first violation seen (`error`), for the run script to check.
"""

import json
import os
import secrets
import signal
import sys
import threading
from concurrent import futures

import grpc

import agentsessions_pb2 as pb
import agentsessions_pb2_grpc as pbg

STOP = threading.Event()


class Violation(Exception):
    """The host broke a rule of the exchange."""


def text_of(message):
    return "".join(p.text.text for p in message.parts if p.WhichOneof("part") == "text")


def assistant(text):
    return pb.Message(role="assistant", parts=[pb.Part(text=pb.TextPart(text=text))])


class Harness(pbg.HarnessServicer):
    def __init__(self, mode_file, log_file):
        self.mode_file = mode_file
        self.log_file = log_file
        self.lock = threading.Lock()

    def mode(self):
        with open(self.mode_file) as f:
            return f.read().strip()

    def Describe(self, request, context):
        if self.mode() == "mute-describe":
            # Never answers: the host gives up after its 10 s.
            STOP.wait(60)
            context.abort(grpc.StatusCode.UNAVAILABLE, "stopping")
        return pb.HarnessDescriptor(
            id="py-harness",
            version="1",
            models=["builtin"],
            tools=[
                pb.ToolSpec(name="get_hours", description="Opening hours",
                            mediation=pb.MEDIATION_CONTROLLER_MEDIATED),
                pb.ToolSpec(name="publish", description="Publish a text",
                            mediation=pb.MEDIATION_REQUIRES_APPROVAL),
            ],
            capabilities=pb.Capabilities(
                resumability=pb.RESUMABILITY_STATELESS_REPLAY, fork_safe=True),
        )

    def Connect(self, frames, context):
        log = {"mode": self.mode(), "frames": [], "history": 0, "error": None}
        try:
            yield from self.turn(frames, log)
        except Violation as e:
            log["error"] = str(e)
            # As the Go server: END{FAILED} with the description, then the error as status.
            yield pb.Event(execution_id=log.get("exec", ""), kind=pb.EVENT_END,
                           end=pb.HarnessEnd(state="FAILED",
                                             error=pb.Error(description=str(e))))
            context.set_code(grpc.StatusCode.UNKNOWN)
            context.set_details(str(e))
        finally:
            with self.lock, open(self.log_file, "a") as f:
                f.write(json.dumps(log) + "\n")

    def turn(self, frames, log):
        def recv(want):
            try:
                f = next(frames)
            except StopIteration:
                raise Violation(f"the host closed the stream; expected {want}")
            kind = f.WhichOneof("frame")
            log["frames"].append(kind)
            if kind != want and not (want == "approval|park" and kind in ("approval", "park")):
                raise Violation(f"expected a {want} frame, got {kind}")
            if kind != "start":
                if f.execution_id != log["exec"]:
                    raise Violation("result execution_id mismatch")
                if f.session != log["session"]:
                    raise Violation(f"{kind} frame session mismatch")
            return f

        first = recv("start")
        if not first.execution_id:
            raise Violation("Start frame requires execution_id")
        ex, start = first.execution_id, first.start
        log.update(exec=ex, session=first.session, history=len(start.history),
                   inputs=[text_of(m) for m in start.inputs])
        mode = log["mode"]

        def event(kind, **body):
            return pb.Event(execution_id=ex, kind=kind, **body)

        # The model call: the host answers it (live, or from its journal on replay/resume).
        call_id = secrets.token_hex(8)
        if mode == "wrong-exec":
            yield pb.Event(execution_id=ex + "-other", kind=pb.EVENT_MODEL_CALL,
                           model=pb.ModelCall(model="builtin", id=call_id,
                                              messages=list(start.inputs)))
            return
        yield event(pb.EVENT_MODEL_CALL,
                    model=pb.ModelCall(model="builtin", id=call_id, messages=list(start.inputs)))
        reply = recv("model")
        if reply.model.model_call_id != call_id:
            raise Violation("model result correlation mismatch")
        answer = text_of(reply.model.message)
        if mode == "close-early":
            return
        if mode == "two-ends":
            yield event(pb.EVENT_END, end=pb.HarnessEnd(state="COMPLETED"))
            yield event(pb.EVENT_END, end=pb.HarnessEnd(state="COMPLETED"))
            return

        # A controller-mediated call: the host runs get_hours and answers with its result.
        hours = pb.ToolCall(id=f"{ex}-hours", tool="get_hours",
                            mediation=pb.MEDIATION_CONTROLLER_MEDIATED,
                            idempotency_key=f"{ex}-hours")
        hours.args.update({"day": "monday"})
        yield event(pb.EVENT_TOOL_CALL, tool=hours)
        r = recv("tool").tool
        if r.id != hours.id:
            raise Violation("tool result correlation mismatch")
        if r.approval_request_seq or r.approval_decision_seq or r.code:
            raise Violation("approval fields on an ordinary tool result")
        if r.is_error or r.output["hours"] != "8am to 6pm":
            raise Violation(f"unexpected get_hours result {r}")
        yield event(pb.EVENT_OUTPUT, message=assistant(f"\n(monday: {r.output['hours']})"))

        # The gated call: parked until a person decides, then the decision and its receipt.
        publish = pb.ToolCall(id=f"{ex}-publish", tool="publish",
                              mediation=pb.MEDIATION_REQUIRES_APPROVAL,
                              idempotency_key=f"{ex}-publish")
        publish.args.update({"text": answer})
        yield event(pb.EVENT_TOOL_CALL, tool=publish)
        gate = recv("approval|park")
        if gate.WhichOneof("frame") == "park":
            p = gate.park
            if p.execution_id != ex or p.tool_call_id != publish.id or p.request_seq <= 0:
                raise Violation("park correlation mismatch")
            log["parked"] = [p.execution_id, p.tool_call_id, p.request_seq]
            # Exactly one acknowledgement echoing the tuple, then a clean close: no END.
            yield event(pb.EVENT_PARKED, parked=pb.ApprovalRef(
                execution_id=p.execution_id, tool_call_id=p.tool_call_id,
                request_seq=p.request_seq))
            return
        decision = gate.approval
        if decision.tool_call_id != publish.id or decision.request_seq <= 0:
            raise Violation("expected correlated approval before ToolResult")
        receipt = recv("tool").tool
        if (receipt.id != publish.id
                or receipt.approval_request_seq != decision.request_seq
                or receipt.approval_decision_seq <= 0):
            raise Violation("approval receipt correlation mismatch")
        if decision.approved:
            ok = (receipt.code == pb.ToolResult.CODE_UNSPECIFIED and not receipt.is_error) or (
                receipt.code == pb.ToolResult.EXECUTOR_ERROR and receipt.is_error)
        else:
            ok = receipt.code == pb.ToolResult.APPROVAL_DENIED and receipt.is_error
        if not ok:
            raise Violation("approval receipt status does not match the decision")
        log["decision"] = [decision.approved, decision.request_seq, receipt.approval_decision_seq]
        note = f"\n[not published: {receipt.error}]" if receipt.is_error else "\n[published]"
        yield event(pb.EVENT_OUTPUT, message=assistant(note))
        yield event(pb.EVENT_END, end=pb.HarnessEnd(state="COMPLETED"))


def main():
    port_file, mode_file, log_file, unix_socket = sys.argv[1:5]
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
    pbg.add_HarnessServicer_to_server(Harness(mode_file, log_file), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.add_insecure_port("unix:" + unix_socket)
    server.start()

    def stop(*_):
        STOP.set()
        server.stop(0)
        os._exit(0)

    signal.signal(signal.SIGTERM, stop)
    with open(port_file + ".tmp", "w") as f:
        f.write(str(port))
    os.replace(port_file + ".tmp", port_file)
    # Bounded: the run script stops it; this is the backstop.
    STOP.wait(300)
    stop()


if __name__ == "__main__":
    main()

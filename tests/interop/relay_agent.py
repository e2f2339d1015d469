#!/usr/bin/env python3
"""Interop check: a Python `websockets` agent books movie tickets through an agentwire relay
and the Rust movie host.

Usage: relay_agent.py ws://127.0.0.1:PORT/agent/ws

It speaks the External Agent Protocol (mvp-0.2) as a plain agent would: relay.join, then
session.start, snapshot.get, tool.call (each with a reason) stage by stage, agent.message,
and session.end; it reads its choices from the uiSpec the host returns. It also checks the
host's refusals (no reason -> INVALID_PARAMS, a tool the stage does not offer ->
UNKNOWN_TOOL, the spec's setQuantity example text). Exits 0 printing "python interop ok"
when every check passes, 1 with a message otherwise. Run by the `python_agent_interop` test
in tests/relay_booking.rs.
"""

import asyncio
import json
import re
import sys

from checks import CheckFailed, check, connect, passed

STEP_TIMEOUT = 12.0  # the reference agent client's request timeout
SESSION_ID = re.compile(r"^s-\d{8}-\d{3,}$")


class Agent:
    def __init__(self, ws):
        self.ws = ws
        self.n = 0
        self.pushes = []

    async def send(self, msg_type, payload, with_id=True):
        msg = {"v": "mvp-0.2", "type": msg_type, "payload": payload}
        if with_id:
            self.n += 1
            msg["id"] = f"py-{self.n}"
        await self.ws.send(json.dumps(msg))
        return msg.get("id")

    async def request(self, msg_type, payload):
        """Sends a request; returns the reply carrying its id (pushes are kept aside)."""
        rid = await self.send(msg_type, payload)
        while True:
            raw = await asyncio.wait_for(self.ws.recv(), STEP_TIMEOUT)
            msg = json.loads(raw)
            check(msg.get("v") == "mvp-0.2", f"every message has v mvp-0.2: {msg}")
            if msg.get("replyTo") == rid:
                return msg
            self.pushes.append(msg)

    async def ok(self, msg_type, payload, reply_type):
        reply = await self.request(msg_type, payload)
        check(reply["type"] == reply_type, f"{msg_type} answered {reply_type}: {reply}")
        return reply["payload"]

    async def tool(self, name, params, reason):
        result = await self.ok(
            "tool.call", {"toolName": name, "params": params, "reason": reason}, "tool.result"
        )
        check(result["ok"] is True and result["toolName"] == name, f"tool.result of {name}")
        check("backendData" not in result["uiSpec"], "no backendData reaches an agent")
        return result["uiSpec"]

    async def refused(self, payload, code):
        reply = await self.request("tool.call", payload)
        check(reply["type"] == "error", f"refused: {reply}")
        check(reply["payload"]["code"] == code, f"{code}: {reply}")
        return reply["payload"]["message"]


def first(ui):
    check(len(ui["items"]) > 0, f"items on the {ui['stage']} screen")
    return ui["items"][0]["id"]


async def next_stage(agent, stage, reason):
    ui = await agent.tool("next", {}, reason)
    check(ui["stage"] == stage, f"next leads to {stage}: {ui['stage']}")
    return ui


async def main(url):
    async with connect(url) as ws:
        agent = Agent(ws)
        joined = await agent.ok(
            "relay.join", {"role": "agent", "sessionId": "default", "agentName": "py-agent"},
            "relay.joined",
        )
        check(joined["role"] == "agent" and joined["sessionId"] == "default", "joined")

        started = await agent.ok(
            "session.start", {"studyId": "pilot-01", "participantId": "P07"}, "session.started"
        )
        session_id = started["sessionId"]
        check(SESSION_ID.match(session_id), f"session id form: {session_id}")

        snap = await agent.ok("snapshot.get", {}, "snapshot.state")
        check(set(snap) == {"sessionId", "uiSpec", "messageHistory", "toolSchema"},
              f"snapshot fields: {sorted(snap)}")
        check(snap["sessionId"] == session_id, "snapshot of this session")
        names = [t["name"] for t in snap["toolSchema"]]
        check(names[:6] == ["filter", "sort", "highlight", "augment", "clearModification",
                            "select"], f"movie tools: {names}")
        check("prev" not in names and "setQuantity" not in names, "stage filter")
        check(all({"name", "description", "parameters"} <= set(t) for t in snap["toolSchema"]),
              "tool schema shape")

        # The host enforces the spec where the reference host does not.
        msg = await agent.refused({"toolName": "select", "params": {"itemId": "m1"}},
                                  "INVALID_PARAMS")
        check("reason" in msg, f"reason required: {msg}")
        await agent.refused({"toolName": "setQuantity", "params": {"typeId": "adult",
                             "quantity": 1}, "reason": "too early"}, "UNKNOWN_TOOL")

        await agent.send("agent.message", {"text": "Hi from Python: booking one ticket."})

        ui = await agent.tool("filter", {"field": "genre", "operator": "in",
                                         "value": ["animation", "comedy"]},
                              "The participant wants something light.")
        check(all(i["genre"] in ("animation", "comedy") for i in ui["items"]), "filter in")
        ui = await agent.tool("sort", {"field": "rating", "order": "desc"}, "Best first.")
        ratings = [i["rating"] for i in ui["items"]]
        check(ratings == sorted(ratings, reverse=True), f"sorted: {ratings}")
        await agent.tool("select", {"itemId": first(ui)}, "The best light movie.")
        ui = await next_stage(agent, "theater", "Movie chosen.")
        await agent.tool("select", {"itemId": first(ui)}, "First theater listed.")
        ui = await next_stage(agent, "date", "Theater chosen.")
        await agent.tool("select", {"itemId": first(ui)}, "Earliest date.")
        ui = await next_stage(agent, "time", "Date chosen.")
        ui = await agent.tool("filter", {"field": "time", "operator": "lt", "value": "18:00"},
                              "An afternoon show.")
        check(all(i["time"] < "18:00" for i in ui["items"]), "afternoon shows")
        await agent.tool("select", {"itemId": first(ui)}, "Earliest afternoon show.")
        ui = await next_stage(agent, "seat", "Showtime chosen.")
        ui = await agent.tool("filter", {"field": "available", "operator": "eq", "value": True},
                              "Free seats only.")
        seat = first(ui)
        ui = await agent.tool("select", {"itemId": seat}, "A free seat.")
        check(ui["booking"]["seats"] == [seat], "seat taken")
        ui = await next_stage(agent, "ticket", "Seat chosen.")
        msg = await agent.refused({"toolName": "setQuantity", "params": {"typeId": "adult",
                                   "quantity": -1}, "reason": "oops"}, "INVALID_PARAMS")
        check(msg == "setQuantity requires quantity >= 0", f"the spec's example text: {msg}")
        await agent.tool("setQuantity", {"typeId": "student", "quantity": 1}, "One student.")
        ui = await next_stage(agent, "confirm", "Tickets chosen.")
        ui = await agent.tool("next", {}, "Place the booking.")
        reference = ui["booking"]["reference"]
        check(ui["booking"]["status"] == "confirmed" and reference.startswith("BK-"),
              f"booked: {ui['booking']}")

        ended = await agent.ok("session.end", {"reason": "study-complete"}, "session.ended")
        check(ended["sessionId"] == session_id and ended["stateReset"] is True,
              f"session.ended: {ended}")
        check(ended["logFile"].endswith(".jsonl"), f"log file: {ended['logFile']}")
        check(any(p["type"] == "state.updated" for p in agent.pushes), "state.updated pushes")
        print(f"python interop ok: {reference} in {session_id}, {passed()} checks, "
              f"log {ended['logFile']}")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    try:
        asyncio.run(main(sys.argv[1]))
    except Exception as e:  # noqa: BLE001 - any failure fails the check
        print(f"python interop FAILED: {type(e).__name__}: {e}", file=sys.stderr)
        sys.exit(1)

#!/usr/bin/env python3
"""Interop check: real Python `websockets` clients against the agentwire JSON-RPC bus.

Usage: bus_client.py ws://127.0.0.1:PORT

Three connections speak plain JSON-RPC 2.0, as the reference Python peers do (UUID string
ids, one numeric id, object payloads only, as the reference validates them): an interceptor
subscribed to `inbound:py-*` that answers every delivery `stopPropagation: true`, an observer
subscribed to `inbound:*` that answers `false`, and a publisher. It checks initialize,
subscribe, sendMessage (the stop flag ends the chain before the observer), unsubscribe, ping,
and agentwire's answers where the reference bus differs from the spec: -32602 for a
payload that is not an object, -32700 for malformed JSON, -32003 for a duplicate subscribe.
So it checks agentwire's bus (`bus_server`), not any bus: the reference itself answers those
with -32603, a dropped connection and a success.
Exits 0 when every check passes, 1 with a message otherwise. Run by the
`python_client_interop` test in tests/bus_e2e.rs.
"""

import asyncio
import json
import re
import sys
import uuid

import websockets

from checks import CheckFailed, check, connect, passed

STEP_TIMEOUT = 10.0
RFC3339_UTC = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$")
SUBSCRIPTION_ID = re.compile(r"^sub_[0-9a-f]{8}$")


class Peer:
    """One WebSocket connection: requests out, responses matched by id, deliveries answered."""

    def __init__(self, name, ws, stop):
        self.name = name
        self.ws = ws
        self.stop = stop
        self.pending = {}
        self.deliveries = []
        self.reader = asyncio.create_task(self._read())

    @classmethod
    async def open(cls, url, name, stop=False):
        ws = await asyncio.wait_for(connect(url), STEP_TIMEOUT)
        return cls(name, ws, stop)

    async def _read(self):
        try:
            async for text in self.ws:
                msg = json.loads(text)
                for entry in msg if isinstance(msg, list) else [msg]:
                    await self._dispatch(entry)
            error = CheckFailed(f"{self.name}: the bus closed the connection")
        except Exception as e:  # a failed check here fails whoever waits on this peer
            error = e
        for future in self.pending.values():
            if not future.done():
                future.set_exception(error)
        self.pending.clear()

    async def _dispatch(self, msg):
        if "method" in msg:
            # A bus-originated request: a delivery in the interceptor chain.
            if msg["method"] != "sendMessage" or "id" not in msg:
                raise CheckFailed(f"{self.name}: unexpected request {msg}")
            self.deliveries.append(msg["params"])
            answer = {
                "jsonrpc": "2.0",
                "result": {"success": True, "stopPropagation": self.stop},
                "id": msg["id"],
            }
            await self.ws.send(json.dumps(answer))
            return
        key = json.dumps(msg.get("id"))
        future = self.pending.pop(key, None)
        if future is None:
            raise CheckFailed(f"{self.name}: response to nothing it asked: {msg}")
        future.set_result(msg)

    async def call(self, method, params, request_id=None):
        """Sends a request and returns the whole response object."""
        if request_id is None:
            request_id = str(uuid.uuid4())
        future = asyncio.get_running_loop().create_future()
        self.pending[json.dumps(request_id)] = future
        await self.ws.send(
            json.dumps({"jsonrpc": "2.0", "method": method, "params": params, "id": request_id})
        )
        reply = await asyncio.wait_for(future, STEP_TIMEOUT)
        check(reply.get("jsonrpc") == "2.0", f"{self.name}: jsonrpc 2.0 in {reply}")
        check(reply.get("id") == request_id, f"{self.name}: id {request_id!r} echoed in {reply}")
        return reply

    async def result(self, method, params, request_id=None):
        """Sends a request and returns its result; an error reply fails the check."""
        reply = await self.call(method, params, request_id)
        check("result" in reply, f"{self.name}: {method} succeeded, got {reply}")
        return reply["result"]

    async def raw(self, text):
        """Sends raw text and returns the next reply the bus sends with `id: null`."""
        future = asyncio.get_running_loop().create_future()
        self.pending[json.dumps(None)] = future
        await self.ws.send(text)
        return await asyncio.wait_for(future, STEP_TIMEOUT)

    async def close(self):
        await self.ws.close()
        self.reader.cancel()
        try:
            await self.reader
        except (asyncio.CancelledError, websockets.ConnectionClosed):
            pass


async def initialize(peer, client_info):
    params = {"clientId": peer.name}
    if client_info != "absent":
        params["clientInfo"] = client_info
    result = await peer.result("initialize", params)
    check(result["serverId"].startswith("bus-"), f"serverId bus-...: {result}")
    check(result["serverInfo"]["name"] == "bub-bus", f"serverInfo.name bub-bus: {result}")
    check(isinstance(result["serverInfo"]["version"], str), f"serverInfo.version: {result}")
    caps = result["capabilities"]
    check(caps["subscribe"] is True and caps["publish"] is True, f"capabilities: {caps}")
    check(
        {"inbound:*", "outbound:*", "agent:*"} <= set(caps["topics"]),
        f"built-in topics: {caps}",
    )
    return result


async def subscribe(peer, topic):
    result = await peer.result("subscribe", {"topic": topic})
    check(result["success"] is True, f"subscribe success: {result}")
    check(SUBSCRIPTION_ID.match(result.get("subscriptionId", "")), f"subscriptionId: {result}")


async def run(url):
    interceptor = await Peer.open(url, "py-interceptor", stop=True)
    observer = await Peer.open(url, "py-observer", stop=False)
    publisher = await Peer.open(url, "py-publisher")
    peers = [interceptor, observer, publisher]
    try:
        info = {"name": "py-interop", "version": websockets.__version__}
        await initialize(interceptor, info)
        await initialize(observer, None)  # "clientInfo": null is valid (INTEROP.md)
        await initialize(publisher, "absent")
        # Subscription order is chain order: the interceptor first.
        await subscribe(interceptor, "inbound:py-*")
        await subscribe(observer, "inbound:*")

        # The interceptor stops the chain: the observer never sees the message.
        payload = {"chat_id": "py-1", "text": "hello from python", "from": "user-1"}
        result = await publisher.result("sendMessage", {"topic": "inbound:py-1", "payload": payload})
        check(result["success"] is True, f"sendMessage success: {result}")
        check(result["stopPropagation"] is True, f"stopPropagation true: {result}")
        check(
            interceptor.deliveries == [{"topic": "inbound:py-1", "payload": payload}],
            f"interceptor got the message as published: {interceptor.deliveries}",
        )
        check(observer.deliveries == [], f"observer saw nothing: {observer.deliveries}")

        # A topic only the observer matches goes through with stopPropagation false.
        nested = {"items": [1, "two", None], "meta": {"deep": {"er": True}}}
        result = await publisher.result("sendMessage", {"topic": "inbound:other", "payload": nested})
        check(result["stopPropagation"] is False, f"stopPropagation false: {result}")
        check(
            observer.deliveries == [{"topic": "inbound:other", "payload": nested}],
            f"observer got it: {observer.deliveries}",
        )

        # A payload that is not an object is refused (-32602), as the reference refuses it,
        # and reaches nobody: reference subscribers could not read it.
        for bad in ([1, "two", None], "text", 7, None):
            reply = await publisher.call("sendMessage", {"topic": "inbound:other", "payload": bad})
            check(reply.get("error", {}).get("code") == -32602, f"-32602 for payload {bad!r}: {reply}")
        check(len(observer.deliveries) == 1, f"no bad payload delivered: {observer.deliveries}")
        check(len(interceptor.deliveries) == 1, f"interceptor not called: {interceptor.deliveries}")

        # After unsubscribing, the interceptor is out of the chain.
        result = await interceptor.result("unsubscribe", {"topic": "inbound:py-*"})
        check(result == {"success": True}, f"unsubscribe: {result}")
        result = await publisher.result("sendMessage", {"topic": "inbound:py-2", "payload": {"n": 2}})
        check(result["stopPropagation"] is False, f"no interceptor any more: {result}")
        check(len(observer.deliveries) == 2, f"observer got the second: {observer.deliveries}")

        # ping with a numeric id, as in the spec's example.
        result = await publisher.result("ping", {}, request_id=100)
        check(RFC3339_UTC.match(result["timestamp"]), f"RFC 3339 UTC timestamp: {result}")

        # Malformed JSON gets a JSON-RPC error, and the connection keeps working.
        reply = await publisher.raw('{"jsonrpc": "2.0", "method": "ping", ')
        check(reply["error"]["code"] == -32700, f"-32700 for malformed JSON: {reply}")
        result = await publisher.result("ping", {})
        check("timestamp" in result, f"still working after -32700: {result}")

        # A second subscribe to the same topic is -32003 (spec's table).
        reply = await observer.call("subscribe", {"topic": "inbound:*"})
        check(reply.get("error", {}).get("code") == -32003, f"-32003 already subscribed: {reply}")
    finally:
        for peer in peers:
            await peer.close()


def main():
    if len(sys.argv) != 2:
        print("usage: bus_client.py ws://HOST:PORT", file=sys.stderr)
        return 2
    try:
        asyncio.run(asyncio.wait_for(run(sys.argv[1]), 60))
    except CheckFailed as e:
        print(f"python interop FAILED: {e}", file=sys.stderr)
        return 1
    except (asyncio.TimeoutError, OSError, websockets.WebSocketException) as e:
        print(f"python interop FAILED: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    print(f"python interop ok: {passed()} checks passed (websockets {websockets.__version__})")
    return 0


if __name__ == "__main__":
    sys.exit(main())

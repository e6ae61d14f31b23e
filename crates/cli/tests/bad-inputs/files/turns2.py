# An external strategy of protocol version 2 that misbehaves as its first argument says;
# otherwise it keeps. Every line it writes carries a call id: the request's, unless the mode
# says otherwise.
import json, sys, time

mode = sys.argv[1]

def send(obj, call_id):
    if call_id is not None:
        obj = dict(obj, call_id=call_id)
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()

init = json.loads(sys.stdin.readline())
send({"type": "ready", "name": "turns2", "version": "1", "protocol": 2}, init["call_id"])
calls = 0
for line in sys.stdin:
    msg = json.loads(line)
    call_id = msg.get("call_id")
    if msg["type"] in ("begin", "end"):
        send({"type": "ok"}, call_id)
        if msg["type"] == "begin" and mode == "late":
            # Out of turn: a `compact` nobody asked for, 50 ms after `begin` (with its id).
            time.sleep(0.05)
            send({"type": "compact", "context": [{"keep": [0, 1]}]}, call_id)
        continue
    if msg["type"] != "call":
        continue
    calls += 1
    if mode == "late":
        # Every answer 50 ms late: without ids, each would answer the call after its own.
        time.sleep(0.05)
        send({"type": "keep"}, call_id)
    elif mode == "wrong-id":
        send({"type": "keep"}, "call-%d" % calls)
    elif mode == "no-id":
        send({"type": "keep"}, None)
    elif mode == "two-answers" and calls == 2:
        send({"type": "keep"}, call_id)
        send({"type": "keep"}, call_id)
    else:
        send({"type": "keep"}, call_id)

# An external strategy that misbehaves as its first argument says; otherwise it keeps.
import json, sys, time

mode = sys.argv[1]

def send(*objs):
    sys.stdout.write("".join(json.dumps(o) + "\n" for o in objs))
    sys.stdout.flush()

sys.stdin.readline()
if mode == "early-compact":
    send({"type": "ready", "name": "turns", "version": "1"}, {"type": "compact", "context": [{"keep": [0, 1]}]})
else:
    send({"type": "ready", "name": "turns", "version": "1"})
calls = 0
for line in sys.stdin:
    msg = json.loads(line)
    if msg["type"] != "call":
        continue
    calls += 1
    if calls == 2 and mode == "two-answers":
        send({"type": "keep"}, {"type": "keep"})
        time.sleep(0.5)
        continue
    if calls == 2 and mode == "huge-line":
        sys.stdout.write("x" * (2 * 1024 * 1024))
        sys.stdout.flush()
        time.sleep(30)
    send({"type": "keep"})

#!/usr/bin/env python3
"""serve_limits.py - clients that try to use up `coli serve`'s connections,
for tests/test_serve_limits.sh: sockets that connect and send nothing,
requests dripped a byte at a time, many connections from one address, and
more waiting connections than the server keeps room for. Each attacker
binds its own loopback address (127.0.0.0/8 is all local on Linux), so that
the per-address cap and the normal client (127.0.0.1) are told apart.

usage: serve_limits.py SCENARIO PORT [IDLE_S REQUEST_S]
Prints "ok: ..." or "FAIL: ..." a check; exits 1 when one failed.
"""
import http.client
import json
import socket
import sys
import time

failures = 0


def check(ok, what, detail=""):
    global failures
    if ok:
        print("ok: " + what)
    else:
        failures += 1
        print("FAIL: " + what + (": " + detail if detail else ""))


def connect(port, src, timeout=5):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(timeout)
    s.bind((src, 0))
    s.connect(("127.0.0.1", port))
    return s


def state(s):
    """'open' (nothing to read, not closed), 'closed', or the bytes sent."""
    s.setblocking(False)
    try:
        got = s.recv(65536)
    except BlockingIOError:
        return "open"
    except ConnectionResetError:
        return "closed"
    finally:
        s.setblocking(True)
    if not got:
        return "closed"
    # what came may be followed by the end: read it all
    s.settimeout(2)
    try:
        while True:
            more = s.recv(65536)
            if not more:
                break
            got += more
    except (socket.timeout, ConnectionResetError):
        pass
    return got


def settle(socks, want, limit=10):
    """The states of socks once they are want (a list of "open" and
    "closed"), or as they are when limit seconds have passed: a loaded
    machine may take a while to accept and close."""
    t0 = time.monotonic()
    got = {}
    while True:
        st = []
        for i, s in enumerate(socks):
            if i not in got:
                x = state(s)
                if x != "open":
                    got[i] = "closed" if x == "closed" or not x else x
            st.append(got.get(i, "open"))
        if st == want or time.monotonic() - t0 > limit:
            return st
        time.sleep(0.05)


def wait_closed(socks, limit):
    """Seconds until every socket of socks is closed by the server (what
    each got, in order), or None past limit."""
    t0 = time.monotonic()
    got = [None] * len(socks)
    while time.monotonic() - t0 < limit:
        for i, s in enumerate(socks):
            if got[i] is None:
                st = state(s)
                if st != "open":
                    got[i] = st
        if all(g is not None for g in got):
            return time.monotonic() - t0, got
        time.sleep(0.05)
    return None, got


def request(port, method, path, body=None, timeout=30):
    """(status, seconds, body) of one request on a connection of its own."""
    t0 = time.monotonic()
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        hdr = {"Content-Type": "application/json"} if body is not None else {}
        c.request(method, path, body=json.dumps(body) if body is not None else None, headers=hdr)
        r = c.getresponse()
        data = r.read()
        return r.status, time.monotonic() - t0, data
    except OSError as e:
        return 0, time.monotonic() - t0, str(e).encode()
    finally:
        c.close()


COMPLETION = {"prompt": "In the beginning", "max_tokens": 8, "temperature": 0}


def normal_round(port):
    """A /health and a short completion: (worst seconds, failures)."""
    worst, bad = 0.0, []
    for method, path, body in (("GET", "/health", None), ("POST", "/v1/completions", COMPLETION)):
        st, secs, data = request(port, method, path, body)
        worst = max(worst, secs)
        if st != 200 or (body and b'"finish_reason"' not in data):
            bad.append("%s %s: %d %s" % (method, path, st, data[:200]))
    return worst, bad


def metric(port, name):
    st, _, data = request(port, "GET", "/metrics")
    for line in data.decode().splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return None


def idle_and_drip(port, idle_s, request_s):
    """200 idle sockets and 20 dripping requests stay open while normal
    requests are answered in their usual time; then the server closes
    them: the idle ones when idle_s passed, the dripping ones with a 408
    when request_s passed since their first line."""
    base = [normal_round(port) for _ in range(5)]
    usual = max(w for w, _ in base)
    check(all(not b for _, b in base), "before: normal requests are answered",
          "; ".join(x for _, b in base for x in b))

    t0 = time.monotonic()
    idle = [connect(port, "127.0.0.%d" % (2 + i // 50)) for i in range(200)]
    drip = []
    for i in range(20):
        s = connect(port, "127.0.0.6")
        s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        drip.append(s)

    # while they are held: normal requests, dripping one byte a round
    rounds = []
    while time.monotonic() - t0 < min(idle_s, request_s) * 0.6:
        for s in drip:
            try:
                s.send(b"X")
            except OSError:
                pass
        rounds.append(normal_round(port))
        time.sleep(0.1)
    worst = max(w for w, _ in rounds)
    bad = [x for _, b in rounds for x in b]
    check(not bad and len(rounds) >= 3,
          "%d normal rounds answered while 200 idle sockets and 20 dripping requests are open" % len(rounds),
          "; ".join(bad[:3]))
    # "their usual time": a generous bound (the machine may be loaded),
    # far below the seconds a frozen server would take
    bound = max(2.0, 5 * usual)
    check(worst <= bound, "each within %.2f s (usual %.3f s, worst seen %.3f s)" % (bound, usual, worst))
    still = [state(s) for s in idle + drip]
    check(all(x == "open" for x in still), "the 220 attacking sockets were all still open meanwhile",
          "%d closed early" % sum(x != "open" for x in still))
    waiting = metric(port, "coli_connections_waiting")
    check(waiting is not None and waiting >= 220, "/metrics counts them waiting (%s)" % waiting)

    secs, got = wait_closed(idle, idle_s + 3)
    check(secs is not None and all(g == "closed" for g in got),
          "the server closes the idle sockets after --idle-timeout %g s (the last %.1f s after they opened)"
          % (idle_s, time.monotonic() - t0))
    secs, got = wait_closed(drip, request_s + 3)
    answered = [g for g in got if isinstance(g, bytes)]
    check(secs is not None and len(answered) == len(drip) and
          all(g.startswith(b"HTTP/1.1 408 ") and b'"code":408' in g and b"--request-timeout" in g for g in answered),
          "each dripping request gets 408 with the error envelope after --request-timeout %g s" % request_s,
          repr(got[:2]))
    n_idle = metric(port, 'coli_connections_closed_total{reason="idle"}')
    n_timeout = metric(port, 'coli_connections_closed_total{reason="request_timeout"}')
    check(n_idle is not None and n_idle >= 200 and n_timeout is not None and n_timeout >= 20,
          "/metrics counts them: %s idle, %s request_timeout" % (n_idle, n_timeout))
    worst, bad = normal_round(port)
    check(not bad, "normal requests are answered afterwards", "; ".join(bad))
    for s in idle + drip:
        s.close()


def client_cap(port, cap):
    """One address past --max-client-connections: its oldest idle
    connection makes room; when none of its connections is idle, a new
    one is refused; other addresses are not touched."""
    other = connect(port, "127.0.0.12")
    socks = []
    for i in range(cap + 4):
        socks.append(connect(port, "127.0.0.10"))
        time.sleep(0.03)  # accepted in this order
    st = settle(socks, ["closed"] * 4 + ["open"] * cap)
    check(st[:4] == ["closed"] * 4 and st[4:] == ["open"] * cap,
          "%d idle connections of one address with a cap of %d: the 4 oldest are closed" % (cap + 4, cap), repr(st))
    check(state(other) == "open", "another address's idle connection stays open")
    drip = []
    for i in range(cap):
        s = connect(port, "127.0.0.11")
        s.sendall(b"GET /health HTTP/1.1\r\n")
        drip.append(s)
        time.sleep(0.03)
    # wait until the server has them all (its count of waiting ones)
    t0 = time.monotonic()
    while (metric(port, "coli_connections_waiting") or 0) < 2 * cap + 1 and time.monotonic() - t0 < 10:
        time.sleep(0.05)
    extra = connect(port, "127.0.0.11")
    st = settle([extra], ["closed"])[0]
    check(st == "closed",
          "one more while all %d are sending a request is refused (closed unanswered)" % cap, repr(st))
    check(all(state(s) == "open" for s in drip), "the address's requests in progress are not touched")
    st, _, data = request(port, "GET", "/health")
    check(st == 200, "a normal client is still answered", repr(data[:200]))
    refused = metric(port, "coli_connections_refused_total")
    n_client = metric(port, 'coli_connections_closed_total{reason="client_limit"}')
    check(refused is not None and refused >= 1 and n_client is not None and n_client >= 4,
          "/metrics counts %s refused and %s closed for the cap" % (refused, n_client))
    for s in socks + drip + [extra, other]:
        s.close()


def crowded(port, room):
    """More waiting connections than --max-connections leaves room for:
    the oldest waiting ones are closed, a request already complete (a
    stream) is never closed, and a new client still gets in."""
    stream = connect(port, "127.0.0.1", timeout=30)
    body = json.dumps({"prompt": "In the beginning", "max_tokens": 60, "temperature": 0, "stream": True})
    stream.sendall(("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                    "Content-Length: %d\r\n\r\n%s" % (len(body), body)).encode())
    first = stream.recv(4096)
    check(first.startswith(b"HTTP/1.1 200"), "a stream is running", repr(first[:100]))
    socks = []
    for i in range(room):
        socks.append(connect(port, "127.0.0.%d" % (20 + i % 4)))
        time.sleep(0.02)
    # no /metrics to see them in: its connection would be one more
    time.sleep(1.0)
    check(all(state(s) == "open" for s in socks), "%d waiting connections fill the room for them" % room)
    more = [connect(port, "127.0.0.30") for _ in range(3)]
    st = settle(socks, ["closed"] * 3 + ["open"] * (room - 3))
    check(st[:3] == ["closed"] * 3 and all(x == "open" for x in st[3:]) and all(state(s) == "open" for s in more),
          "3 more: the 3 oldest waiting are closed to make room", repr(st[:5]))
    status, _, data = request(port, "POST", "/v1/completions", COMPLETION)
    check(status == 200, "a new client's request is answered though the room is full", repr(data[:200]))
    rest = first
    stream.settimeout(30)
    while b"data: [DONE]" not in rest:
        got = stream.recv(65536)
        if not got:
            break
        rest += got
    check(b"data: [DONE]" in rest and b'"finish_reason":"length"' in rest,
          "the stream, a complete request, was never closed: it ends with [DONE]")
    for s in socks + more + [stream]:
        s.close()


def main():
    scenario, port = sys.argv[1], int(sys.argv[2])
    if scenario == "idle-and-drip":
        idle_and_drip(port, float(sys.argv[3]), float(sys.argv[4]))
    elif scenario == "client-cap":
        client_cap(port, int(sys.argv[3]))
    elif scenario == "crowded":
        crowded(port, int(sys.argv[3]))
    else:
        sys.exit("unknown scenario " + scenario)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()

"""The upstream's network through a real `lam serve` (and `lam run`), against
a real nginx: how lam trusts an upstream, what it sends again, and what it says
when a proxy refuses (docs/serve.md, "Trusting the upstream").

- nginx serves HTTP/2 over TLS with a certificate of a private CA (made here
  with openssl), in front of a loopback stub that streams SSE answers.
- Trust: refused without the CA (502 naming --upstream-ca and SSL_CERT_FILE);
  accepted with SSL_CERT_FILE, with --upstream-ca, with the system's store
  (only with --system: the CA goes into /usr/local/share/ca-certificates and
  out again), and under `lam run` with NODE_EXTRA_CA_CERTS.
- GOAWAY: nginx with `keepalive_requests 5` under bursts of 20 concurrent
  streaming requests (60 in all), and with 100 under bursts of 7 (140): no
  request fails, each is answered once.
- A proxy that answers 407, to a CONNECT and to a forwarded request: a 502
  `lam_proxy_refused` naming the proxy and its status.

usage: net_test.py LAM_BINARY WORK_DIR [--nginx PATH] [--system]
"""

import argparse
import http.client
import http.server
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

EVENTS = [f"data: {k}\n\n".encode() for k in range(5)] + [b"data: [DONE]\n\n"]
STREAMED = b"".join(EVENTS)
RESULTS = {"passed": 0, "failed": 0}


def check(name, ok, detail=""):
    RESULTS["passed" if ok else "failed"] += 1
    print(f"{'ok  ' if ok else 'FAIL'} {name}{': ' + detail if detail else ''}", flush=True)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ---------------------------------------------------------------- the stub behind nginx

class Stub(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    answered = 0
    lock = threading.Lock()

    def log_message(self, *a):
        pass

    def do_GET(self):
        body = b'{"object":"list","data":[]}'
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self):
        self.rfile.read(int(self.headers.get("content-length", 0)))
        with Stub.lock:
            Stub.answered += 1
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        for ev in EVENTS:
            self.wfile.write(b"%x\r\n%s\r\n" % (len(ev), ev))
            self.wfile.flush()
            time.sleep(0.002)
        self.wfile.write(b"0\r\n\r\n")


def start_stub():
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Stub)
    srv.daemon_threads = True
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv.server_address[1]


class Refuser(http.server.BaseHTTPRequestHandler):
    """An HTTP proxy that wants credentials it never gets: 407 to everything."""
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def refuse(self):
        self.send_response(407, "Proxy Authentication Required")
        self.send_header("proxy-authenticate", 'Basic realm="lam test"')
        self.send_header("content-length", "0")
        self.send_header("connection", "close")
        self.end_headers()

    do_CONNECT = do_GET = do_POST = refuse


def start_refuser():
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Refuser)
    srv.daemon_threads = True
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv.server_address[1]


# ---------------------------------------------------------------- certificates and nginx

def make_ca(work):
    """A private CA and a certificate it signed for localhost and 127.0.0.1."""
    def ssl(*args):
        subprocess.run(["openssl", *args], check=True, capture_output=True, cwd=work)
    ssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=lam test CA",
        "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign",
        "-keyout", "ca.key", "-out", "ca.pem")
    ssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=localhost", "-keyout", "leaf.key", "-out", "leaf.csr")
    (work / "leaf.ext").write_text("subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n")
    ssl("x509", "-req", "-in", "leaf.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial", "-days", "2",
        "-extfile", "leaf.ext", "-out", "leaf.pem")
    return work / "ca.pem"


NGINX = """
worker_processes 1;
daemon off;
pid {work}/nginx.pid;
error_log {work}/nginx-error.log warn;
{user}
events {{ worker_connections 1024; }}
http {{
  access_log off;
  client_body_temp_path {work}/tmp/body;
  proxy_temp_path {work}/tmp/proxy;
  fastcgi_temp_path {work}/tmp/fastcgi;
  uwsgi_temp_path {work}/tmp/uwsgi;
  scgi_temp_path {work}/tmp/scgi;
  ssl_certificate {work}/leaf.pem;
  ssl_certificate_key {work}/leaf.key;
  proxy_buffering off;
  proxy_http_version 1.1;
  server {{ listen 127.0.0.1:{five} ssl http2; keepalive_requests 5; location / {{ proxy_pass http://127.0.0.1:{stub}; }} }}
  server {{ listen 127.0.0.1:{hundred} ssl http2; keepalive_requests 100; location / {{ proxy_pass http://127.0.0.1:{stub}; }} }}
}}
"""


def start_nginx(nginx, work, stub):
    five, hundred = free_port(), free_port()
    (work / "tmp").mkdir()
    user = "user root;" if os.geteuid() == 0 else ""
    conf = work / "nginx.conf"
    conf.write_text(NGINX.format(work=work, user=user, five=five, hundred=hundred, stub=stub))
    p = subprocess.Popen([nginx, "-p", str(work), "-c", str(conf), "-e", str(work / "nginx-error.log")],
                         stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    for _ in range(100):
        try:
            socket.create_connection(("127.0.0.1", hundred), 0.2).close()
            socket.create_connection(("127.0.0.1", five), 0.2).close()
            return p, five, hundred
        except OSError:
            if p.poll() is not None:
                raise SystemExit(f"nginx exited with {p.returncode}: {(work / 'nginx-error.log').read_text()}")
            time.sleep(0.05)
    raise SystemExit("nginx did not start")


# ---------------------------------------------------------------- lam

def clean_env(**extra):
    """This environment without proxies or CA settings, plus `extra`."""
    drop = {"SSL_CERT_FILE", "SSL_CERT_DIR", "NODE_EXTRA_CA_CERTS", "NO_PROXY", "no_proxy"}
    drop |= {v for v in os.environ if v.lower() in ("http_proxy", "https_proxy", "all_proxy")}
    env = {k: v for k, v in os.environ.items() if k not in drop}
    env.update(extra)
    return env


def request(port, method, path, body=None, timeout=30):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        headers = {"content-type": "application/json"} if body is not None else {}
        c.request(method, path, body=json.dumps(body) if body is not None else None, headers=headers)
        r = c.getresponse()
        return r.status, r.read()
    finally:
        c.close()


class Serve:
    """`lam serve` in front of `upstream` with `env`, on a free loopback port."""

    def __init__(self, lam, work, name, upstream, env, extra=()):
        self.port = free_port()
        self.log = open(work / f"{name}.log", "w")
        cmd = [lam, "serve", "--listen", f"127.0.0.1:{self.port}", "--upstream", upstream,
               "--store", str(work / name), "--encoder", "hashing", *extra]
        self.p = subprocess.Popen(cmd, stderr=self.log, env=env)
        for _ in range(300):
            try:
                request(self.port, "GET", "/lam/stats", timeout=1)
                return
            except OSError:
                if self.p.poll() is not None:
                    raise SystemExit(f"lam serve exited with {self.p.returncode}: {(work / f'{name}.log').read_text()}")
                time.sleep(0.05)
        raise SystemExit("lam serve did not start")

    def stats(self):
        return json.loads(request(self.port, "GET", "/lam/stats")[1])

    def stop(self):
        self.p.send_signal(signal.SIGTERM)
        self.p.wait(30)
        self.log.close()


def error_of(body):
    try:
        e = json.loads(body)["error"]
        return e["type"], e["message"]
    except (ValueError, KeyError, TypeError):
        return None, body.decode(errors="replace")[:300]


# ---------------------------------------------------------------- the cases

def trust(lam, work, ca, port, system):
    upstream = f"https://localhost:{port}"
    s = Serve(lam, work, "untrusted", upstream, clean_env())
    status, body = request(s.port, "GET", "/v1/models")
    kind, msg = error_of(body)
    s.stop()
    check("without the CA: 502 naming the ways to trust it", status == 502 and "UnknownIssuer" in msg
          and "--upstream-ca FILE" in msg and "SSL_CERT_FILE" in msg and "update-ca-certificates" in msg, f"{status} {kind}: {msg}")
    for name, env, extra in [("SSL_CERT_FILE", clean_env(SSL_CERT_FILE=str(ca)), ()),
                             ("SSL_CERT_DIR", clean_env(SSL_CERT_DIR=str(rehashed(work, ca))), ()),
                             ("--upstream-ca", clean_env(), ("--upstream-ca", str(ca)))]:
        s = Serve(lam, work, name.strip("-").lower(), upstream, env, extra)
        status, body = request(s.port, "POST", "/v1/chat/completions", chat(0))
        s.stop()
        check(f"with {name}: answered", status == 200 and body == STREAMED, f"{status} {body[:200]!r}")
    if not system:
        print("SKIPPED: the system store case (it installs a CA with update-ca-certificates: as root, with LAM_TEST_SYSTEM=1, as CI does)", flush=True)
        return
    installed = Path("/usr/local/share/ca-certificates") / f"lam-test-ca-{os.getpid()}.crt"
    shutil.copy(ca, installed)
    try:
        subprocess.run(["update-ca-certificates"], check=True, capture_output=True)
        s = Serve(lam, work, "system", upstream, clean_env())
        status, body = request(s.port, "POST", "/v1/chat/completions", chat(0))
        s.stop()
        check("with the system's store (update-ca-certificates): answered", status == 200 and body == STREAMED, f"{status} {body[:200]!r}")
    finally:
        installed.unlink()
        # update-ca-certificates drops the CA from the bundle, not its links: those go here.
        certs = Path("/etc/ssl/certs")
        for link in certs.iterdir():
            if link.is_symlink() and os.readlink(link) in (str(installed), f"{installed.stem}.pem"):
                link.unlink()
        subprocess.run(["update-ca-certificates"], check=True, capture_output=True)


def rehashed(work, ca):
    """A directory holding `ca` under its OpenSSL subject hash (SSL_CERT_DIR's layout)."""
    d = work / "certs"
    d.mkdir(exist_ok=True)
    h = subprocess.run(["openssl", "x509", "-hash", "-noout", "-in", str(ca)], check=True, capture_output=True, text=True).stdout.strip()
    shutil.copy(ca, d / f"{h}.0")
    return d


AGENT = r"""
import os, sys, urllib.request
with urllib.request.urlopen(os.environ["ANTHROPIC_BASE_URL"] + "/v1/models", timeout=20) as r:
    sys.exit(0 if r.status == 200 else 1)
"""


def lam_run(lam, work, ca, port):
    """`lam run` trusts the CA its agent was given in NODE_EXTRA_CA_CERTS (and only then)."""
    for given in (True, False):
        env = clean_env(NODE_EXTRA_CA_CERTS=str(ca)) if given else clean_env()
        cmd = [lam, "run", "--store", str(work / f"run-{given}"), "--upstream", f"https://localhost:{port}",
               "--", sys.executable, "-c", AGENT]
        rc = subprocess.run(cmd, env=env, capture_output=True, timeout=120).returncode
        want = 0 if given else 1
        check(f"lam run {'with' if given else 'without'} NODE_EXTRA_CA_CERTS: the agent's request {'answered' if given else 'refused'}", rc == want, f"exit {rc}")


def chat(k):
    return {"model": "m", "stream": True, "messages": [{"role": "user", "content": f"request {k}"}]}


def burst(port, n):
    """`n` requests at once (every fourth a GET /v1/models): the failures."""
    gate = threading.Barrier(n)

    def one(k):
        gate.wait()
        try:
            if k % 4 == 3:
                status, body = request(port, "GET", "/v1/models")
                return None if status == 200 else f"{status} {error_of(body)}"
            status, body = request(port, "POST", "/v1/chat/completions", chat(k))
            return None if status == 200 and body == STREAMED else f"{status} {error_of(body)}"
        except OSError as e:
            return repr(e)

    with ThreadPoolExecutor(n) as pool:
        return [f for f in pool.map(one, range(n)) if f]


def goaway(lam, work, ca, port, every, bursts, size):
    s = Serve(lam, work, f"goaway-{every}", f"https://localhost:{port}", clean_env(), ("--upstream-ca", str(ca)))
    before = Stub.answered
    failed = []
    for _ in range(bursts):
        failed += burst(s.port, size)
        time.sleep(0.05)
    posts = bursts * sum(1 for k in range(size) if k % 4 != 3)
    answered = Stub.answered - before
    retries = s.stats().get("upstream_retries")
    s.stop()
    total = bursts * size
    detail = f"{len(failed)} of {total} failed, lam sent {retries} again, the stub answered {answered} of {posts} POSTs"
    if failed:
        detail += f"; first: {failed[0]}"
    check(f"nginx keepalive_requests {every}, {bursts} bursts of {size}: none failed", not failed, detail)
    check(f"nginx keepalive_requests {every}: each POST reached the stub once", answered == posts, detail)
    if every < size:
        check(f"nginx keepalive_requests {every}: its GOAWAYs came, and lam sent requests again", (retries or 0) > 0, detail)


def refused_by_proxy(lam, work):
    proxy = start_refuser()
    for upstream, var in (("https://api.upstream.invalid", "HTTPS_PROXY"), ("http://api.upstream.invalid", "HTTP_PROXY")):
        s = Serve(lam, work, f"proxy-{var}", upstream, clean_env(**{var: f"http://127.0.0.1:{proxy}"}))
        status, body = request(s.port, "POST", "/v1/chat/completions", chat(0))
        s.stop()
        kind, msg = error_of(body)
        ok = status == 502 and kind == "lam_proxy_refused" and f"http://127.0.0.1:{proxy}" in msg and "407" in msg and f"{var}=http://USER:PASSWORD@" in msg
        check(f"a proxy's 407 ({var}): lam's own 502 naming the proxy", ok, f"{status} {kind}: {msg}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("lam")
    ap.add_argument("work", type=Path)
    ap.add_argument("--nginx", default="nginx")
    ap.add_argument("--system", action="store_true", help="also install the CA in the system's store (root)")
    a = ap.parse_args()
    lam, work = str(Path(a.lam).resolve()), a.work.resolve()
    ca = make_ca(work)
    stub = start_stub()
    nginx, five, hundred = start_nginx(a.nginx, work, stub)
    started = time.time()
    try:
        trust(lam, work, ca, hundred, a.system)
        lam_run(lam, work, ca, hundred)
        goaway(lam, work, ca, five, 5, 3, 20)
        goaway(lam, work, ca, hundred, 100, 20, 7)
        refused_by_proxy(lam, work)
    finally:
        nginx.send_signal(signal.SIGQUIT)
        nginx.wait(10)
    print(f"network tests ({time.time() - started:.1f} s): {RESULTS['passed']} passed, {RESULTS['failed']} failed", flush=True)
    sys.exit(1 if RESULTS["failed"] else 0)


if __name__ == "__main__":
    main()

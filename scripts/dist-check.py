#!/usr/bin/env python3
"""`cargo xtask dist --check`: the artifacts of `cargo xtask dist` installed the
way users install them, in fresh environments, with no cargo on the PATH.

    dist-check.py --dist DIR --reference BIN --tools VENV_BIN

Checks, each printed PASS or FAIL, then 'N passed, M failed':
- SHA256SUMS matches the files; auditwheel names a manylinux tag for both
  binary wheels; the wheel, the npm platform package and the .tar.gz carry
  one binary.
- Four installs into a fresh temporary root (its own HOME and an empty
  LAM_HOME, so nothing installed before is found): pip into a venv, `uv tool
  install`, `pipx install` (each from the wheel, its dependency from DIR, no
  index) and `npm i -g --offline` from the two tarballs into a fresh prefix.
- With each: `lam --version`, `lam replay` on the bundled example (--json,
  timings left out), `lam compact` on it (the wheel installs with the
  default BERT encoder, which must find lam-ctx-model in its own
  environment; npm with --encoder hashing) and `lam run -- claude` (a
  scripted Claude Code against a loopback upstream: exit code and the bytes
  the upstream received), each equal to BIN's.
- `import lam` from the lam-ctx-py wheel in the pip venv.
- The time from nothing installed to the first `lam replay` result, per
  route (the wheels at hand; printed, not checked).

Standard library only (the tools venv holds uv, pipx and auditwheel).
"""

from __future__ import annotations

import argparse
import hashlib
import http.server
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "edit-session.jsonl"
RESULTS: list[tuple[str, bool, str]] = []

# A scripted Claude Code (as lam/tests/run.rs's): three growing /v1/messages
# requests, a repeated test log among the tool results, then exit 3.
FAKE_CLAUDE = r'''#!/usr/bin/env python3
import json, os, sys, urllib.request
base = os.environ["ANTHROPIC_BASE_URL"]
log = "".join("tests/test_mod_%d.py::test_case_%d PASSED [%d%%]\n" % (i, i, i) for i in range(60))
logs = [log, log.replace("test_case_7 PASSED", "test_case_7 FAILED"), log]
eph = {"type": "ephemeral"}
for n in range(3):
    msgs = [{"role": "user", "content": [{"type": "text", "text": "Fix the failing test."}]}]
    for k in range(n + 1):
        msgs.append({"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_%d" % k, "name": "Bash", "input": {"command": "pytest -q"}}]})
        msgs.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_%d" % k, "content": logs[k]}]})
    for m in msgs[-2:]:
        m["content"][-1]["cache_control"] = eph
    body = {"model": "claude-sonnet-4-5", "max_tokens": 1024, "stream": False,
            "system": [{"type": "text", "text": "You are Claude Code.", "cache_control": eph}],
            "tools": [{"name": "Bash", "description": "Run a command", "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}}}],
            "messages": msgs}
    req = urllib.request.Request(base + "/v1/messages", data=json.dumps(body).encode(), headers={"content-type": "application/json", "x-api-key": "k"})
    with urllib.request.urlopen(req) as r:
        assert r.status == 200
        json.load(r)
sys.exit(3)
'''

REPLY = b'{"id":"msg_1","type":"message","role":"assistant","content":[{"type":"text","text":"ok"}],"stop_reason":"end_turn","usage":{"input_tokens":1,"output_tokens":1}}'


class Upstream(http.server.BaseHTTPRequestHandler):
    """Answers every POST with REPLY and records (path, body)."""

    seen: list[tuple[str, bytes]] = []
    protocol_version = "HTTP/1.1"

    def do_POST(self):  # noqa: N802 (http.server's name)
        body = self.rfile.read(int(self.headers.get("content-length") or 0))
        Upstream.seen.append((self.path, body))
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(REPLY)))
        self.end_headers()
        self.wfile.write(REPLY)

    def log_message(self, *args):
        pass


def check(name: str, ok: bool, detail: str = "") -> bool:
    RESULTS.append((name, ok, detail))
    short = detail.strip() if detail and "\n" not in detail.strip() and len(detail.strip()) < 100 else ""
    print(f"{'PASS' if ok else 'FAIL'} {name}" + (f": {detail}" if detail and not ok else (f" ({short})" if short else "")), flush=True)
    return ok


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def one(dist: Path, pattern: str) -> Path:
    found = sorted(dist.glob(pattern))
    if len(found) != 1:
        raise SystemExit(f"dist-check: expected one {pattern} in {dist}, found {[p.name for p in found]}")
    return found[0]


def clean_path() -> list[str]:
    """The PATH's folders less every one holding cargo or rustc."""
    return [d for d in os.environ.get("PATH", "").split(os.pathsep) if d and not any((Path(d) / t).exists() for t in ("cargo", "rustc"))]


def untimed(v):
    """A JSON report without its timings (keys in ms or us, and seconds)."""
    if isinstance(v, dict):
        return {k: untimed(x) for k, x in v.items() if not re.search(r"(_ms|_us|_secs?|_s)(_p\d+)?$|^(secs|seconds|elapsed)", k)}
    if isinstance(v, list):
        return [untimed(x) for x in v]
    return v


class Lam:
    """Runs one installed `lam` with a fixed, fresh environment."""

    def __init__(self, name: str, exe: Path, env: dict[str, str]):
        self.name, self.exe, self.env = name, exe, env

    def run(self, args: list[str], env: dict[str, str] | None = None, timeout: int = 300) -> subprocess.CompletedProcess:
        e = dict(self.env, **(env or {}))
        return subprocess.run([str(self.exe), *args], env=e, cwd=ROOT, capture_output=True, timeout=timeout, stdin=subprocess.DEVNULL)

    def observe(self, work: Path, compact_args: list[str]) -> dict:
        """What every install must agree on with the reference."""
        out: dict = {}
        v = self.run(["--version"])
        out["version"] = (v.returncode, v.stdout.decode().strip())
        r = self.run(["replay", str(EXAMPLE), "--json"])
        out["replay"] = (r.returncode, untimed(json.loads(r.stdout)) if r.returncode == 0 else r.stderr.decode()[-2000:])
        c = self.run(["compact", str(EXAMPLE), "--json", "--no-cache", *compact_args])
        out["compact"] = (c.returncode, untimed([json.loads(l) for l in c.stdout.decode().splitlines() if l.startswith("{")]) if c.returncode == 0 else c.stderr.decode()[-2000:])
        out["run"] = self.lam_run(work)
        return out

    def lam_run(self, work: Path):
        """`lam run -- claude` with the scripted agent: exit code, requests upstream."""
        agents = work / "agents"
        agents.mkdir(parents=True, exist_ok=True)
        fake = agents / "claude"
        fake.write_text(FAKE_CLAUDE)
        fake.chmod(0o755)
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Upstream)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        Upstream.seen = []
        try:
            env = {"PATH": f"{agents}{os.pathsep}{self.env['PATH']}", "CLAUDE_CONFIG_DIR": str(work / "claude-home")}
            r = self.run(["run", "--store", str(work / "store"), "--upstream", f"http://127.0.0.1:{server.server_port}", "--", "claude"], env=env)
        finally:
            server.shutdown()
        err = r.stderr.decode()
        summary = re.search(r"total: .*", err)
        return (r.returncode, summary.group(0) if summary else err[-2000:], [(p, hashlib.sha256(b).hexdigest()) for p, b in Upstream.seen])


def compare(name: str, got: dict, want: dict) -> None:
    for key in want:
        same = got.get(key) == want[key]
        detail = "" if same else f"got {str(got.get(key))[:600]!r}, want {str(want[key])[:600]!r}"
        check(f"{name}: lam {key} as the build tree's", same, detail)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dist", type=Path, required=True)
    ap.add_argument("--reference", type=Path, required=True)
    ap.add_argument("--tools", type=Path, required=True)
    ap.add_argument("--keep", action="store_true", help="keep the temporary root")
    a = ap.parse_args()
    dist, ref, tools = a.dist.resolve(), a.reference.resolve(), a.tools.resolve()

    wheel = one(dist, "lam_ctx-*.whl")
    model_wheel = one(dist, "lam_ctx_model-*.whl")
    py_wheel = one(dist, "lam_ctx_py-*.whl")
    npm_main = one(dist, "lam-ctx-[0-9]*.tgz")
    npm_plat = one(dist, "lam-ctx-*-*-[0-9]*.tgz")
    tarball = one(dist, "lam-*.tar.gz")

    # The sums and the tags.
    sums = dict(reversed(line.split("  ", 1)) for line in (dist / "SHA256SUMS").read_text().splitlines())
    files = sorted(p.name for p in dist.iterdir() if p.is_file() and p.name != "SHA256SUMS")
    check("SHA256SUMS lists every artifact", sorted(sums) == files, f"{sorted(sums)} vs {files}")
    check("SHA256SUMS matches", all(sha256(dist / n) == s for n, s in sums.items() if (dist / n).is_file()))
    for w in (wheel, py_wheel):
        show = subprocess.run([str(tools / "auditwheel"), "show", str(w)], capture_output=True, text=True)
        tag = re.search(r'"(manylinux_\d+_\d+_\w+)"', show.stdout.replace("\n", " "))
        check(f"auditwheel show {w.name}", show.returncode == 0 and tag is not None, (tag.group(1) if tag else show.stdout + show.stderr).strip())

    # One binary everywhere.
    want = sha256(ref)
    with zipfile.ZipFile(wheel) as z:
        inner = [n for n in z.namelist() if re.fullmatch(r"lam_ctx-[^/]+\.data/scripts/lam(\.exe)?", n)]
        in_wheel = hashlib.sha256(z.read(inner[0])).hexdigest() if inner else "none"
    with tarfile.open(npm_plat) as t:
        in_npm = hashlib.sha256(t.extractfile("package/bin/lam").read()).hexdigest()
    with tarfile.open(tarball) as t:
        member = next(m for m in t.getmembers() if m.name.endswith("/lam"))
        in_tar = hashlib.sha256(t.extractfile(member).read()).hexdigest()
    check("the wheel, the npm package and the .tar.gz carry one binary", in_wheel == in_npm == in_tar, f"{in_wheel[:12]} {in_npm[:12]} {in_tar[:12]}")
    print(f"     the build tree's {ref} is {'the same file' if want == in_wheel else 'another build (its behaviour is compared below)'}")

    path = clean_path()
    check("no cargo on the checks' PATH", shutil.which("cargo", path=os.pathsep.join(path)) is None)
    tmp = Path(tempfile.mkdtemp(prefix="lam-dist-check-"))
    base_env = {"HOME": str(tmp / "home"), "LAM_HOME": str(tmp / "lam-home"), "LANG": "C.UTF-8", "TMPDIR": str(tmp / "tmp")}
    for d in ("home", "lam-home", "tmp"):
        (tmp / d).mkdir()

    def env_with(bin_dir: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
        return dict(base_env, PATH=os.pathsep.join([str(bin_dir), *path]), **(extra or {}))

    # The reference: the build tree's binary with the developer's own model
    # ($LAM_HOME as set up by scripts/install-model.sh).
    ref_home = os.environ.get("LAM_HOME") or str(Path.home() / ".cache" / "lam")
    reference = Lam("reference", ref, dict(base_env, PATH=os.pathsep.join(path), LAM_HOME=ref_home))
    want_bert = reference.observe(tmp / "ref-bert", [])
    want_hash = dict(want_bert, compact=reference.observe(tmp / "ref-hash", ["--encoder", "hashing"])["compact"])
    check("the reference runs (lam --version, replay, compact, run)", want_bert["version"][0] == 0 and want_bert["replay"][0] == 0 and want_bert["compact"][0] == 0 and want_bert["run"][0] == 3, str(want_bert)[:800])
    print(f"     {want_bert['version'][1]}")

    find = ["--no-index", "--find-links", str(dist)]
    python = shutil.which("python3", path=os.pathsep.join(path)) or sys.executable
    timings: dict[str, float] = {}

    def installed(name: str, install: list[list[str]], bin_dir: Path, env_extra: dict[str, str], compact_args: list[str], want: dict) -> None:
        t0 = time.monotonic()
        for cmd in install:
            r = subprocess.run(cmd, env=env_with(bin_dir, env_extra), capture_output=True, text=True, cwd=tmp)
            if not check(f"{name}: {' '.join(Path(cmd[0]).name if i == 0 else c for i, c in enumerate(cmd))[:160]}", r.returncode == 0, (r.stdout + r.stderr)[-2000:]):
                return
        exe = bin_dir / "lam"
        if not check(f"{name}: lam on the PATH", shutil.which("lam", path=str(bin_dir)) is not None, str(exe)):
            return
        lam = Lam(name, exe, env_with(bin_dir))
        first = lam.run(["replay", str(EXAMPLE)])
        timings[name] = time.monotonic() - t0
        check(f"{name}: first lam replay", first.returncode == 0 and b"billed input through lam" in first.stdout, first.stderr.decode()[-1000:])
        compare(name, lam.observe(tmp / name, compact_args), want)

    venv = tmp / "venv"
    installed("pip venv", [[python, "-m", "venv", str(venv)], [str(venv / "bin" / "pip"), "install", "-q", "--disable-pip-version-check", *find, str(wheel)]], venv / "bin", {}, [], want_bert)
    uv_env = {"UV_TOOL_DIR": str(tmp / "uv" / "tools"), "UV_TOOL_BIN_DIR": str(tmp / "uv" / "bin"), "UV_CACHE_DIR": str(tmp / "uv" / "cache"), "UV_PYTHON_DOWNLOADS": "never", "UV_NO_CONFIG": "1"}
    installed("uv tool", [[str(tools / "uv"), "tool", "install", "-q", "--python", python, *find, str(wheel)]], tmp / "uv" / "bin", uv_env, [], want_bert)
    px_env = {"PIPX_HOME": str(tmp / "pipx" / "home"), "PIPX_BIN_DIR": str(tmp / "pipx" / "bin"), "PIPX_MAN_DIR": str(tmp / "pipx" / "man")}
    installed("pipx", [[str(tools / "pipx"), "install", "--python", python, "--pip-args", " ".join(find), str(wheel)]], tmp / "pipx" / "bin", px_env, [], want_bert)
    prefix = tmp / "npm"
    npm = shutil.which("npm", path=os.pathsep.join(path))
    if check("npm on the PATH", npm is not None):
        installed("npm", [[npm, "install", "-g", "--offline", "--no-audit", "--no-fund", "--loglevel", "error", "--cache", str(tmp / "npm-cache"), "--prefix", str(prefix), str(npm_plat), str(npm_main)]], prefix / "bin", {}, ["--encoder", "hashing"], want_hash)

    # import lam, from its own wheel, in the pip venv.
    r = subprocess.run([str(venv / "bin" / "pip"), "install", "-q", "--disable-pip-version-check", *find, str(py_wheel)], env=env_with(venv / "bin"), capture_output=True, text=True)
    if check("pip install the lam-ctx-py wheel", r.returncode == 0, r.stderr[-1000:]):
        code = (
            "import lam; s = lam.Session(encoder='hashing', store='mem:'); "
            "log = ''.join('tests/test_%d.py::test_case PASSED\\n' % i for i in range(40)); "
            "a = s.admit('pytest', log); b = s.admit('pytest -x', log); "
            "assert a.residual == log and b.residual.startswith('[lam: same output as'), b.residual; "
            "print(len(a.residual), '->', len(b.residual), 'bytes')"
        )
        r = subprocess.run([str(venv / "bin" / "python"), "-c", code], env=env_with(venv / "bin"), capture_output=True, text=True, cwd=tmp)
        check("import lam (lam-ctx-py)", r.returncode == 0, (r.stdout + r.stderr).strip()[-1000:])

    print("install to the first `lam replay` result (wheels at hand, no index): " + ", ".join(f"{k} {v:.1f} s" for k, v in timings.items()))
    if not a.keep:
        shutil.rmtree(tmp, ignore_errors=True)
    else:
        print(f"kept {tmp}")
    failed = sum(1 for _, ok, _ in RESULTS if not ok)
    print(f"dist check: {len(RESULTS) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

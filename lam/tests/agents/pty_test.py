"""`lam run -- claude`, `lam run -- codex`, `lam run -- gemini` and `lam
run -- opencode` driven interactively in a pseudo-terminal, as a person
types, against the scripted upstream (scripted_upstream.py in turns mode:
each typed message carries a marker `LAMTURN-k`), with the pinned real
binaries (issue 56, item 5). Gemini CLI and opencode get
real_agents_test.py's setup (fake keys, fresh homes, opencode's model and
`OPENCODE_DISABLE_MODELS_FETCH`), and Gemini CLI the folder trusted
(`GEMINI_CLI_TRUST_WORKSPACE`) and its shell tool allowed in its settings.

Scenarios, for each agent (a fresh `lam run` in a fresh pty each):

- `two-turns`: a message, the scripted tool run to its answer, a second
  message (a repeated read and a recall through lam's MCP tool), `/exit`
  (Codex and Gemini CLI: `/quit`); the status line is read from the
  screen while idle;
- `esc`: a message whose answer streams slowly, Esc in the middle of it
  (opencode: twice, as it asks), a new message; then Ctrl-C twice;
- `faults`: an answer cut by a dropped connection, then a 500 (each once:
  the agent retries or the user asks again), then Ctrl-D;
- `exit-at-once`: the agent opened and `/exit` typed, no model asked;
- `hang-up`: one turn, then the pty master closed (the session gets SIGHUP);
- `kill`: SIGTERM to `lam run` while an answer streams; if `lam run` is
  still running 20 s later, SIGKILL, and its agent must be gone;
- `resume`: `lam run -- claude --resume ID` / `codex resume ID` / `gemini
  --resume ID` / `opencode --session ID` (ID: the session id the first
  run's requests carry; Gemini CLI's, which they do not carry, from its
  session file), one more turn.

Checks: lam's exit code as documented (the agent's code; 129 on hang-up,
143 on SIGTERM); one proxy conversation per conversation the upstream saw
(`lam run`'s summary lines against the recorded requests, grouped as
real_agents_test.py groups them; each request of Gemini CLI's routing
classifier, which restates the last turns, a conversation of its own),
every earlier item forwarded the same
(real_agents_test.earlier_changed; across a resume: the first run's last
request a prefix of the resumed run's first); termios of the pty slave the
same before and after; the alternate screen left and the cursor shown;
no process of the run left (cwd in the run's folder, or the proxy's port
or the store in its environment or command line); no false "went around
lam" alarm; the way back in through lam printed at exit; lam's figures on
the status line (`lam status-line`'s `lam: tool output A -> B tokens ...`,
read from the screen after the second turn); after a hang-up, the store
flushed. `lam run` runs without `--log`: its log lines, written into the
agent's full-screen interface, garble what the agent draws (Claude Code's
status line among it).

Where a check cannot apply, it is skipped for that agent, saying why
(`skip: ...`):

- the status line, for Gemini CLI and opencode: `lam run` registers none
  for them (neither has a status line command or hook);
- Gemini CLI's `esc`: it takes the interrupted turn out of its history,
  the typed message with it, so the next message opens a conversation of
  its own (checked instead: two agent conversations, the second without
  the interrupted message);
- Gemini CLI's `resume`: it rebuilds the conversation from its session
  file, which keeps no thought signature (a call's `thoughtSignature` is
  gone) and holds one tool result twice, and it writes its session context
  anew; checked instead: the session context the same, and the first run's
  items the same with those rewrites taken off both sides.

The scripted upstream signs its Gemini calls (`thoughtSignature`), as a
Gemini 3 model does: unsigned, Gemini CLI signs the calls of the turn in
progress itself and drops that at the next message, an earlier item
changed that a real model's answers never make it change. Its slow answer
for Gemini CLI never repeats a 50-character stretch (its loop detection
would stop it and ask the user).

Checks that wait on issue 56 work not landed, or on a defect of `lam run`
these runs found, are listed in PENDING (`AGENT: check` for one agent's):
their failures are printed `FAIL (pending: ...)`; any failure makes the
exit code 1. `--only claude,codex,gemini,opencode` (the default) and
`--scenarios a,b` select.

usage: pty_test.py LAM AGENTS_DIR WORK [--encoder hashing|bert] [--only ...] [--scenarios ...]
Prints a line starting `SKIPPED` for each agent not installed, and exits 0
with one when pyte is not installed or no agent asked for is.
"""

import argparse
import fcntl
import json
import os
import re
import select
import signal
import struct
import subprocess
import sys
import tempfile
import termios
import time
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE)]
import real_agents_test as rat  # noqa: E402
import scripted_upstream as su  # noqa: E402

try:
    import pyte
except ImportError:  # the venv (scripts/pty-venv.sh) holds it
    pyte = None

COLS, ROWS = 160, 50
AGENTS = ("claude", "codex", "gemini", "opencode")
KEY = {"claude": "sk-ant-lam-test-not-a-key", "codex": "sk-lam-test-not-a-key"}
EXIT_WORD = {"claude": "/exit", "codex": "/quit", "gemini": "/quit", "opencode": "/exit"}
API = {"claude": "messages", "codex": "responses", "gemini": "gemini", "opencode": "messages"}
# The command line that resumes a session, after the agent's name.
RESUME = {"claude": ["--resume"], "codex": ["resume"], "gemini": ["--resume"], "opencode": ["--session"]}
# What the agent's screen shows once it takes a message.
READY = {"claude": lambda screen: any(line.lstrip().startswith("❯") for line in screen),
         "codex": lambda screen: any(line.lstrip().startswith("›") for line in screen),
         # (and lam's MCP server connected, its count in the footer: a
         # message sent before goes without the server's instructions)
         "gemini": lambda screen: any("Type your message" in line for line in screen) and any("1 MCP server" in line for line in screen),
         # (its agent and model under the input box: its config is loaded)
         "opencode": lambda screen: any("Build · " in line for line in screen)}
ANSI = re.compile(rb"\x1b\[[0-9;?<>=]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[()][0-9A-Za-z]|\x1b[=>78cM]")
SUMMARY_SESSION = re.compile(r"lam run: session (\S+) \(conversation (\d+)\): (\d+) requests")
EXITED = re.compile(r"lam run: `[^`]*` exited with code (-?\d+)")
PROXY = re.compile(r"lam run: proxy http://127\.0\.0\.1:(\d+)")

# Checks that wait on issue 56 work (item): a failure is expected until it lands.
PENDING = {
    "exit code 129 on hang-up": "#56 item 2 (SIGHUP: 128 + signal)",
    "exit code 143 on SIGTERM": "#56 item 2 (SIGTERM: 128 + signal)",
    "terminal restored": "#56 item 2 (terminal mode saved and restored)",
    "alternate screen left": "#56 item 2 (terminal restored)",
    "no false alarm": "#56 item 3 (warn only when a request went around lam)",
    "resume hint through lam": "#56 item 3 (the way back in through lam)",
    "status line shows lam's figures": "#56 item 4 (status line)",
    "store flushed after hang-up": "#56 item 2 (store flushed on SIGHUP)",
    # Defects found by the Gemini CLI and opencode runs go here as `AGENT: check`
    # (that agent's only). The two found first are fixed: SIGTERM now reaches the
    # agent's descendants (Gemini CLI's launcher did not pass it on), and the
    # agent's home keeps one path run after run (it is in Gemini CLI's session context).
}


def pending(name, what):
    """Why the check `what` of the scenario `name` (`AGENT SCENARIO`) may
    fail for now, or None."""
    return PENDING.get(name.split()[0] + ": " + what) or PENDING.get(what)

# The scripts (turns mode: the step is the tool results + turn - 1).
TWO_TURNS = [("shell", "cat app.py"), ("end", None), ("shell", "cat app.py"), ("recall", None), ("end", None),
             ("shell", "cat app.py"), ("end", None)]  # the last two: the resumed run's turn 3
ESC = [("slow", 30), ("shell", "cat app.py"), ("end", None)]
FAULTS = [("shell", "cat app.py"), ("drop", ("end", None)), ("fail", ("shell", "cat app.py")), ("end", None)]
KILL = [("slow", 60)]
ONE = [("shell", "cat app.py"), ("end", None)]


class Timeout(Exception):
    pass


class Tty:
    """A command in a new session whose controlling terminal is a pty;
    what it writes is fed to a pyte screen (which answers the terminal
    queries: cursor position, device attributes) and kept raw."""

    def __init__(self, cmd, cwd, env):
        self.master, self.slave = os.openpty()
        fcntl.ioctl(self.slave, termios.TIOCSWINSZ, struct.pack("HHHH", ROWS, COLS, 0, 0))
        self.before = termios.tcgetattr(self.slave)
        self.screen = pyte.Screen(COLS, ROWS)
        self.stream = pyte.ByteStream(self.screen)
        self.screen.write_process_input = lambda d: self.write(d.encode())
        self.raw = bytearray()
        self.eof = False

        def session():
            os.setsid()
            fcntl.ioctl(0, termios.TIOCSCTTY, 0)

        self.proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdin=self.slave, stdout=self.slave, stderr=self.slave,
                                     preexec_fn=session, close_fds=True)
        self.rc = None

    def write(self, data):
        try:
            os.write(self.master, data)
        except OSError:
            pass

    def pump(self, seconds):
        """Read what comes for `seconds` (feeding the screen)."""
        end = time.monotonic() + seconds
        while True:
            left = end - time.monotonic()
            if left <= 0 or self.master is None:
                return
            if self.eof:
                time.sleep(min(left, 0.05))
                continue
            r, _, _ = select.select([self.master], [], [], min(left, 0.1))
            if r:
                try:
                    d = os.read(self.master, 65536)
                except OSError:
                    d = b""
                if not d:
                    self.eof = True
                    continue
                self.raw.extend(d)
                try:
                    self.stream.feed(d)
                except Exception:  # noqa: BLE001 - pyte on a sequence it does not know; the raw bytes are kept
                    pass

    def until(self, pred, timeout, what):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if pred():
                return
            if self.proc.poll() is not None and not pred():
                self.pump(0.3)
                if pred():
                    return
                raise Timeout(f"{what}: the process exited ({self.proc.returncode}) first\n{self.tail()}")
            self.pump(0.2)
        raise Timeout(f"{what}: not within {timeout} s\n{self.tail()}")

    def screen_text(self):
        return "\n".join(line.rstrip() for line in self.screen.display).rstrip()

    def plain(self):
        """What was written, escape sequences removed, as text."""
        return ANSI.sub(b"", bytes(self.raw)).replace(b"\r", b"").decode("utf-8", "replace")

    def tail(self):
        return "--- screen ---\n" + self.screen_text() + "\n--- output (last 3000 chars, escapes removed) ---\n" + self.plain()[-3000:]

    def type(self, text):
        """Type a line as a person does: the text, a pause, Enter. Enter
        only once the text shows on the screen: an agent that draws its
        prompt before it reads the keyboard (Gemini CLI loading a resumed
        conversation) loses what is typed meanwhile; then the text is
        rubbed out and typed again."""
        before = self.screen_text().count(text)
        for attempt in range(4):
            for ch in text:
                self.write(ch.encode())
                self.pump(0.01)
            end = time.monotonic() + 5
            while time.monotonic() < end and self.screen_text().count(text) <= before and not self.eof:
                self.pump(0.1)
            if self.screen_text().count(text) > before or self.eof:
                break
            self.write(b"\x7f" * (len(text) + 2))
            self.pump(1.0)
        self.pump(0.4)
        self.write(b"\r")

    def wait_exit(self, timeout):
        end = time.monotonic() + timeout
        while self.proc.poll() is None and time.monotonic() < end:
            self.pump(0.2)
        if self.proc.poll() is None:
            raise Timeout(f"lam run did not exit within {timeout} s\n{self.tail()}")
        self.pump(0.5)
        self.rc = self.proc.returncode
        return self.rc

    def hang_up(self):
        os.close(self.master)
        self.master = None

    def after(self):
        """termios of the slave after the run (None when it was hung up)."""
        try:
            return termios.tcgetattr(self.slave)
        except termios.error:
            return None

    def close(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        try:  # what is left of its session (`lam run` leads its process group)
            os.killpg(self.proc.pid, signal.SIGKILL)
        except OSError:
            pass
        for fd in (self.master, self.slave):
            if fd is not None:
                try:
                    os.close(fd)
                except OSError:
                    pass
        self.master = self.slave = None


# ---------------------------------------------------------------- a run

def claude_config(root, work):
    """A Claude Code config dir that skips onboarding and the trust
    dialog, and accepts the API key."""
    cfg = root / "claude-config"
    cfg.mkdir(exist_ok=True)
    doc = {"hasCompletedOnboarding": True, "theme": "dark",
           "customApiKeyResponses": {"approved": [KEY["claude"][-20:]], "rejected": []},
           "projects": {str(work): {"hasTrustDialogAccepted": True, "hasCompletedProjectOnboarding": True}}}
    (cfg / ".claude.json").write_text(json.dumps(doc))
    # The scripted tools allowed, and the default permission mode (auto
    # mode asks about its classifier's billing through a gateway first).
    settings = {"permissions": {"allow": ["Bash", "Read", "mcp__lam__recall"], "defaultMode": "default"}}
    (cfg / "settings.json").write_text(json.dumps(settings))
    return cfg


def environment(root, agent, bins, work):
    """The agent's environment: real_agents_test's (fresh homes, fake keys,
    Gemini CLI's and opencode's user config), the same again for a second
    run in the same root (a resume)."""
    saved = root / "env.json"
    if saved.exists():
        return json.loads(saved.read_text())
    env = rat.agent_env(root)
    env["TERM"] = "xterm-256color"
    env.pop("NO_COLOR", None)
    # A person's terminal, not CI: Gemini CLI runs headless (and waits for
    # stdin) where `CI`, `CONTINUOUS_INTEGRATION` or a `CI_*` variable is set.
    for k in [k for k in env if k in ("CI", "CONTINUOUS_INTEGRATION") or k.startswith("CI_")]:
        del env[k]
    if agent == "claude":
        env["CLAUDE_CONFIG_DIR"] = str(claude_config(root, work))
    elif agent == "gemini":
        # The folder trusted (else a dialog, and a restart, comes first)
        # and the scripted tools run without asking (lam's MCP server is
        # trusted by `lam run`).
        env["GEMINI_CLI_TRUST_WORKSPACE"] = "true"
        rat.gemini_settings(env, {"tools": {"allowed": ["run_shell_command", "read_file"]}})
    elif agent == "opencode":
        pass  # real_agents_test's config: its model; its tools run without asking
    elif not (root / "codex-home" / "auth.json").exists():
        r = subprocess.run([str(bins / "codex"), "login", "--with-api-key"], input=KEY["codex"].encode(), env=env,
                           capture_output=True, timeout=30)
        assert r.returncode == 0, f"codex login --with-api-key: {r.returncode} {r.stderr[-500:]!r}"
    saved.write_text(json.dumps(env))
    return env


class Run:
    """One `lam run -- AGENT ...` in a pty against a scripted upstream."""

    def __init__(self, lam, bins, root, agent, script, encoder, args=(), up=None):
        self.agent, self.root = agent, root
        self.work = root / "work"
        if not self.work.exists():
            rat.workdir(root)
        self.store = root / "store"
        self.up = up or su.Upstream(str(self.work), record=str(root / "upstream.jsonl"), script=script, turns=True).start()
        self.first_seq = len(self.up.seen)
        env = environment(root, agent, bins, self.work)
        cmd = [lam, "run", "--encoder", encoder, "--store", str(self.store), "--upstream", self.up.url, "--",
               str(bins / agent), *args]
        self.tty = Tty(cmd, self.work, env)
        self.api = API[agent]

    # ---- driving
    def ready(self, timeout=60):
        """Wait for the agent's prompt."""
        self.tty.until(lambda: READY[self.agent](self.tty.screen.display), timeout, f"{self.agent}'s prompt")
        self.tty.pump(1.0)

    def seen(self):
        """The upstream's record of this run (frozen when it has exited: a resume shares the upstream)."""
        return getattr(self, "up_seen", None) or self.up.seen[self.first_seq:]

    def answered(self, turn, role, n=1):
        """Whether `n` requests of `turn` were answered with `role` (their handler done)."""
        return sum(1 for e in self.seen() if e.get("turn") == turn and e.get("role") == role and e.get("handler_s")) >= n

    def turn(self, k, text="look at app.py", timeout=60):
        """Type message k and wait for the end of its turn."""
        self.tty.type(f"LAMTURN-{k} {text}")
        self.tty.until(lambda: self.answered(k, "end"), timeout, f"turn {k}'s answer")
        self.tty.pump(2.0)

    def exit_key(self, key):
        if key == "word":
            self.tty.type(EXIT_WORD[self.agent])
        else:
            ch = {"ctrl-c": b"\x03", "ctrl-d": b"\x04"}[key]
            self.tty.write(ch)
            self.tty.pump(0.5)
            if self.tty.proc.poll() is None:
                self.tty.write(ch)

    def finish(self, timeout=30):
        rc = self.tty.wait_exit(timeout)
        self.up_seen = list(self.seen())
        return rc

    # ---- reading
    def requests(self):
        return [e for e in rat.model_requests({"api": self.api, "seen": self.seen()}) if e.get("method") == "POST"]

    def rundict(self):
        return {"api": self.api, "seen": self.seen()}


def run_conversations(run):
    """The upstream's conversations: the model requests grouped by what
    the proxy keys a session on (preamble, first item); each of Gemini
    CLI's routing classifier's (it offers no tools: it restates the last
    turns) a conversation of its own."""
    r = run.rundict()
    out = {}
    for e in run.requests():
        items = rat.raw_conversation(r, e["body"])
        alone = run.api == "gemini" and not rat.offers_tools(r, e["body"])
        out.setdefault((rat.preamble(r, e["body"]), items[0] if items else "", e["seq"] if alone else 0), []).append(e)
    return list(out.values())


def main_conversations(run):
    """The conversations that offer tools (the agent's, not a title request
    or Gemini CLI's routing classifier)."""
    r = run.rundict()
    return [c for c in run_conversations(run) if any(rat.offers_tools(r, e["body"]) for e in c)]


def session_id(run):
    """The agent's session id: from its requests, Claude Code's
    metadata.user_id session_id, Codex's prompt_cache_key, opencode's
    `x-session-id` header; Gemini CLI's (which its requests do not carry)
    from the header line of its session file."""
    if run.agent == "gemini":
        files = sorted((run.root / "home" / ".gemini" / "tmp").glob("*/chats/session-*.jsonl"), key=lambda f: f.stat().st_mtime)
        return json.loads(files[-1].read_text().split("\n", 1)[0]).get("sessionId") if files else None
    for c in main_conversations(run):
        b = json.loads(c[0]["body"])
        if run.agent == "claude":
            return json.loads(b["metadata"]["user_id"])["session_id"]
        if run.agent == "opencode":
            return c[0]["headers"].get("x-session-id")
        return b.get("prompt_cache_key") or c[0]["headers"].get("session-id")
    return None


# ----------------------------------------------------------------- checks

class Checks:
    def __init__(self, agent, scenario):
        self.name = f"{agent} {scenario}"
        self.rows = []

    def add(self, what, ok, detail=""):
        self.rows.append((what, bool(ok), detail))
        why = pending(self.name, what)
        mark = "ok" if ok else ("FAIL (pending: %s)" % why if why else "FAIL")
        print(f"  {mark}: {self.name}: {what}" + (f" ({detail})" if detail else ""), flush=True)

    def skip(self, what, why):
        """A check that does not apply to the agent: said, not counted."""
        print(f"  skip: {self.name}: {what} ({why})", flush=True)

    def failures(self):
        return [(w, d) for w, ok, d in self.rows if not ok]


def leftovers(run, port):
    """Processes of the run still alive: cwd in its folder, or its proxy's
    port or its store in their environment or command line."""
    out = []
    root = str(run.root)
    needles = [x.encode() for x in ([f"127.0.0.1:{port}"] if port else []) + [str(run.store)]]
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            cwd = os.readlink(f"/proc/{pid}/cwd")
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmdline = f.read()
            try:
                with open(f"/proc/{pid}/environ", "rb") as f:
                    environ = f.read()
            except OSError:
                environ = b""
        except OSError:
            continue
        if cwd.startswith(root) or any(n in cmdline or n in environ for n in needles):
            shown = cmdline.replace(b"\0", b" ")[:160].decode("utf-8", "replace")
            out.append(f"{pid}: {shown}")
    return out


def common_checks(c, run, expect_rc, hung_up=False):
    tty = run.tty
    text = tty.plain()
    rc = tty.rc
    said = EXITED.search(text)
    if expect_rc == "agent":
        c.add("exit code the agent's", said is not None and rc == int(said.group(1)),
              f"lam run {rc}, agent {said.group(1) if said else '(no line)'}")
    else:
        what = {129: "exit code 129 on hang-up", 143: "exit code 143 on SIGTERM"}.get(expect_rc, f"exit code {expect_rc}")
        c.add(what, rc == expect_rc, f"lam run exited {rc}")
    # one proxy conversation per conversation upstream
    convs = run_conversations(run)
    if not hung_up:
        proxy = sorted(int(n) for _, _, n in SUMMARY_SESSION.findall(text))
        upstream = sorted(len(x) for x in convs)
        c.add("one proxy conversation per conversation", proxy == upstream and (len(main_conversations(run)) >= 1 or not convs),
              f"proxy conversations (requests each) {proxy}, upstream {upstream}, agent conversations {len(main_conversations(run))}")
    r = run.rundict()
    changed = sum(rat.earlier_changed(r, x) for x in convs)
    c.add("no earlier item changed", changed == 0, f"{changed} earlier items changed over {sum(len(x) for x in convs)} requests")
    if not hung_up:
        after = tty.after()
        diff = [n for n, (a, b) in enumerate(zip(tty.before, after or [])) if a != b] if after else ["unreadable"]
        c.add("terminal restored", after == tty.before, f"termios fields differing: {diff}" if diff else "")
        raw = bytes(tty.raw)
        alt = [m.group(1) for m in re.finditer(rb"\x1b\[\?(?:1049|1047|47)([hl])", raw)]
        cur = [m.group(1) for m in re.finditer(rb"\x1b\[\?25([hl])", raw)]
        c.add("alternate screen left", (not alt or alt[-1] == b"l") and (not cur or cur[-1] == b"h"),
              f"alternate screen {b''.join(alt).decode()[-6:] or '-'}, cursor {b''.join(cur).decode()[-6:] or '-'}")
    port = PROXY.search(text)
    left = []
    for _ in range(20):
        left = leftovers(run, port.group(1) if port else None)
        if not left:
            break
        time.sleep(0.25)
    c.add("nothing left running", not left, "; ".join(left))
    if run.requests() and not hung_up:
        c.add("no false alarm", "went around lam" not in text, "")


def resume_hint(c, run, sid):
    text = run.tty.plain()
    want = " ".join(RESUME[run.agent] + [sid])
    lines = [line for line in text.splitlines() if want in line]
    ok = any("lam run" in line for line in lines)
    c.add("resume hint through lam", ok, " | ".join(x.strip() for x in lines) or "no hint with the id")


# `lam status-line`'s line for the conversation (lam/src/status.rs):
# `lam: tool output 1.2k -> 0.9k tokens (-26.7%) | ... | input bill ... vs ... direct (...)`.
# Agents `lam run` registers no status line for (docs/agents.md, "The status line").
NO_STATUS_LINE = {"gemini": "lam run registers no status line for Gemini CLI, which has no status line command",
                  "opencode": "lam run registers no status line for opencode, which has no status line hook"}
STATUS = re.compile(r"lam: tool output [0-9.,]+[kMG]? -> [0-9.,]+[kMG]? tokens")
LAMISH = re.compile(r"\blam( \(all conversations\))?: ")


def status_line(run):
    """The screen's status line with lam's figures for the conversation,
    and any other line `lam status-line` may have written (`lam: ...`)."""
    lines = [line.strip() for line in run.tty.screen.display]
    return [x for x in lines if STATUS.search(x)], [x for x in lines if LAMISH.search(x) and not STATUS.search(x)]


# -------------------------------------------------------------- scenarios

def two_turns(ctx, agent):
    c = Checks(agent, "two-turns")
    run = ctx.run(agent, "two-turns", TWO_TURNS)
    run.ready()
    run.turn(1)
    run.turn(2, "look at app.py again and recall")
    if agent in NO_STATUS_LINE:
        shown = None
    else:
        run.tty.pump(3.0)
        shown, other = status_line(run)
        ctx.status[agent] = shown or other or run.tty.screen_text().splitlines()[-4:]
    run.exit_key("word")
    run.finish()
    common_checks(c, run, "agent")
    c.add("exit code 0 on " + EXIT_WORD[agent], run.tty.rc == 0, f"{run.tty.rc}")
    main = main_conversations(run)
    c.add("one agent conversation", len(main) == 1, f"{len(main)}")
    if agent in NO_STATUS_LINE:
        c.skip("status line shows lam's figures", NO_STATUS_LINE[agent])
    else:
        c.add("status line shows lam's figures", bool(shown), " | ".join(shown) or "no line with lam's figures on the screen: " + " | ".join(x.strip() for x in ctx.status[agent] if x.strip()))
    sid = session_id(run)
    resume_hint(c, run, sid or "?")
    run.keep = True
    ctx.resume[agent] = (run, sid)
    return c


def esc(ctx, agent):
    c = Checks(agent, "esc")
    run = ctx.run(agent, "esc", ESC)
    run.ready()
    run.tty.type("LAMTURN-1 tell me a long story")
    run.tty.until(lambda: "streams slowly" in run.tty.screen_text() or "streams slowly" in run.tty.plain(), 40, "the slow answer on screen")
    run.tty.pump(1.0)
    run.tty.write(b"\x1b")
    if agent == "opencode":  # "esc again to interrupt"
        run.tty.until(lambda: "again to interrupt" in run.tty.screen_text(), 15, "opencode's second Esc asked for")
        run.tty.write(b"\x1b")
    run.tty.until(lambda: any("aborted" in e for e in run.seen()), 15, "the stream cut after Esc")
    run.tty.pump(1.5)
    run.turn(2)
    run.exit_key("ctrl-c")
    run.finish()
    common_checks(c, run, "agent")
    main = main_conversations(run)
    if agent == "gemini":
        # Gemini CLI takes the interrupted turn out of its history, the
        # typed message that opened the conversation with it: the next
        # message opens a conversation of its own.
        c.skip("one agent conversation after Esc", "Gemini CLI drops the interrupted turn, its message with it")
        after = [x for x in main if "LAMTURN-2" in x[0]["body"]]
        c.add("the interrupted turn dropped: the next message a conversation of its own",
              len(main) == 2 and len(after) == 1 and "LAMTURN-1" not in after[0][-1]["body"], f"{len(main)} agent conversations")
    else:
        c.add("one agent conversation after Esc", len(main) == 1, f"{len(main)}")
    ctx.research[agent]["esc"] = after_fault(run, lambda e: "aborted" in e)
    return c


def faults(ctx, agent):
    c = Checks(agent, "faults")
    run = ctx.run(agent, "faults", FAULTS)
    run.ready()
    # turn 1: cat app.py, then an answer cut by a dropped connection: the
    # agent retries it (answered `DONE.`) or shows an error
    run.tty.type("LAMTURN-1 look at app.py")
    run.tty.until(lambda: any(e.get("dropped") for e in run.seen()), 40, "the dropped answer")
    try:
        run.tty.until(lambda: run.answered(1, "end"), 15, "a retry after the drop")
    except Timeout:
        pass
    run.tty.pump(2.0)
    retried = run.answered(1, "end")
    # turn 2: a 500 once, then (retried) cat app.py and `DONE.`
    run.tty.type("LAMTURN-2 look at app.py")
    run.tty.until(lambda: any(e.get("failed") for e in run.seen()), 40, "the failed request")
    try:
        run.tty.until(lambda: run.answered(2, "end"), 40, "the answer after the 500")
    except Timeout:
        pass
    run.tty.pump(2.0)
    ctx.research[agent]["500-retried"] = run.answered(2, "end")
    run.exit_key("ctrl-d")
    run.finish()
    common_checks(c, run, "agent")
    main = main_conversations(run)
    c.add("one agent conversation after a drop and a 500", len(main) == 1, f"{len(main)}")
    ctx.research[agent]["drop"] = after_fault(run, lambda e: e.get("dropped"))
    ctx.research[agent]["drop-retried"] = retried
    ctx.research[agent]["500"] = after_fault(run, lambda e: e.get("failed"))
    return c


def exit_at_once(ctx, agent):
    c = Checks(agent, "exit-at-once")
    run = ctx.run(agent, "exit-at-once", ONE)
    run.ready()
    run.exit_key("word")
    run.finish()
    common_checks(c, run, "agent")
    c.add("no false alarm", "went around lam" not in run.tty.plain(), "")
    c.add("exit code 0 on " + EXIT_WORD[agent] + " with nothing asked", run.tty.rc == 0, f"{run.tty.rc}")
    return c


def hang_up(ctx, agent):
    c = Checks(agent, "hang-up")
    run = ctx.run(agent, "hang-up", ONE)
    run.ready()
    run.turn(1)
    run.tty.hang_up()
    run.finish()
    common_checks(c, run, 129, hung_up=True)
    r = subprocess.run([ctx.lam, "recall", "--store", str(run.store), "--list"], capture_output=True, text=True)
    c.add("store flushed after hang-up", r.returncode == 0 and re.search(r"\b[1-9]\d* observation", r.stdout) is not None,
          (r.stdout + r.stderr).strip()[:300])
    return c


def kill(ctx, agent):
    c = Checks(agent, "kill")
    run = ctx.run(agent, "kill", KILL)
    run.ready()
    run.tty.type("LAMTURN-1 tell me a long story")
    run.tty.until(lambda: "streams slowly" in run.tty.screen_text() or "streams slowly" in run.tty.plain(), 40, "the slow answer on screen")
    os.kill(run.tty.proc.pid, signal.SIGTERM)
    try:
        run.finish(20)
    except Timeout:
        # Still running: what a user does next, `kill -9`; lam's agent must
        # end with it (its parent-death signal), and nothing be left. (Here
        # `lam run` leads the pty's session: when it dies the kernel also
        # hangs up the session's foreground group, the agent's.)
        c.add("exit code 143 on SIGTERM", False, "lam run still running 20 s after SIGTERM: " + " | ".join(
            x for x in (ps_tree(run.tty.proc.pid) or "").splitlines()[1:]))
        os.kill(run.tty.proc.pid, signal.SIGKILL)
        run.finish()
        left = []
        for _ in range(20):
            left = leftovers(run, None)
            if not left:
                break
            time.sleep(0.25)
        c.add("the agent gone after lam run is SIGKILLed", not left, "; ".join(left))
        return c
    common_checks(c, run, 143)
    return c


def ps_tree(pid):
    """`ps`'s forest of a session, for a failure's detail."""
    r = subprocess.run(["ps", "-o", "pid,ppid,stat,args", "--forest", "--sid", str(pid)], capture_output=True, text=True)
    return r.stdout


def resume(ctx, agent):
    c = Checks(agent, "resume")
    first, sid = ctx.resume.get(agent, (None, None))
    if not sid:
        c.add("resume id from the first run", False, "two-turns did not run or gave no id")
        return c
    args = RESUME[agent] + [sid]
    run = Run(ctx.lam, ctx.bins, first.root, agent, TWO_TURNS, ctx.encoder, args, up=first.up)
    first.keep = False
    run.shut = True  # its upstream is the first run's
    ctx.runs.append(run)
    run.ready()
    run.turn(3)
    run.exit_key("word")
    run.finish()
    common_checks(c, run, "agent")
    before = rat.raw_conversation(first.rundict(), main_conversations(first)[0][-1]["body"])
    main = main_conversations(run)
    c.add("one agent conversation resumed", len(main) == 1, f"{len(main)}")
    now = rat.raw_conversation(run.rundict(), main[0][0]["body"]) if main else []
    if agent == "gemini":
        # Gemini CLI rebuilds the conversation from its session file, which
        # keeps no thought signature, and writes one tool result twice; it
        # writes its session context anew, the same but for the folder it
        # names in `lam run`'s home for the run.
        c.skip("the first run's items forwarded the same after the resume",
               "Gemini CLI's rebuilt history drops the thought signatures and doubles a tool result")
        c.add("the session context the same after the resume", before[:1] == now[:1], "the first item differs: " + context_diff(before, now))
        before, now = gemini_rebuilt(before), gemini_rebuilt(now)
        same = rat.common_prefix(before, now)
        c.add("the first run's items forwarded the same after the resume, Gemini CLI's rewrites aside", main and same == len(before),
              f"{same} of {len(before)} items of the first run's last request open the resumed run's first (thought signatures, "
              "doubled tool results and lam run's home for the run aside)")
        return c
    same = rat.common_prefix(before, now)
    c.add("the first run's items forwarded the same after the resume", main and same == len(before),
          f"{same} of {len(before)} items of the first run's last request open the resumed run's first")
    return c


# A run's own home for the agent (`ROOT/run-PID-XXXXXX/home`) when another run
# holds the shared one (lam/src/runfiles.rs).
LAM_HOME_DIR = re.compile(r"run-\d+-[A-Za-z0-9]{6}/home")


def context_diff(before, now):
    """The lines of two first items that differ, for a failure's detail."""
    a = json.dumps(json.loads(before[0]), indent=0).split("\\n") if before else []
    b = json.dumps(json.loads(now[0]), indent=0).split("\\n") if now else []
    return " | ".join([f"- {x}" for x in a if x not in b][:3] + [f"+ {x}" for x in b if x not in a][:3])


def gemini_rebuilt(items):
    """Gemini items as its resume rebuilds them: no `thoughtSignature`, a
    `functionResponse` part whose call id came before in the same turn left
    out, and a run's own home (`run-PID-XXXXXX/home`, in the session
    context) without its PID."""
    out = []
    for raw in items:
        item = json.loads(raw)
        seen, parts = set(), []
        for p in item.get("parts") or []:
            p = {k: v for k, v in p.items() if k != "thoughtSignature"} if isinstance(p, dict) else p
            fid = p.get("functionResponse", {}).get("id") if isinstance(p, dict) else None
            if fid and fid in seen:
                continue
            seen.add(fid)
            parts.append(p)
        item["parts"] = parts
        out.append(LAM_HOME_DIR.sub("run-PID/home", json.dumps(item, sort_keys=True)))
    return out


SCENARIOS = {"two-turns": two_turns, "esc": esc, "faults": faults, "exit-at-once": exit_at_once, "hang-up": hang_up,
             "kill": kill, "resume": resume}


def after_fault(run, which):
    """What the agent sent after a fault: the new items of the next request
    of the conversation (types, roles, and a short text)."""
    r = run.rundict()
    reqs = run.requests()
    for i, e in enumerate(reqs):
        if which(e):
            items = rat.raw_conversation(r, e["body"])
            later = [x for x in reqs[i + 1:] if rat.raw_conversation(r, x["body"])[:1] == items[:1]
                     and rat.preamble(r, x["body"]) == rat.preamble(r, e["body"])]
            if not later:
                return {"after": "no later request of the conversation"}
            nxt = rat.raw_conversation(r, later[0]["body"])
            same = rat.common_prefix(items, nxt)
            new = [json.loads(x) for x in nxt[same:]]
            return {"kept": f"{same} of {len(items)} earlier items", "new": [summarize(x) for x in new],
                    "same request again": nxt == items}
    return {"after": "no fault recorded"}


def summarize(item):
    kind = item.get("type") or item.get("role")
    role = item.get("role", "")
    content = item.get("content", item.get("output", item.get("input", item.get("parts", ""))))
    text = json.dumps(content)[:220]
    return f"{kind}/{role}: {text}"


class Ctx:
    def __init__(self, a):
        self.lam, self.bins, self.encoder, self.work = a.lam, a.bins, a.encoder, Path(a.work)
        self.status, self.resume, self.runs = {}, {}, []
        self.research = {agent: {} for agent in a.only.split(",")}

    def run(self, agent, scenario, script):
        root = Path(tempfile.mkdtemp(prefix=f"{agent}-{scenario}-", dir=self.work))
        r = Run(self.lam, self.bins, root, agent, script, self.encoder)
        self.runs.append(r)
        return r

    def end(self, final=False):
        """Close the runs' terminals and stop their upstreams (a run kept
        for a resume keeps its upstream until `final`)."""
        kept = []
        for r in self.runs:
            r.tty.close()
        for r in self.runs:
            if getattr(r, "keep", False) and not final:
                kept.append(r)
                continue
            if not getattr(r, "shut", False):
                r.up.shutdown()
                r.up.server_close()
                r.shut = True
        self.runs = kept


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("lam")
    ap.add_argument("agents_dir")
    ap.add_argument("work")
    ap.add_argument("--encoder", default="hashing")
    ap.add_argument("--only", default=",".join(AGENTS))
    ap.add_argument("--scenarios", default=",".join(SCENARIOS))
    a = ap.parse_args()
    a.lam = os.path.abspath(a.lam)
    a.bins = Path(a.agents_dir).resolve() / "node_modules" / ".bin"
    missing = [x for x in a.only.split(",") if not (a.bins / x).exists()]
    for x in missing:
        print(f"SKIPPED: pty tests of {x}: not installed in {a.agents_dir} (scripts/install-agents.sh)")
    a.only = ",".join(x for x in a.only.split(",") if x not in missing)
    if not a.only:
        return 0
    if pyte is None:
        print("SKIPPED: pty tests: pyte is not installed (scripts/pty-venv.sh makes target/pty-venv from PyPI)")
        return 0
    t0 = time.monotonic()
    results = []
    ctx = Ctx(a)
    for agent in a.only.split(","):
        for name in a.scenarios.split(","):
            t1 = time.monotonic()
            print(f"{agent} {name}:", flush=True)
            try:
                results.append(SCENARIOS[name](ctx, agent))
            except Exception as e:  # noqa: BLE001 - the scenario's output says why
                c = Checks(agent, name)
                c.add("scenario ran", False, f"{e!r}\n{traceback.format_exc()}" if not isinstance(e, Timeout) else str(e))
                results.append(c)
            finally:
                ctx.end()
            print(f"  ({time.monotonic() - t1:.0f} s)", flush=True)
        ctx.end(final=True)
        ctx.resume.clear()
    print("\nwhat each agent sent after an interrupt:")
    for agent, found in ctx.research.items():
        for what, v in found.items():
            print(f"  {agent} {what}: {json.dumps(v, ensure_ascii=False)}")
    print("\nstatus line (screen lines with lam's figures, or the last lines of the screen):")
    for agent, lines in ctx.status.items():
        print(f"  {agent}: " + " | ".join(x.strip() for x in lines if x.strip()))
    fails = [(c.name, w, d) for c in results for w, d in c.failures()]
    waiting = [f for f in fails if pending(f[0], f[1])]
    print(f"\n{sum(len(c.rows) for c in results) - len(fails)} checks passed, {len(fails)} failed "
          f"({len(waiting)} pending on issue 56 work or a defect found), {time.monotonic() - t0:.0f} s")
    for name, w, d in fails:
        why = pending(name, w)
        print(f"FAIL{' (pending: ' + why + ')' if why else ''}: {name}: {w}: {d[:600]}", file=sys.stderr)
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())

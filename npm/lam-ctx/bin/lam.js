#!/usr/bin/env node
// The `lam` command of the npm package lam-ctx: runs the `lam` binary of the
// platform package npm installed beside it (one optional dependency per
// platform, `lam-ctx-<platform>-<arch>`, each limited by its `os` and `cpu`,
// as Codex and Claude Code ship theirs) with the same arguments, standard
// streams, environment and exit status.
"use strict";

const fs = require("fs");
const path = require("path");
const { spawn } = require("child_process");

const target = `${process.platform}-${process.arch}`;
const pkg = `lam-ctx-${target}`;

function binary() {
  let dir;
  try {
    dir = path.dirname(require.resolve(`${pkg}/package.json`));
  } catch {
    return null;
  }
  const exe = path.join(dir, "bin", process.platform === "win32" ? "lam.exe" : "lam");
  return fs.existsSync(exe) ? exe : null;
}

const exe = binary();
if (!exe) {
  console.error(
    `lam: no lam binary for ${target}: npm installs it from the optional dependency ${pkg} ` +
      "(was it installed with --omit=optional or --no-optional, or is there no package for this platform?). " +
      "Reinstall with `npm i -g lam-ctx`, or install lam another way: `uv tool install lam-ctx`, " +
      "`pipx install lam-ctx` or `cargo install lam-ctx`."
  );
  process.exit(1);
}
const args = process.argv.slice(2);

// Where Node can replace itself with lam (process.execve: Node 22.15+, 23.11+,
// Unix), nothing stands between the terminal and lam.
if (typeof process.execve === "function" && process.platform !== "win32") {
  process.execve(exe, [exe, ...args], process.env);
}

// Else lam runs as a child in the terminal's foreground group: Ctrl-C's
// SIGINT (and SIGQUIT) reach it from the terminal itself, so this launcher
// ignores them rather than send a second one (`lam run` tells a typed
// Ctrl-C from one a process sent); SIGTERM and SIGHUP sent to the launcher
// are passed on.
const child = spawn(exe, args, { stdio: "inherit" });
for (const sig of ["SIGINT", "SIGQUIT"]) {
  process.on(sig, () => {});
}
for (const sig of ["SIGTERM", "SIGHUP"]) {
  process.on(sig, () => {
    try {
      child.kill(sig);
    } catch {
      // already gone
    }
  });
}
child.on("error", (e) => {
  console.error(`lam: could not start ${exe}: ${e.message}`);
  process.exit(1);
});
child.on("exit", (code, signal) => {
  if (signal) {
    // Die of the same signal, so the caller sees what lam's caller would.
    process.removeAllListeners(signal);
    process.kill(process.pid, signal);
  } else {
    process.exit(code);
  }
});

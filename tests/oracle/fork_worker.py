"""A fork server for the oracle scripts, run by an oracle venv's interpreter (see tests/oracle/pool.py).

usage: python fork_worker.py MODULE...   (the modules every script it serves imports first, before any stub)

Importing torch, transformers or qwen_tts costs an oracle script 5-12 s of CPU, more than most of the
reference runs themselves; the suite starts such a script about 20 times. This process imports those
modules once, then runs each script in a child forked from it: the child sees the interpreter exactly as
a fresh `python SCRIPT ARGS...` would after those first imports (same environment, cwd, sys.path[0]),
and its own changes (stubs, seeds, monkeypatches) die with it.

Protocol, one JSON object a line: request {"script", "args", "env", "stdout", "stderr"} on stdin (the
environment the child runs with; the two paths receive its file descriptors 1 and 2); reply {"rc"} on
stdout. EOF on stdin ends the worker.
"""

import importlib
import json
import os
import runpy
import sys
import traceback

# The protocol's channel: a private copy of fd 1, so that nothing a preloaded module prints can corrupt it.
_reply = os.fdopen(os.dup(1), "w")
os.dup2(2, 1)

for name in sys.argv[1:]:
    importlib.import_module(name)


def _child(req: dict) -> None:
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)  # the requests' pipe is the worker's alone
    os.close(devnull)
    for fd, path in ((1, req["stdout"]), (2, req["stderr"])):
        f = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(f, fd)
        os.close(f)
    os.environ.clear()
    os.environ.update(req["env"])  # the worker's own, but for what pytest changes per test (pool.PER_RUN_ENV)
    script = req["script"]
    sys.argv = [script, *req["args"]]
    sys.path[0] = os.path.dirname(os.path.abspath(script))
    code = 0
    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        if not isinstance(e.code, int | None):
            print(e.code, file=sys.stderr)
    except BaseException:  # noqa: BLE001 - reported as `python SCRIPT` would: traceback, rc 1
        traceback.print_exc()
        code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


for line in sys.stdin:
    req = json.loads(line)
    sys.stdout.flush()  # nothing buffered here may leak into the child's output
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        _reply.close()
        _child(req)
    _, status = os.waitpid(pid, 0)
    rc = os.waitstatus_to_exitcode(status)
    _reply.write(json.dumps({"rc": rc}) + "\n")
    _reply.flush()

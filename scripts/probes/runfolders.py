"""Run folders that cannot be corrupted, and bad input that is not one line.

Families: ``runlock`` (a second command on a folder another run writes, the holder killed),
``duplicates`` (duplicated ``trajectories.jsonl`` lines on resume), ``planted`` (checkpoints whose
pickle would run code on ``train --resume``), ``yaml`` (alias bombs and deep nesting in configs and
overrides), ``badout`` (an ``--out`` that cannot be written), ``vocab`` (a tokenizer whose ids the
embedding has no row for) and ``serve`` (request bodies too deep, too large, or with non-finite
sampling options).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from probes import Family

ARLKIT = [sys.executable, "-m", "arlkit"]
TIMEOUT_S = 600


def _run(*args: str, cwd: Path | None = None, timeout: float = TIMEOUT_S) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*ARLKIT, *args], capture_output=True, text=True, timeout=timeout, cwd=cwd, check=False)


def _one_line(proc: subprocess.CompletedProcess[str], code: int = 2, limit: int = 2000) -> bool:
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip() and "warning:" not in ln]
    return proc.returncode == code and len(lines) == 1 and "Traceback" not in proc.stderr and len(proc.stderr) < limit


def _said(proc: subprocess.CompletedProcess[str]) -> str:
    return f"exit {proc.returncode}, stderr {proc.stderr[-300:]!r}"


def _tmp(prefix: str) -> Path:
    return Path(tempfile.mkdtemp(prefix=f"arlkit-probe-{prefix}-"))


EVAL = ["eval", "--env", "frozenlake", "--env-arg", "size=4", "--tasks", "6", "--samples", "2", "--budgets", "50%,100%",
        "--bootstrap", "100"]


# -- runlock: one writer per run folder -------------------------------------------------------------
def _holder(folder: Path) -> subprocess.Popen[str] | None:
    """A process holding ``folder``'s lock until its stdin closes (it has taken it when this returns);
    None when it could not take it."""
    code = (f"import sys\nfrom arlkit.rundir import hold_run_dir\nwith hold_run_dir({str(folder)!r}):\n"
            "    print('held', flush=True)\n    sys.stdin.read()\n")
    proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True)
    if proc.stdout is not None and proc.stdout.readline() == "held\n":
        return proc
    proc.kill()
    proc.wait(timeout=60)
    return None


def _snapshot(folder: Path) -> dict[str, tuple[int, int]]:
    """Each file under ``folder``: its modification time and size."""
    return {p.relative_to(folder).as_posix(): (p.stat().st_mtime_ns, p.stat().st_size)
            for p in folder.rglob("*") if p.is_file()}


def _commands_on(out: Path, work: Path) -> list[tuple[str, list[str]]]:
    """Each command that writes a run folder, pointed at ``out``."""
    train = [f"model=tiny:nano", "steps=1", "validation.every=0", "progress=false", "tensorboard=false"]
    return [
        ("eval", [*EVAL, "--policy", "random", "--out", str(out)]),
        ("eval, another config", [*EVAL, "--policy", "oracle", "--tasks", "2", "--out", str(out)]),
        ("eval through a symlink", [*EVAL, "--policy", "random", "--out", str(work / "link")]),
        ("eval, the path spelled otherwise", [*EVAL, "--policy", "random", "--out", str(out) + "/./"]),
        ("train", ["train", "--out", str(out), *train]),
        ("train --resume", ["train", "--resume", "--out", str(out), *train]),
        ("sft", ["sft", "--out", str(out), "model=tiny:nano", "steps=1", "tasks=2"]),
        ("demo --scripted", ["demo", "--scripted", "--quick", "--out", str(out)]),
        ("arena", ["arena", "--out", str(out), "--quick"]),
        ("analyze flows", ["analyze", "flows", "--runs", str(work / "source"), "--out", str(out)]),
        ("export", ["export", str(work / "source"), "--out", str(out)]),
    ]


def probe_runlock() -> Iterator[Family]:
    family = Family("runlock: a second command on a run folder in use is refused naming the holder")
    work = _tmp("lock")
    try:
        source = work / "source"
        if _run(*EVAL, "--policy", "random", "--out", str(source)).returncode != 0:
            family.check("a source run", False, "the source evaluation failed")
            yield family
            return
        out = work / "held"
        shutil.copytree(source, out)
        (work / "link").symlink_to(out)
        holder = _holder(out)
        if holder is None:
            family.check("a process holding the folder", False, "hold_run_dir could not take it")
            yield from _two_evals(family, work)
            return
        before = _snapshot(out)
        try:
            for name, args in _commands_on(out, work):
                proc = _run(*args, cwd=work)
                named = f"pid {holder.pid}" in proc.stderr
                family.check(name, _one_line(proc) and named, f"holder named: {named}, {_said(proc)}")
            after = _snapshot(out)
            family.check("the held folder is untouched", after == before,
                         f"changed: {sorted(set(after.items()) ^ set(before.items()))[:4]}")
        finally:
            holder.kill()  # SIGKILL: nothing of the holder cleans up
            holder.wait(timeout=60)
        proc = _run(*EVAL, "--policy", "random", "--out", str(out))
        family.check("a killed holder leaves no lock", proc.returncode == 0, _said(proc))
        yield from _two_evals(family, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _two_evals(family: Family, work: Path) -> Iterator[Family]:
    """Two real evaluations on one folder against a served policy whose replies wait for a gate."""
    from arlkit.policies.loopback import ScriptedServer

    gate, reached = threading.Event(), threading.Event()

    def reply(body: dict[str, Any]) -> str:
        reached.set()
        gate.wait(TIMEOUT_S)
        return "<think>go</think><action>Right</action>"

    out = work / "both"
    with ScriptedServer(reply) as server:
        args = [*EVAL, "--policy", f"openai:scripted@{server.base_url}", "--out", str(out)]
        first = subprocess.Popen([*ARLKIT, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            deadline = time.monotonic() + TIMEOUT_S
            while not reached.is_set() and time.monotonic() < deadline and first.poll() is None:
                time.sleep(0.02)
            second = _run(*args)
        finally:
            gate.set()
            first.communicate(timeout=TIMEOUT_S)
    lines = (out / "trajectories.jsonl").read_text().splitlines() if (out / "trajectories.jsonl").exists() else []
    keys = [tuple(json.loads(line)[k] for k in ("policy", "budget", "task_id", "sample")) for line in lines]
    family.check("two evals at once: the second", _one_line(second) and f"pid {first.pid}" in second.stderr, _said(second))
    family.check("two evals at once: the first's data", first.returncode == 0 and len(keys) == len(set(keys)) == 24,
                 f"exit {first.returncode}, {len(keys)} lines, {len(set(keys))} distinct")
    yield family


# -- duplicates: each trajectory counts once ---------------------------------------------------------
def _duplications() -> list[tuple[str, Callable[[list[str]], list[str]]]]:
    def solved(lines: list[str]) -> list[str]:
        return [ln for ln in lines if json.loads(ln)["success"]] or lines[:1]

    def flipped(line: str) -> str:
        data = json.loads(line)
        data["success"], data["success_turn"] = not data["success"], None if data["success"] else 1
        return json.dumps(data)

    return [
        ("one solved line twice", lambda ls: ls + solved(ls)[:1]),
        ("one solved line x20", lambda ls: ls + solved(ls)[:1] * 20),
        ("every solved line x5", lambda ls: ls + solved(ls) * 5),
        ("the whole file twice", lambda ls: ls + ls),
        ("duplicates first", lambda ls: solved(ls) * 3 + ls),
        ("interleaved", lambda ls: [x for ln in ls for x in (ln, ln)]),
        ("a copy with success flipped", lambda ls: ls + [flipped(ln) for ln in ls]),
        ("duplicates and a half-written line", lambda ls: ls + solved(ls) * 4 + [ls[0][: len(ls[0]) // 2]]),
    ]


def probe_duplicates() -> Iterator[Family]:
    family = Family("duplicates: duplicated trajectory records never change a score on resume")
    work = _tmp("dup")
    try:
        args = [*EVAL, "--policy", "noisy-oracle:0.6", "--policy", "random"]
        reference = _run(*args, "--out", str(work / "ref"))
        if reference.returncode != 0:
            family.check("the reference run", False, _said(reference))
            yield family
            return
        table = (work / "ref" / "passkt.csv").read_text()
        lines = (work / "ref" / "trajectories.jsonl").read_text().splitlines()
        for name, duplicate in _duplications():
            out = work / "dup"
            shutil.rmtree(out, ignore_errors=True)
            shutil.copytree(work / "ref", out)
            (out / "passkt.csv").unlink()
            text = "\n".join(duplicate(lines))
            (out / "trajectories.jsonl").write_text(text if name.endswith("half-written line") else text + "\n")
            proc = _run(*args, "--out", str(out))
            same = (out / "passkt.csv").exists() and (out / "passkt.csv").read_text() == table
            warned = "duplicate trajectory records" in proc.stderr
            family.check(name, proc.returncode == 0 and same and warned, f"same table: {same}, warned: {warned}, {_said(proc)}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    yield family


# -- planted: a checkpoint's pickle never runs --------------------------------------------------------
_PAYLOADS = {
    "builtins.open": "open, ({marker!r}, 'w')",
    "os.system": "__import__('os').system, ('touch ' + {marker!r},)",
    "subprocess.call": "__import__('subprocess').call, (['touch', {marker!r}],)",
    "builtins.exec": "exec, ('open(' + repr({marker!r}) + ', \"w\")',)",
    "pathlib touch": "__import__('pathlib').Path.touch, (__import__('pathlib').Path({marker!r}),)",
}


def _plant(checkpoint: Path, payload: str, marker: Path, manifest: str) -> None:
    """Replace ``checkpoint`` by its own state plus an object whose unpickling runs ``payload``."""
    code = f"""
import json, hashlib, torch
from pathlib import Path
class Planted:
    def __reduce__(self):
        return {payload.format(marker=str(marker))}
path = Path({str(checkpoint)!r})
state = torch.load(path, map_location="cpu", weights_only=False)  # the probe's own reference file
torch.save({{**state, "extra": Planted()}}, path)
manifest = path.with_name(path.name.removesuffix(".pt") + ".manifest.json")
if {manifest!r} == "deleted":
    manifest.unlink()
elif {manifest!r} == "rewritten":
    data = path.read_bytes()
    entry = {{"sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)}}
    manifest.write_text(json.dumps({{"format": 1, "step": 3, "files": {{path.name: entry}}}}))
"""
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, timeout=TIMEOUT_S)


def probe_planted() -> Iterator[Family]:
    family = Family("planted: a checkpoint's pickle never runs on --resume")
    work = _tmp("planted")
    overrides = ["model=tiny:nano", "env.args={size: 3, slippery: false, t_max: 6, p_frozen: 0.95}", "train_tasks=4",
                 "steps=3", "tasks_per_step=2", "group_size=2", "prompt.history=1", "algo.step_rows=true",
                 "sampling.max_new_tokens=8", "optim.lr=1e-3", "validation.every=0", "checkpoint_every=1",
                 "keep_checkpoints=3", "progress=false", "tensorboard=false"]
    try:
        reference = _run("train", "--out", str(work / "reference"), *overrides)
        if reference.returncode != 0:
            family.check("the reference run", False, _said(reference))
            yield family
            return
        want = (work / "reference" / "final" / "model.safetensors").read_bytes()
        for payload in _PAYLOADS:
            for manifest in ("deleted", "rewritten", "kept"):
                run, marker = work / "run", work / "marker"
                shutil.rmtree(run, ignore_errors=True)
                marker.unlink(missing_ok=True)
                shutil.copytree(work / "reference", run)
                shutil.rmtree(run / "final")
                newest = sorted((run / "checkpoints").glob("step_*.pt"))[-1]
                _plant(newest, _PAYLOADS[payload], marker, manifest)
                proc = _run("train", "--resume", "--out", str(run), *overrides)
                named = any(newest.name in ln and "warning:" in ln for ln in proc.stderr.splitlines())
                final = run / "final" / "model.safetensors"
                same = final.exists() and final.read_bytes() == want
                ok = not marker.exists() and proc.returncode == 0 and named and same and "Traceback" not in proc.stderr
                family.check(f"{payload}, manifest {manifest}", ok,
                             f"ran: {marker.exists()}, named: {named}, same model: {same}, {_said(proc)}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    yield family


# -- yaml: bombs and deep nesting ---------------------------------------------------------------------
def _inside(anchors: list[str], last: str) -> str:
    """A config whose one valid key (``env.args.size``) holds the anchors and then the last alias."""
    return f"env: {{name: frozenlake, args: {{size: [{', '.join(anchors)}, {last}]}}}}\n"


def _list_bomb(levels: int, width: int = 9) -> str:
    anchors = [f"&a0 [{', '.join(['x'] * width)}]"]
    anchors += [f"&a{i} [{', '.join([f'*a{i - 1}'] * width)}]" for i in range(1, levels)]
    return _inside(anchors, f"*a{levels - 1}")


def _map_bomb(levels: int, width: int = 10) -> str:
    anchors = [f"&l0 {{{', '.join(f'k{j}: x' for j in range(width))}}}"]
    anchors += [f"&l{i} {{{', '.join(f'k{j}: *l{i - 1}' for j in range(width))}}}" for i in range(1, levels)]
    return _inside(anchors, f"*l{levels - 1}")


def _merge_bomb(levels: int) -> str:
    anchors = ["&m0 {a: x, b: x}"]
    anchors += [f"&m{i} {{<<: *m{i - 1}, p{i}: *m{i - 1}, q{i}: *m{i - 1}, r{i}: *m{i - 1}}}" for i in range(1, levels)]
    return _inside(anchors, f"*m{levels - 1}")


def _yaml_cases() -> list[tuple[str, str]]:
    return [
        ("list bomb, 6 levels", _list_bomb(6)), ("list bomb, 7 levels", _list_bomb(7)),
        ("list bomb, 9 levels", _list_bomb(9)), ("list bomb, 30 wide", _list_bomb(5, 30)),
        ("mapping bomb, 7 levels", _map_bomb(7)), ("merge-key bomb, 12 levels", _merge_bomb(12)),
        ("bomb as a key", _list_bomb(7).replace(", *a6]", ", {*a6: 1}]")),
        ("bomb in prompt.profile", _list_bomb(7).replace("env: {name: frozenlake, args: {size: [", "prompt: {profile: [")
         .replace("]}}\n", "]}\n")),
        ("flow nesting 1,000", "seed: " + "[" * 1_000 + "]" * 1_000 + "\n"),
        ("flow nesting 10,000", "seed: " + "[" * 10_000 + "]" * 10_000 + "\n"),
        ("flow nesting 100,000, unclosed", "seed: " + "[" * 100_000 + "\n"),
        ("mapping nesting 10,000", "seed: " + "{a: " * 10_000 + "1" + "}" * 10_000 + "\n"),
        ("block nesting 3,000", "".join("  " * i + f"k{i}:\n" for i in range(3_000))),
        ("alias chain 40 x 40 levels", "\n".join(
            [f"a0: &a0 {'[' * 40}1{']' * 40}"] + [f"a{i}: &a{i} {'[' * 40}*a{i - 1}{']' * 40}" for i in range(1, 40)])),
        ("recursive alias", "seed: &s [*s]\n"),
        ("recursive mapping alias", "env: &e {name: frozenlake, args: {x: *e}}\n"),
    ]


def probe_yaml() -> Iterator[Family]:
    family = Family("yaml: alias bombs and deep nesting are one short line, exit 2")
    work = _tmp("yaml")
    try:
        for name, text in _yaml_cases():
            path = work / "c.yaml"
            path.write_text(text)
            for command in (["eval", "--config", str(path)], ["train", "--check", "--config", str(path)],
                            ["sft", "--check", "--config", str(path)]):
                started = time.monotonic()
                proc = _run(*command, "--out", str(work / "out"), timeout=120)
                seconds = time.monotonic() - started
                family.check(f"{command[0]}: {name}", _one_line(proc) and not (work / "out").exists(),
                             f"{seconds:.1f} s, {len(proc.stderr)} bytes of stderr, {_said(proc)}")
        for name, value in (("override: list bomb", "{a: &a [x,x,x,x,x,x,x,x,x,x], b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a,*a], "
                                                   "c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b,*b], d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c,*c], "
                                                   "e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d,*d], f: [*e,*e,*e,*e,*e,*e,*e,*e,*e,*e]}"),
                            ("override: flow nesting 10,000", "[" * 10_000 + "]" * 10_000)):
            proc = _run("train", "--check", "--out", str(work / "out"), f"env.args={value}", timeout=120)
            family.check(name, _one_line(proc), f"{len(proc.stderr)} bytes of stderr, {_said(proc)}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    yield family


# -- badout: an --out that cannot be written ------------------------------------------------------------
def probe_badout() -> Iterator[Family]:
    family = Family("badout: an --out that cannot be written is one line, exit 2")
    work = _tmp("badout")
    try:
        (work / "a-file").write_text("x")
        if _run(*EVAL, "--policy", "random", "--out", str(work / "source")).returncode != 0:
            family.check("a source run", False, "the source evaluation failed")
            yield family
            return
        places = {"/proc": "/proc/arlkit-probe/run", "/sys": "/sys/arlkit-probe", "under a file": str(work / "a-file" / "run"),
                  "a file": str(work / "a-file"), "under /dev/null": "/dev/null/run", "/proc/self": "/proc/self/arlkit-run"}
        for where, out in places.items():
            for name, args in (
                ("eval", [*EVAL, "--policy", "random", "--out", out]),
                ("train", ["train", "--out", out, "model=tiny:nano", "steps=1", "validation.every=0"]),
                ("sft", ["sft", "--out", out, "model=tiny:nano", "steps=1"]),
                ("demo --scripted", ["demo", "--scripted", "--quick", "--out", out]),
                ("analyze flows", ["analyze", "flows", "--runs", str(work / "source"), "--out", out]),
                ("export", ["export", str(work / "source"), "--out", out]),
                ("report", ["report", str(work / "source"), "--out", out + ".html" if where != "a file" else out + "/r.html"]),
            ):
                proc = _run(*args, cwd=work, timeout=300)
                family.check(f"{name} --out {where}", _one_line(proc), _said(proc))
        family.check("the file is untouched", (work / "a-file").read_text() == "x", "a-file changed")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    yield family


# -- vocab: a tokenizer the embedding does not cover ---------------------------------------------------
def _spoil(model: Path, how: str) -> None:
    code = f"""
import json
from transformers import AutoTokenizer
t = AutoTokenizer.from_pretrained({str(model)!r})
how = {how!r}
rows = json.loads(open({str(model)!r} + "/config.json").read())["vocab_size"]
if how == "one token past":
    t.add_tokens(["frozen", *(f"<x{{i}}>" for i in range(rows - len(t)))])  # ids up to rows: one past the table
elif how == "64 tokens past":
    t.add_tokens(["frozen", "lake", "You", *(f"<x{{i}}>" for i in range(rows - len(t) + 61))])
elif how == "special tokens past":
    t.add_special_tokens({{"additional_special_tokens": [f"<s{{i}}>" for i in range(rows - len(t) + 5)]}})
t.save_pretrained({str(model)!r})
if how == "embedding shrunk":
    from safetensors.torch import load_file, save_file
    config = json.loads(open({str(model)!r} + "/config.json").read())
    config["vocab_size"] = 600
    open({str(model)!r} + "/config.json", "w").write(json.dumps(config))
    weights = load_file({str(model)!r} + "/model.safetensors")
    weights = {{k: (v[:600].clone() if v.shape[0] == 768 else v) for k, v in weights.items()}}
    save_file(weights, {str(model)!r} + "/model.safetensors", metadata={{"format": "pt"}})
"""
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, timeout=TIMEOUT_S)


def probe_vocab() -> Iterator[Family]:
    family = Family("vocab: a tokenizer with ids past the embedding is refused at load, one line")
    work = _tmp("vocab")
    try:
        if _run("model", "init", "--size", "nano", "--out", str(work / "nano")).returncode != 0:
            family.check("the nano model", False, "model init failed")
            yield family
            return
        for how in ("one token past", "64 tokens past", "special tokens past", "embedding shrunk"):
            model = work / how.replace(" ", "-")
            shutil.copytree(work / "nano", model)
            _spoil(model, how)
            for name, args in (
                ("eval", [*EVAL, "--tasks", "1", "--samples", "1", "--policy", f"hf:{model}", "--out", str(work / "out")]),
                ("train", ["train", "--out", str(work / "out"), f"model={model}", "steps=1", "validation.every=0",
                           "train_tasks=2", "tasks_per_step=1", "group_size=2", "progress=false", "tensorboard=false"]),
                ("sft", ["sft", "--out", str(work / "out"), f"model={model}", "steps=1", "tasks=2"]),
                ("serve", ["serve", str(model), "--port", "0"]),
            ):
                proc = _run(*args, timeout=300)
                family.check(f"{name}: {how}", _one_line(proc) and "tokenizer" in proc.stderr, _said(proc))
                shutil.rmtree(work / "out", ignore_errors=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    yield family


# -- serve: bounded bodies, finite sampling options ------------------------------------------------------
def _serve_cases() -> list[tuple[str, bytes, int]]:
    def chat(**fields: Any) -> str:
        return json.dumps({"model": "nano", "messages": [{"role": "user", "content": "hi"}], "seed": 1, "max_tokens": 2,
                           **fields})

    cases = [(f"[ x {n:,}", b"[" * n, 400) for n in (33, 1_000, 100_000, 1_000_000)]
    cases += [(f"{{ x {n:,}", b'{"a":' * n + b"1" + b"}" * n, 400) for n in (33, 10_000, 100_000)]
    cases += [("[{ alternating x 50,000", b'[{"a":' * 50_000, 400),
              ("deep inside messages", chat(messages=json.loads("[" * 40 + "]" * 40)).encode(), 400),
              ("deep inside user", chat(user=json.loads('{"a":' * 40 + "1" + "}" * 40)).encode(), 400)]
    for option in ("temperature", "top_p", "top_k", "seed", "max_tokens", "n", "top_logprobs"):
        base = json.loads(chat())
        base.pop(option, None)
        for literal in ("NaN", "Infinity", "-Infinity", "1e999", "-1e999"):
            cases.append((f"{option}: {literal}", f'{json.dumps(base)[:-1]}, "{option}": {literal}}}'.encode(), 400))
    cases += [("temperature: \"nan\" as a string", chat(temperature="nan").encode(), 400),
              ("top_p: \"inf\" as a string", chat(top_p="inf").encode(), 400)]
    return cases


def _post(base: str, body: bytes, chunked: bool = False) -> int:
    import http.client
    from urllib.parse import urlparse

    where = urlparse(base)
    conn = http.client.HTTPConnection(where.hostname, where.port, timeout=120)
    try:
        if chunked:
            conn.request("POST", "/v1/chat/completions", body=iter([body[i:i + 2**20] for i in range(0, len(body), 2**20)]),
                         headers={"Content-Type": "application/json"}, encode_chunked=True)
        else:
            conn.request("POST", "/v1/chat/completions", body=body, headers={"Content-Type": "application/json"})
        response = conn.getresponse()
        response.read()
        return response.status
    except (ConnectionError, http.client.HTTPException):
        return -1  # the server closed the connection while the body was still being sent
    finally:
        conn.close()


def probe_serve() -> Iterator[Family]:
    family = Family("serve: deep, large or non-finite request bodies get a 4xx naming the problem")
    work = _tmp("serve")
    try:
        from arlkit.policies import SamplingConfig
        from arlkit.policies.hf import HFPolicy
        from arlkit.policies.serve import OpenAICompatibleServer
        from arlkit.rollout.corpus import init_tiny_model

        model = init_tiny_model("nano", work / "nano", seed=0)
        policy = HFPolicy.from_pretrained(model, SamplingConfig(max_new_tokens=2))
        good = json.dumps({"model": "nano", "messages": [{"role": "user", "content": "hi"}], "seed": 1}).encode()
        with OpenAICompatibleServer(policy, "nano") as server:
            for name, body, want in _serve_cases():
                status = _post(server.base_url, body)
                after = _post(server.base_url, good)
                family.check(name, status == want and after == 200, f"status {status} (want {want}), then {after}")
            big = b'{"model": "nano", "user": "' + b"x" * (17 * 2**20) + b'"}'
            for name, chunked in (("17 MiB with Content-Length", False), ("17 MiB chunked", True)):
                status = _post(server.base_url, big, chunked=chunked)
                after = _post(server.base_url, good)
                family.check(name, status in (413, -1) and after == 200, f"status {status}, then {after}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    yield family


FAMILIES: dict[str, Callable[[], Iterator[Family]]] = {
    "runlock": probe_runlock,
    "duplicates": probe_duplicates,
    "planted": probe_planted,
    "yaml": probe_yaml,
    "badout": probe_badout,
    "vocab": probe_vocab,
    "serve": probe_serve,
}

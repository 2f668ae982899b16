#!/usr/bin/env python3
"""test_two_nodes.py TORCHCONFORM [CHECK...]: the Python reference's data-parallel checks across two
torchrun agents on this machine, as on two machines (CTest python.two_nodes; the C++ twin is
DistributedFaults.TwoNodesOnLoopbackRunTheDistributedCheck).

Each agent is `torchrun --nnodes 2 --nproc-per-node 1` with a c10d rendezvous on 127.0.0.1, the
way docs/distributed.md runs a Python recipe on two hosts; they share a working directory (the
checkpoints rank 0 writes are read by the other node, as on a shared file system). For each check
(default: distributed and fsdp) the cell rank 0 reports must be `ok` on `cpu×2` with every promise
held. Exit 0 when so; 1 naming what was not.
"""
import json
import os
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REFERENCE = os.path.join(HERE, "..", "reference", "reference.py") + ":PythonReference"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_two_agents(binary: str, check: str, work: str) -> dict:
    torchrun = os.path.join(os.path.dirname(sys.executable), "torchrun")
    port = free_port()
    report = os.path.join(work, f"{check}.json")
    agents = []
    for node in range(2):
        argv = [torchrun, "--nnodes=2", "--nproc-per-node=1", "--rdzv-backend=c10d",
                f"--rdzv-endpoint=127.0.0.1:{port}", f"--rdzv-id=tc-two-nodes-{check}-{port}", "--max-restarts=0",
                f"--log-dir={os.path.join(work, f'torchelastic-{check}-{node}')}", "--no-python", binary, "run", "--device", "cpu", "--check", check, "--python", REFERENCE, "--recipe", "py_reference",
                "--json", report, "--html", ""]
        log = open(os.path.join(work, f"{check}-node{node}.log"), "w")
        agents.append((subprocess.Popen(argv, cwd=work, stdout=log, stderr=subprocess.STDOUT), log))
    deadline = time.monotonic() + 400
    codes = []
    for p, log in agents:
        try:
            codes.append(p.wait(timeout=max(1, deadline - time.monotonic())))
        except subprocess.TimeoutExpired:
            p.kill()
            codes.append("timed out")
        log.close()
    for node, code in enumerate(codes):
        if code != 0:
            tail = open(os.path.join(work, f"{check}-node{node}.log")).read()[-3000:]
            raise AssertionError(f"{check}: agent {node} exited {code}:\n{tail}")
    cells = json.load(open(report))["cells"]
    if len(cells) != 1:
        raise AssertionError(f"{check}: {len(cells)} cells in rank 0's report, expected one")
    return cells[0]


def main() -> int:
    binary = os.path.abspath(sys.argv[1])
    checks = sys.argv[2:] or ["distributed", "fsdp"]
    failures = []
    with tempfile.TemporaryDirectory(prefix="tc-two-nodes-") as work:
        for check in checks:
            t0 = time.monotonic()
            try:
                cell = run_two_agents(binary, check, work)
            except AssertionError as e:
                failures.append(str(e))
                continue
            promises = cell.get("metrics", {}).get("promises", [])
            not_held = [f"{p['id']}: {p['status']}: {p['evidence'][:300]}" for p in promises if p["status"] != "held"]
            print(f"{check} / {cell['recipe']} on {cell['device']}, two agents: {cell['verdict']} "
                  f"({time.monotonic() - t0:.0f} s)")
            for p in promises:
                print(f"  {p['id']}: {p['status']}: {p['evidence'][:160]}")
            if cell["verdict"] != "ok" or cell["device"] != "cpu\u00d72" or not promises or not_held:
                failures.append(f"{check}: verdict {cell['verdict']} on {cell['device']}: {cell['evidence'][:600]}"
                                + "".join("\n  not held: " + n for n in not_held))
    for f in failures:
        print("FAIL " + f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

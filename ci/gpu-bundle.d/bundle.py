"""Helper of the torchconform GPU bundle's run.sh (runs under the GPU machine's python3).

  bundle.py verify BUNDLE            every file of MANIFEST.json present with its size and sha256
  bundle.py probe BUNDLE             import torch: versions, library folders, devices; refuses (exit 2)
                                     when torch or CUDA differ from the manifest or glibc is too old
  bundle.py checks LIST.json         the check names of `torchconform list --json`, one a line
  bundle.py merge OUT.json PARTS...  one report from the per-check reports (cells concatenated)
  bundle.py summary OUTDIR STATEDIR BUNDLE   OUTDIR/summary.txt from run.sh's state and the results
  bundle.py sweep MARKER             SIGKILLs every process whose environment holds MARKER

Standard library only; Python 3.8 or newer.
"""
import hashlib
import json
import os
import signal
import sys

EXIT_REFUSED = 2


def load_manifest(bundle):
    with open(os.path.join(bundle, "MANIFEST.json")) as f:
        return json.load(f)


def cmd_verify(bundle):
    try:
        manifest = load_manifest(bundle)
    except (OSError, ValueError) as e:
        print("bundle is damaged: MANIFEST.json unreadable: %s" % e)
        return EXIT_REFUSED
    bad = []
    for rel, want in sorted(manifest["files"].items()):
        path = os.path.join(bundle, rel)
        try:
            with open(path, "rb") as f:
                data = f.read()
        except OSError as e:
            bad.append("%s: %s" % (rel, e.strerror))
            continue
        if len(data) != want["size"] or hashlib.sha256(data).hexdigest() != want["sha256"]:
            bad.append("%s: size or sha256 differs from MANIFEST.json" % rel)
    if bad:
        print("bundle is damaged (copy it again):\n  " + "\n  ".join(bad))
        return EXIT_REFUSED
    return 0


def version_tuple(v):
    out = []
    for part in v.split("."):
        digits = "".join(ch for ch in part if ch.isdigit())
        out.append(int(digits) if digits else 0)
    return tuple(out)


def cmd_probe(bundle):
    """Prints one JSON object; exit 2 with a message on stderr when the bundle cannot run here."""
    manifest = load_manifest(bundle)
    info = {"python": sys.executable, "python_version": sys.version.split()[0]}
    libc = os.confstr("CS_GNU_LIBC_VERSION") if hasattr(os, "confstr") else None
    info["glibc"] = libc.split()[-1] if libc else None
    need = manifest.get("requires_glibc")
    if need and info["glibc"] and version_tuple(info["glibc"]) < version_tuple(need):
        sys.stderr.write("refused: the bundle's binaries need glibc >= %s, this machine has %s\n"
                         % (need, info["glibc"]))
        return EXIT_REFUSED
    try:
        import torch
    except Exception as e:  # ImportError, or a broken install's OSError
        sys.stderr.write("refused: %s cannot import torch (%s: %s); the bundle needs torch %s\n"
                         % (sys.executable, type(e).__name__, e, manifest["torch_version"]))
        return EXIT_REFUSED
    info["torch_version"] = torch.__version__
    info["cuda_version"] = torch.version.cuda
    if (torch.__version__, torch.version.cuda) != (manifest["torch_version"], manifest["cuda_version"]):
        sys.stderr.write(
            "refused: this bundle was built against torch %s (CUDA %s), but %s has torch %s (CUDA %s).\n"
            "Build a matching bundle on the CPU machine: TC_GPU_TORCH=<version> ci/gpu-bundle\n"
            % (manifest["torch_version"], manifest["cuda_version"], sys.executable, torch.__version__,
               torch.version.cuda))
        return EXIT_REFUSED
    torch_dir = os.path.dirname(os.path.abspath(torch.__file__))
    info["torch_lib"] = os.path.join(torch_dir, "lib")
    # The wheel's CUDA libraries: site-packages/nvidia/<package>/lib (cu13 wheels: nvidia/cu13/lib).
    nvidia = os.path.join(os.path.dirname(torch_dir), "nvidia")
    libs = []
    if os.path.isdir(nvidia):
        for name in sorted(os.listdir(nvidia)):
            d = os.path.join(nvidia, name, "lib")
            if os.path.isdir(d):
                libs.append(d)
    info["nvidia_libs"] = libs
    try:
        info["cudnn"] = torch.backends.cudnn.version()
    except Exception as e:
        info["cudnn"] = "unavailable: %s" % e
    try:
        n = torch.cuda.device_count()
    except Exception as e:
        n = 0
        info["cuda_error"] = str(e)
    info["device_count"] = n
    info["devices"] = []
    for i in range(n):
        try:
            p = torch.cuda.get_device_properties(i)
            info["devices"].append({"index": i, "name": p.name, "memory_bytes": p.total_memory,
                                    "sms": p.multi_processor_count,
                                    "capability": "%d.%d" % (p.major, p.minor)})
        except Exception as e:
            info["devices"].append({"index": i, "error": str(e)})
    try:
        v = torch.cuda.nccl.version() if n else None
        info["nccl"] = ".".join(map(str, v)) if isinstance(v, tuple) else v
    except Exception as e:
        info["nccl"] = "unavailable: %s" % e
    print(json.dumps(info, indent=1))
    return 0


def cmd_checks(list_json):
    with open(list_json) as f:
        catalogue = json.load(f)
    for c in catalogue["checks"]:
        print(c["name"] if isinstance(c, dict) else c)
    return 0


def cmd_merge(out, parts):
    """The per-check reports as one: cells in order; tool, environment from the first; summary
    counted as harness/contract/record.cpp's summarize() counts it."""
    merged = None
    runs = []
    for p in parts:
        try:
            with open(p) as f:
                r = json.load(f)
        except (OSError, ValueError):
            continue
        runs.append(r["run"])
        if merged is None:
            merged = r
            merged.pop("sha256", None)
        else:
            merged["cells"].extend(r["cells"])
            merged["benchmarks"].extend(r["benchmarks"])
    if merged is None:
        print("no per-check report to merge")
        return 1
    merged["run"] = dict(runs[0])
    merged["run"]["ended_at"] = runs[-1]["ended_at"]
    # One `run --check C` per check (each with its own time limit): their command lines.
    merged["run"]["parts"] = [r["argv"] for r in runs]
    counts = {v: 0 for v in ("ok", "missed", "false_alarm", "fail", "error", "skipped")}
    for c in merged["cells"]:
        counts[c["verdict"]] = counts.get(c["verdict"], 0) + 1
    counts["total"] = len(merged["cells"])
    merged["summary"] = counts
    tmp = out + ".tmp"
    with open(tmp, "w") as f:
        json.dump(merged, f, indent=2)
        f.write("\n")
    os.replace(tmp, out)
    return 0


def read_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def clip(text, limit=1500):
    text = text.strip()
    return text if len(text) <= limit else text[:limit] + " [... %d more characters]" % (len(text) - limit)


def indent(text, prefix="      "):
    return "\n".join(prefix + line for line in text.splitlines())


def read_text(path):
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return ""


def cmd_summary(outdir, statedir, bundle):
    """statedir holds what run.sh knows: probe.json, steps.tsv (name, status, wall s, budget s, exit,
    note), current (the step under way: name, start s), verdict, driver, mode (quick, budget s)."""
    st = {"probe": read_json(os.path.join(statedir, "probe.json")), "steps": []}
    for line in read_text(os.path.join(statedir, "steps.tsv")).splitlines():
        f = line.split("\t")
        if len(f) >= 5:
            st["steps"].append({"name": f[0], "status": f[1], "wall_s": float(f[2] or 0), "budget_s": f[3],
                                "rc": f[4], "note": f[5] if len(f) > 5 else ""})
    cur = read_text(os.path.join(statedir, "current")).split("\t")
    if cur[0]:
        st["current"] = {"name": cur[0], "started_s": cur[1] if len(cur) > 1 else "?"}
    st["verdict"] = read_text(os.path.join(statedir, "verdict")) or None
    st["driver"] = read_text(os.path.join(statedir, "driver")) or None
    mode = read_text(os.path.join(statedir, "mode")).split()
    st["quick"] = bool(mode) and mode[0] == "quick"
    st["budget_s"] = mode[1] if len(mode) > 1 else "?"
    try:
        st["manifest"] = load_manifest(bundle)
    except (OSError, ValueError):
        st["manifest"] = {}
    lines = ["torchconform GPU bundle run", "=" * 27, ""]
    hook = read_text(os.path.join(statedir, "test_hook"))
    if hook:
        lines += [hook, ""]
    verdict = st["verdict"] or "run.sh did not finish (interrupted or killed): see the steps below"
    lines += ["Result: " + verdict, ""]
    m = st["manifest"]
    lines += ["Bundle: git %s, built against torch %s (CUDA %s)" % (m.get("git_commit"), m.get("torch_version"),
                                                                   m.get("cuda_version")),
              "Mode: %s (whole-run budget %s s)" % ("--quick" if st["quick"] else "full", st["budget_s"]), ""]

    p = st.get("probe") or {}
    run = read_json(os.path.join(outdir, "run.json"))
    gpu_env = ((run or {}).get("environment") or {}).get("gpu") or {}
    devices = p.get("devices") or gpu_env.get("devices") or []
    lines.append("Machine")
    if devices:
        for d in devices:
            lines.append("  GPU %s: %s, %.1f GiB, %s SMs, compute capability %s"
                         % (d.get("index"), d.get("name"), (d.get("memory_bytes") or 0) / 2**30, d.get("sms"),
                            d.get("capability", "?")))
    else:
        lines.append("  GPU: no CUDA device")
    lines += ["  driver: %s" % (st.get("driver") or gpu_env.get("cuda_driver") or "unknown (no nvidia-smi)"),
              "  CUDA (torch built with): %s; CUDA runtime (report): %s" % (p.get("cuda_version"),
                                                                          gpu_env.get("cuda_runtime")),
              "  cuDNN: %s" % (p.get("cudnn") if p.get("cudnn") is not None else gpu_env.get("cudnn")),
              "  NCCL: %s" % (p.get("nccl") or gpu_env.get("nccl")),
              "  torch: %s (%s), python %s, glibc %s" % (p.get("torch_version"), p.get("python"),
                                                        p.get("python_version"), p.get("glibc")),
              "  libstdc++: %s" % ("the bundle's lib/cxx/ (the machine's lacks a version the binaries need)"
                                   if read_text(os.path.join(statedir, "cxx_fallback")) else "the machine's own"),
              ""]

    lines.append("Steps (wall time / budget)")
    for s in st.get("steps", []):
        note = (" - " + s["note"]) if s.get("note") else ""
        lines.append("  %-28s %-11s %6.1f s / %4s s  exit %s%s" % (
            s["name"], s["status"], s.get("wall_s") or 0.0, s.get("budget_s"), s.get("rc"), note))
    if st.get("current"):
        lines.append("  %-28s INTERRUPTED or still running when this was written (started at %s s)"
                     % (st["current"]["name"], st["current"].get("started_s")))
    lines.append("")

    if run:
        s = run.get("summary", {})
        lines.append("Matrix (run.json): " + ", ".join("%s %s" % (k, s.get(k)) for k in
                                                     ("total", "ok", "missed", "false_alarm", "error", "skipped")))
        per_check = {}
        for c in run["cells"]:
            per_check.setdefault(c["check"], {}).setdefault(c["verdict"], 0)
            per_check[c["check"]][c["verdict"]] += 1
        for check, counts in per_check.items():
            lines.append("  %-20s %s" % (check, ", ".join("%s %d" % kv for kv in sorted(counts.items()))))
        bad = [c for c in run["cells"] if c["verdict"] not in ("ok", "skipped")]
        skipped = [c for c in run["cells"] if c["verdict"] == "skipped"]
        lines += ["", "Cells not ok (missed / false_alarm / fail / error): %d" % len(bad)]
        for c in bad:
            lines.append("  %s  %s x %s on %s: expected %s, outcome %s" % (
                c["verdict"].upper(), c["check"], c["recipe"], (c.get("metrics") or {}).get("device_label", c["device"]),
                c["expected"], c["outcome"]))
            lines.append(indent(clip(c.get("evidence", ""))))
        lines += ["", "Cells skipped: %d" % len(skipped)]
        for c in skipped:
            lines.append("  %s x %s on %s: %s" % (c["check"], c["recipe"], c["device"], clip(c.get("evidence", ""), 300)))
        lines.append("")
    else:
        lines += ["Matrix: no run.json (no run step finished)", ""]

    bench = read_json(os.path.join(outdir, "bench.json"))
    if bench:
        lines.append("Benchmarks (bench.json): median [cv]")
        for b in bench.get("benchmarks", []):
            lines.append("  %-48s %-5s %12.4g %s [%.3f]" % (b["name"], b["device"], b["median"], b["unit"], b["cv"]))
        lines.append("")
    allreduce = read_json(os.path.join(outdir, "allreduce.json"))
    if allreduce:
        lines.append("All-reduce (allreduce.json): median over repetitions")
        by_name = {}
        for b in allreduce.get("benchmarks", []):
            if b.get("aggregate_name") == "median":
                by_name[b.get("run_name", b["name"])] = b
        for name, b in by_name.items():
            lines.append("  %-48s algbw %8.2f GB/s  busbw %8.2f GB/s  wrong %d" % (
                name, b.get("algbw_GBps", 0.0), b.get("busbw_GBps", 0.0), int(b.get("wrong", 0))))
        lines.append("")

    text = "\n".join(lines) + "\n"
    tmp = os.path.join(outdir, ".summary.txt.tmp")
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, os.path.join(outdir, "summary.txt"))
    return 0


def cmd_sweep(marker):
    """SIGKILL to every process carrying MARKER=... in its environment (what a timed-out step
    started, torchrun's workers included, which live in sessions of their own)."""
    needle = marker.encode() + b"\0"
    me = os.getpid()
    killed = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == me:
            continue
        try:
            with open("/proc/%s/environ" % pid, "rb") as f:
                env = f.read()
        except OSError:
            continue
        if (b"\0" + env).find(b"\0" + needle) >= 0:
            try:
                os.kill(int(pid), signal.SIGKILL)
                killed.append(pid)
            except OSError:
                pass
    if killed:
        print("killed leftover process(es) %s" % " ".join(killed))
    return 0


def main(argv):
    if len(argv) < 2:
        sys.stderr.write(__doc__)
        return EXIT_REFUSED
    cmd, args = argv[1], argv[2:]
    if cmd == "verify":
        return cmd_verify(*args)
    if cmd == "probe":
        return cmd_probe(*args)
    if cmd == "checks":
        return cmd_checks(*args)
    if cmd == "merge":
        return cmd_merge(args[0], args[1:])
    if cmd == "summary":
        return cmd_summary(*args)
    if cmd == "sweep":
        return cmd_sweep(*args)
    sys.stderr.write(__doc__)
    return EXIT_REFUSED


if __name__ == "__main__":
    sys.exit(main(sys.argv))

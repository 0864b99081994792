"""Whole commands in fresh processes, as users meet them, against references run in the same rounds.

Every case is a new process (posix_spawn, then wait4 for its resource usage): wall time from spawn to
exit, and the child's minor page faults. Cases run in rotating order for --rounds rounds, so noise from
neighbours on a shared machine spreads over all of them; medians are printed with ratios taken within
this run. scripts/bench-fresh.sh builds everything and passes the paths.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import time


def run_once(argv: list[str], env: dict[str, str]) -> tuple[float, int, str]:
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env)
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    elapsed_ms = (time.perf_counter() - t0) * 1e3
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        sys.exit(f"bench_fresh: {' '.join(argv)} exited {proc.returncode}:\n{out.decode(errors='replace')}")
    return elapsed_ms, usage.ru_minflt, out.decode(errors="replace")


OPEN_AND_LIST = "import {mod}; f = {mod}.safe_open({path!r}, framework='np'); n = len(list(f.keys()))"
# The open alone, first call after start: safe_open() with the package and numpy already imported (the
# reference wheel imports numpy inside safe_open(framework='np'); ours only with the first array).
FIRST_OPEN = (
    "import time, numpy, {mod}; t = time.perf_counter(); f = {mod}.safe_open({path!r}, framework='np'); "
    "print('first_ms=%.3f' % ((time.perf_counter() - t) * 1e3)); n = len(list(f.keys()))"
)


def cases(args) -> dict[str, tuple[list[str], dict[str, str]]]:
    plain = dict(os.environ)
    # As users run them: bytecode cached (the untimed first run writes it), for both packages.
    python_env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPATH")}
    ours_py = dict(python_env, PYTHONPATH=args.pythonpath)
    ref_py = dict(python_env)
    c: dict[str, tuple[list[str], dict[str, str]]] = {}
    c["hello-world (C++, reference)"] = ([args.hello], plain)
    clis = [("ours", args.cli)] + ([("base", args.base_cli)] if args.base_cli else [])
    for label, cli in clis:
        c[f"{label}: safeweights --version"] = ([cli, "--version"], plain)
        for tag, path in (("700", args.f700), ("20k", args.f20k)):
            c[f"{label}: safeweights validate {tag}"] = ([cli, "validate", path], plain)
    tools = [("ours", args.parse_tool)] + ([("base", args.base_parse_tool)] if args.base_parse_tool else [])
    for label, tool in tools:
        for tag, path in (("700", args.f700), ("20k", args.f20k)):
            c[f"{label}: bench_fresh_parse, first parse {tag}"] = ([tool, "parse", path, "0"], plain)
    if args.rust_parse_tool:
        for tag, path in (("700", args.f700), ("20k", args.f20k)):
            c[f"rust: reference_parse, first parse {tag}"] = ([args.rust_parse_tool, path, "0"], plain)
    c["python: bare interpreter (reference)"] = ([args.python, "-c", "pass"], plain)
    if args.ref_python:
        c["python: import safetensors (reference wheel)"] = ([args.ref_python, "-c", "import safetensors"], ref_py)
    c["python: import safeweights"] = ([args.python, "-c", "import safeweights"], ours_py)
    for tag, path in (("700", args.f700), ("20k", args.f20k)):
        if args.ref_python:
            c[f"python {tag}: reference wheel import+safe_open+keys"] = (
                [args.ref_python, "-c", OPEN_AND_LIST.format(mod="safetensors", path=path)], ref_py)
            c[f"python {tag}: reference wheel first safe_open"] = (
                [args.ref_python, "-c", FIRST_OPEN.format(mod="safetensors", path=path)], ref_py)
        c[f"python {tag}: safeweights import+safe_open+keys"] = (
            [args.python, "-c", OPEN_AND_LIST.format(mod="safeweights", path=path)], ours_py)
        c[f"python {tag}: safeweights first safe_open"] = (
            [args.python, "-c", FIRST_OPEN.format(mod="safeweights", path=path)], ours_py)
    return c


def reported(out: str, key: str) -> float | None:
    for word in out.split():
        if word.startswith(key + "="):
            return float(word.split("=", 1)[1])
    return None


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--cli", required=True)
    p.add_argument("--base-cli", help="another build of the CLI (e.g. the branch point), measured alongside")
    p.add_argument("--parse-tool", required=True, help="bench_fresh_parse")
    p.add_argument("--base-parse-tool", help="bench_fresh_parse built against another library build")
    p.add_argument("--rust-parse-tool", help="bench/rust_reference's reference_parse (the reference's parse in Rust)")
    p.add_argument("--hello", required=True, help="a plain C++ hello-world binary")
    p.add_argument("--python", default=sys.executable)
    p.add_argument("--pythonpath", required=True, help="where the built safeweights package lies")
    p.add_argument("--ref-python", help="an interpreter with the reference `safetensors` wheel")
    p.add_argument("--f700", required=True)
    p.add_argument("--f20k", required=True)
    p.add_argument("--rounds", type=int, default=15)
    args = p.parse_args()

    all_cases = cases(args)
    names = list(all_cases)
    wall: dict[str, list[float]] = {n: [] for n in names}
    faults: dict[str, list[int]] = {n: [] for n in names}
    inner: dict[str, list[float]] = {n: [] for n in names}
    for n in names:  # one untimed run each: page cache and dynamic loader caches warm
        run_once(*all_cases[n])
    for r in range(args.rounds):
        for i in range(len(names)):
            n = names[(i + r) % len(names)]
            ms, flt, out = run_once(*all_cases[n])
            wall[n].append(ms)
            faults[n].append(flt)
            first = reported(out, "first_ms")
            if first is not None:
                inner[n].append(first)

    print(f"machine: {os.cpu_count()} cores, {platform.processor() or platform.machine()}, kernel {platform.release()}")
    print(f"rounds: {args.rounds}, rotating order; load after: {os.getloadavg()[0]:.2f}")
    print(f"{'case (fresh process each time)':58} {'median ms':>10} {'min ms':>8} {'minflt':>7} {'first call ms':>13}")
    for n in names:
        first = f"{statistics.median(inner[n]):.3f}" if inner[n] else ""
        print(f"{n:58} {statistics.median(wall[n]):10.2f} {min(wall[n]):8.2f} {int(statistics.median(faults[n])):7d} {first:>13}")

    def ratio(a: str, b: str, what=wall) -> None:
        if a in what and b in what and what[a] and what[b]:
            print(f"  {a} / {b}: {statistics.median(what[a]) / statistics.median(what[b]):.2f}x")

    print("ratios (medians, this run):")
    ratio("ours: safeweights --version", "hello-world (C++, reference)")
    ratio("ours: safeweights validate 20k", "base: safeweights validate 20k")
    ratio("ours: safeweights validate 700", "base: safeweights validate 700")
    ratio("ours: safeweights --version", "base: safeweights --version")
    ratio("ours: bench_fresh_parse, first parse 20k", "base: bench_fresh_parse, first parse 20k", inner)
    for tag in ("700", "20k"):
        ratio(f"ours: bench_fresh_parse, first parse {tag}", f"rust: reference_parse, first parse {tag}", inner)
    for tag in ("700", "20k"):
        ratio(f"python {tag}: safeweights import+safe_open+keys", f"python {tag}: reference wheel import+safe_open+keys")
        ratio(f"python {tag}: safeweights first safe_open", f"python {tag}: reference wheel first safe_open", inner)


if __name__ == "__main__":
    main()

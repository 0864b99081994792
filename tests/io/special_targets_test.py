#!/usr/bin/env python3
"""Writers and the targets that are not regular files: device nodes, FIFOs and links to them.

As root, a writer that renamed its file over any existing target would replace /dev/null (and every
later `> /dev/null` would fill a file). These checks never touch the machine's /dev: the script runs
itself again inside a private mount namespace (`unshare -m`), mounts a tmpfs on a scratch folder there
and makes its own nodes with mknod: null (1,3), full (1,7), zero (1,5), a FIFO, and symbolic links to
them and to /proc/self/fd/1 (what /dev/stdout is). After each command the node must still be what it
was, and:
  - convert and pack (a seekable container) refuse every such target: UnsafePath, exit 1;
  - cat -o streams into a character device or FIFO in place: exit 0 into null, zero, the FIFO (whose
    reader gets the bytes) and the link to the pipe that is its standard output (the bytes arrive on
    it); into full, ENOSPC and exit 1;
  - with --python, the Python package's save_file (safeweights.numpy) refuses them all (UnsafePath).

Not root, or no permission to unshare: the reason is printed and the exit status is 77 (skipped).
Usage: special_targets_test.py --cli PATH/TO/safeweights [--python]. Exit 0 when every check passed.
"""

import argparse
import json
import os
import stat
import struct
import subprocess
import sys
import tempfile
import threading

FAILURES = []
WAIT = 60  # seconds: every command is bounded
UNSHARE = ["unshare", "-m", "--propagation", "private"]
NODES = {"null": (1, 3), "full": (1, 7), "zero": (1, 5)}
TENSOR = struct.pack("<4f", 1.0, 2.0, 3.0, 4.0)
SCRATCH = None  # the folder of scratch nodes, inside the namespace


def check(condition, message):
    if not condition:
        FAILURES.append(message)
        print("FAIL: " + message, file=sys.stderr)
    return condition


def skip(reason):
    print("SKIPPED: " + reason)
    sys.exit(77)


def write_inputs(root):
    """A safetensors file (tensor t: F32 [4]) and a diffusers folder to pack."""
    header = json.dumps({"t": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}}).encode()
    header += b" " * (-len(header) % 8)
    model = os.path.join(root, "model.safetensors")
    with open(model, "wb") as f:
        f.write(struct.pack("<Q", len(header)) + header + TENSOR)
    folder = os.path.join(root, "pipeline")
    os.makedirs(os.path.join(folder, "vae"))
    with open(os.path.join(folder, "model_index.json"), "w") as f:
        f.write('{"vae": ["diffusers", "AutoencoderKL"]}')
    with open(os.path.join(folder, "vae", "config.json"), "w") as f:
        f.write("{}")
    return model, folder


def make_nodes(scratch):
    """The nodes, FIFO and links, made anew: each command meets them as they should be."""
    for name in os.listdir(scratch):
        os.unlink(os.path.join(scratch, name))
    for name, (major, minor) in NODES.items():
        os.mknod(os.path.join(scratch, name), 0o666 | stat.S_IFCHR, os.makedev(major, minor))
    os.mkfifo(os.path.join(scratch, "fifo"))
    for name in list(NODES) + ["fifo"]:
        os.symlink(name, os.path.join(scratch, "link-" + name))
    os.symlink("/proc/self/fd/1", os.path.join(scratch, "stdout"))


def nodes_intact(scratch, what):
    """Every node, FIFO and link is still what make_nodes made."""
    for name, (major, minor) in NODES.items():
        st = os.lstat(os.path.join(scratch, name))
        check(stat.S_ISCHR(st.st_mode) and (os.major(st.st_rdev), os.minor(st.st_rdev)) == (major, minor),
              "%s: %s is no longer the character device (%d, %d)" % (what, name, major, minor))
    check(stat.S_ISFIFO(os.lstat(os.path.join(scratch, "fifo")).st_mode), "%s: fifo is no longer a FIFO" % what)
    links = ["link-" + n for n in list(NODES) + ["fifo"]] + ["stdout"]
    for name in links:
        check(os.path.islink(os.path.join(scratch, name)), "%s: %s is no longer a link" % (what, name))
    stray = sorted(set(os.listdir(scratch)) - set(NODES) - {"fifo"} - set(links))
    check(stray == [], "%s: left %s" % (what, stray))


def run(cmd):
    make_nodes(SCRATCH)
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=WAIT)


def expect_refused(scratch, what, cmd, kind_text):
    r = run(cmd)
    err = r.stderr.decode(errors="replace")
    check(r.returncode == 1, "%s: exit status %d, expected 1 (stderr: %s)" % (what, r.returncode, err.strip()))
    check("UnsafePath: the output is %s, not a regular file" % kind_text in err, "%s: stderr %r does not say UnsafePath and what the output is" % (what, err))
    nodes_intact(scratch, what)


def cat_into_fifo(cli, model, scratch, target):
    """cat -o TARGET (the FIFO or a link to it) with a reader on the FIFO: (result, bytes read)."""
    got = []
    make_nodes(scratch)
    reader = threading.Thread(target=lambda: got.append(open(os.path.join(scratch, "fifo"), "rb").read()), daemon=True)
    reader.start()
    try:
        r = subprocess.run([cli, "cat", model, "t", "-o", target], stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=WAIT)
    finally:
        if reader.is_alive():  # the command never opened the FIFO: let the reader go
            os.close(os.open(os.path.join(scratch, "fifo"), os.O_WRONLY | os.O_NONBLOCK))
        reader.join(WAIT)
    return r, got[0] if got else b""


def check_cli(cli, model, folder, scratch):
    for name in ["null", "full", "zero", "link-null", "link-full"]:
        kind = "a character device"
        target = os.path.join(scratch, name)
        expect_refused(scratch, "convert --to gguf into " + name, [cli, "convert", model, target, "--to", "gguf"], kind)
        expect_refused(scratch, "convert into " + name, [cli, "convert", model, target, "--to", "safetensors"], kind)
        expect_refused(scratch, "pack into " + name, [cli, "pack", folder, target], kind)
    for name in ["fifo", "link-fifo"]:
        target = os.path.join(scratch, name)
        expect_refused(scratch, "convert into " + name, [cli, "convert", model, target, "--to", "gguf"], "a FIFO")
        expect_refused(scratch, "pack into " + name, [cli, "pack", folder, target], "a FIFO")

    for name in ["null", "zero", "link-null"]:
        r = run([cli, "cat", model, "t", "-o", os.path.join(scratch, name)])
        check(r.returncode == 0, "cat -o %s: exit status %d (%s)" % (name, r.returncode, r.stderr.decode(errors="replace").strip()))
        nodes_intact(scratch, "cat -o " + name)
    for name in ["full", "link-full"]:
        r = run([cli, "cat", model, "t", "-o", os.path.join(scratch, name)])
        err = r.stderr.decode(errors="replace")
        check(r.returncode == 3, "cat -o %s: exit status %d, expected 3 (IoError: the environment)" % (name, r.returncode))
        check("IoError: write failed: No space left on device" in err, "cat -o %s: stderr %r does not report ENOSPC" % (name, err))
        nodes_intact(scratch, "cat -o " + name)
    for name in ["fifo", "link-fifo"]:
        r, got = cat_into_fifo(cli, model, scratch, os.path.join(scratch, name))
        check(r.returncode == 0, "cat -o %s: exit status %d (%s)" % (name, r.returncode, r.stderr.decode(errors="replace").strip()))
        check(got == TENSOR, "cat -o %s: the reader got %r" % (name, got))
        nodes_intact(scratch, "cat -o " + name)
    # What /dev/stdout is: a link to /proc/self/fd/1, here a pipe to this script.
    r = run([cli, "cat", model, "t", "-o", os.path.join(scratch, "stdout")])
    check(r.returncode == 0, "cat -o stdout: exit status %d (%s)" % (r.returncode, r.stderr.decode(errors="replace").strip()))
    check(r.stdout == TENSOR, "cat -o stdout: standard output got %r" % r.stdout)
    nodes_intact(scratch, "cat -o stdout")


SAVE_FILE = r"""
import json, sys
try:
    import numpy as np
    from safeweights.numpy import save_file
except ImportError as e:
    print(json.dumps({"skip": str(e)}))
    sys.exit(0)
results = {}
for target in sys.argv[1:]:
    try:
        save_file({"t": np.arange(4, dtype=np.float32)}, target)
        results[target] = "saved"
    except Exception as e:
        results[target] = "%s (kind %s): %s" % (type(e).__name__, getattr(e, "kind", None), e)
print(json.dumps(results))
"""


def check_python(scratch):
    targets = [os.path.join(scratch, n) for n in ["null", "full", "zero", "link-null", "fifo", "link-fifo"]]
    r = run([sys.executable, "-c", SAVE_FILE] + targets)
    if not check(r.returncode == 0, "save_file: the child failed: %s" % r.stderr.decode(errors="replace")):
        return
    results = json.loads(r.stdout)
    if "skip" in results:
        print("save_file checks skipped: %s" % results["skip"])
        return
    for target, outcome in results.items():
        kind = "a FIFO" if "fifo" in target else "a character device"
        check("(kind UnsafePath)" in outcome and ("the output is %s, not a regular file" % kind) in outcome,
              "save_file(%s): %s" % (os.path.basename(target), outcome))
    nodes_intact(scratch, "save_file")


def inside(args):
    work = tempfile.mkdtemp(prefix="sw-special-")
    scratch = os.path.join(work, "dev")
    os.mkdir(scratch)
    # Private to this namespace: the mount and its nodes vanish with it.
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m,mode=0755", "tmpfs", scratch], check=True)
    global SCRATCH
    SCRATCH = scratch
    try:
        try:
            make_nodes(scratch)
        except PermissionError as e:  # a container whose device rules forbid mknod
            print("SKIPPED: cannot make the scratch device nodes: %s" % e)
            return 77
        model, folder = write_inputs(work)
        check_cli(args.cli, model, folder, scratch)
        if args.python:
            check_python(scratch)
    finally:
        subprocess.run(["umount", "--lazy", scratch])
        subprocess.run(["rm", "-rf", "--one-file-system", work])
    print("%d failures" % len(FAILURES))
    return 1 if FAILURES else 0


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--cli", required=True)
    parser.add_argument("--python", action="store_true", help="also save_file of the Python package on sys.path")
    parser.add_argument("--inside", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.inside:
        return inside(args)
    if os.geteuid() != 0:
        skip("not root: the device nodes are made with mknod (CI runs as root)")
    if subprocess.run(UNSHARE + ["true"], stderr=subprocess.DEVNULL).returncode != 0:
        skip("unshare -m is not permitted here: no private mount namespace for the scratch device nodes")
    cmd = UNSHARE + [sys.executable, os.path.abspath(__file__), "--inside", "--cli", os.path.abspath(args.cli)]
    return subprocess.call(cmd + (["--python"] if args.python else []))


if __name__ == "__main__":
    sys.exit(main())

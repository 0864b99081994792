#!/usr/bin/env python3
"""The CLI's writers under signals and failures: nothing is left behind, nothing half-written appears.

  (a) `pack` killed with SIGINT, SIGTERM or SIGKILL while it writes (the moment is known: the output file
      is open and the input is a 64 GiB sparse file, far from done) dies of that signal and leaves no
      file in the output folder: with nameless temporary files (the default on Linux) for every signal,
      and with the named fallback (SAFEWEIGHTS_NAMED_TEMPFILES=1) for SIGINT and SIGTERM, whose
      handlers remove the name before the process dies;
  (b) `unpack` of an archive with a flipped byte fails with CrcMismatch and creates no folder;
  (c) `unpack` into a non-empty folder is refused; with --force the folder is replaced as a whole (a
      stale file is gone, a planted symlink is replaced, never followed);
  (d) `pack` into a file it packs (by its path, `./` and `..` spellings, a symbolic or hard link) is
      refused with InvalidArgument, exit 2, and writes nothing;
  (e) `unpack --force` into a folder that holds the archive (by any spelling of either) is refused the
      same way, and the folder and the archive stay as they were;
  (f) the success lines of `pack` and `unpack` escape control characters in the output's name (ESC, BEL,
      a newline), as every message of the command line does.

Usage: cli_writes_test.py --cli PATH/TO/safeweights. Exit 0 when every check passed, 1 otherwise.
"""

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import zipfile

FAILURES = []
WAIT = 30.0  # seconds: every wait is bounded


def check(condition, message):
    if not condition:
        FAILURES.append(message)
        print("FAIL: " + message, file=sys.stderr)
    return condition


MODEL_INDEX = b'{"vae": ["diffusers", "AutoencoderKL"]}'


def make_folder(root, big_size):
    os.makedirs(os.path.join(root, "vae"))
    with open(os.path.join(root, "model_index.json"), "wb") as f:
        f.write(MODEL_INDEX)
    with open(os.path.join(root, "vae", "config.json"), "wb") as f:
        f.write(b"{}")
    with open(os.path.join(root, "vae", "weights.txt"), "wb") as f:
        if big_size:
            f.truncate(big_size)  # sparse: costs no disk
        else:
            f.write(b"0123456789abcdef" * 4096)


def output_open(pid, out_dir):
    """True once the process holds a file in out_dir open for writing (named or nameless)."""
    try:
        fds = os.listdir("/proc/%d/fd" % pid)
    except OSError:
        return False
    for fd in fds:
        try:
            target = os.readlink("/proc/%d/fd/%s" % (pid, fd))
        except OSError:
            continue
        if target.startswith(out_dir + "/"):
            return True
    return False


def wait_for(predicate):
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.005)
    return False


def test_pack_signals(cli, tmp):
    src = os.path.join(tmp, "huge")
    make_folder(src, 64 << 30)
    cases = [(sig, False) for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGKILL)]
    cases += [(sig, True) for sig in (signal.SIGINT, signal.SIGTERM)]
    for sig, named in cases:
        what = "(a) pack, %s, %s temporary file" % (sig.name, "named" if named else "nameless")
        out_dir = tempfile.mkdtemp(dir=tmp, prefix="out.")
        env = dict(os.environ)
        env.pop("SAFEWEIGHTS_NAMED_TEMPFILES", None)
        if named:
            env["SAFEWEIGHTS_NAMED_TEMPFILES"] = "1"
        proc = subprocess.Popen([cli, "pack", src, os.path.join(out_dir, "out.dduf")], env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            started = wait_for(lambda: output_open(proc.pid, out_dir))
            check(started, what + ": the output file never opened")
            proc.send_signal(sig)
            rc = proc.wait(timeout=WAIT)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        check(rc == -sig, "%s: exit status %d, expected death by the signal" % (what, rc))
        left = os.listdir(out_dir)
        check(left == [], "%s: left %s" % (what, left))


def make_archive(cli, tmp):
    src = os.path.join(tmp, "small")
    make_folder(src, 0)
    archive = os.path.join(tmp, "small.dduf")
    subprocess.run([cli, "pack", src, archive], check=True, stdout=subprocess.DEVNULL)
    return archive


def test_unpack_crc(cli, tmp, archive):
    with zipfile.ZipFile(archive) as z:
        info = z.getinfo("vae/weights.txt")
    with open(archive, "rb") as f:
        data = bytearray(f.read())
    name_len, extra_len = int.from_bytes(data[info.header_offset + 26:info.header_offset + 28], "little"), \
        int.from_bytes(data[info.header_offset + 28:info.header_offset + 30], "little")
    data[info.header_offset + 30 + name_len + extra_len + 1000] ^= 0x20
    flipped = os.path.join(tmp, "flipped.dduf")
    with open(flipped, "wb") as f:
        f.write(data)
    parent = tempfile.mkdtemp(dir=tmp, prefix="unpack.")
    proc = subprocess.run([cli, "unpack", flipped, os.path.join(parent, "out")], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    check(proc.returncode == 1 and b"CrcMismatch" in proc.stderr,
          "(b) unpack of a flipped byte: exit %d, %r" % (proc.returncode, proc.stderr))
    check(os.listdir(parent) == [], "(b) unpack of a flipped byte left %s" % os.listdir(parent))


def test_unpack_force(cli, tmp, archive):
    parent = tempfile.mkdtemp(dir=tmp, prefix="force.")
    out = os.path.join(parent, "out")
    outside = os.path.join(parent, "outside")
    os.makedirs(os.path.join(out))
    os.makedirs(outside)
    with open(os.path.join(out, "stale.json"), "wb") as f:
        f.write(b"{}")
    os.symlink(outside, os.path.join(out, "vae"))
    proc = subprocess.run([cli, "unpack", archive, out], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    check(proc.returncode != 0 and b"--force" in proc.stderr, "(c) unpack into a non-empty folder: exit %d" % proc.returncode)
    check(sorted(os.listdir(out)) == ["stale.json", "vae"], "(c) a refused unpack changed the folder")
    proc = subprocess.run([cli, "unpack", "--force", archive, out], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    check(proc.returncode == 0, "(c) unpack --force: exit %d, %r" % (proc.returncode, proc.stderr))
    check(sorted(os.listdir(out)) == ["model_index.json", "vae"], "(c) unpack --force left %s" % sorted(os.listdir(out)))
    check(not os.path.islink(os.path.join(out, "vae")), "(c) the planted symlink survived")
    check(os.listdir(outside) == [], "(c) unpack wrote through the symlink: %s" % os.listdir(outside))
    check(sorted(os.listdir(parent)) == ["out", "outside"], "(c) debris: %s" % sorted(os.listdir(parent)))


def snapshot(root):
    """Every file under root with its bytes (links as their targets): what a refused command must keep."""
    files = {}
    for folder, dirs, names in os.walk(root):
        for name in dirs + names:
            path = os.path.join(folder, name)
            if os.path.islink(path):
                files[path] = "-> " + os.readlink(path)
            elif os.path.isfile(path):
                with open(path, "rb") as f:
                    files[path] = f.read()
    return files


def expect_refused(cli, args, root, what, message):
    before = snapshot(root)
    proc = subprocess.run([cli] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    err = proc.stderr.decode(errors="replace")
    check(proc.returncode == 2, "%s: exit %d, expected 2 (%s)" % (what, proc.returncode, err.strip()))
    check("InvalidArgument: " + message in err, "%s: stderr %r does not say %r" % (what, err, message))
    check(snapshot(root) == before, "%s: the files changed (input overwritten, or debris)" % what)


def test_pack_into_its_input(cli, tmp):
    root = tempfile.mkdtemp(dir=tmp, prefix="self.")
    src = os.path.join(root, "pipe")
    make_folder(src, 0)
    weights = os.path.join(src, "vae", "weights.txt")
    os.symlink(weights, os.path.join(root, "link.dduf"))
    os.link(weights, os.path.join(root, "hard.dduf"))
    message = "the output is the input %s (the same file)" % weights
    for out in [weights, os.path.join(src, ".", "vae", "weights.txt"), os.path.join(src, "vae", "..", "vae", "weights.txt"),
                os.path.join(root, "link.dduf"), os.path.join(root, "hard.dduf")]:
        expect_refused(cli, ["pack", src, out], root, "(d) pack into %s" % out, message)
    expect_refused(cli, ["pack", src, os.path.join(src, "model_index.json")], root, "(d) pack into model_index.json",
                   "the output is the input %s" % os.path.join(src, "model_index.json"))


def test_unpack_over_its_archive(cli, tmp, archive):
    root = tempfile.mkdtemp(dir=tmp, prefix="over.")
    out = os.path.join(root, "out")
    os.makedirs(os.path.join(out, "deep"))
    inside = os.path.join(out, "deep", "a.dduf")
    shutil.copy(archive, inside)
    os.symlink(inside, os.path.join(root, "link.dduf"))
    for arch in [inside, os.path.join(root, "link.dduf"), os.path.join(out, "deep", "..", "deep", "a.dduf")]:
        for target in [out, os.path.join(root, ".", "out"), os.path.join(out, "deep", "..", "..", "out")]:
            expect_refused(cli, ["unpack", "--force", arch, target], root, "(e) unpack --force %s into %s" % (arch, target),
                           "the folder holds the input %s: replacing it would remove what is being read" % arch)


def test_success_lines_are_escaped(cli, tmp, archive):
    """pack and unpack name their output as every message does: control characters escaped."""
    root = tempfile.mkdtemp(dir=tmp, prefix="esc.")
    src = os.path.join(root, "pipe")
    make_folder(src, 0)
    odd = "a\x1b[2Jb\x07c\nd"
    escaped = "a\\x1b[2Jb\\x07c\\x0ad"
    proc = subprocess.run([cli, "pack", src, os.path.join(root, odd + ".dduf")], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    check(proc.returncode == 0, "(f) pack: exit %d %r" % (proc.returncode, proc.stderr))
    check(proc.stdout == ("wrote %s/%s.dduf\n" % (root, escaped)).encode(), "(f) pack printed %r" % proc.stdout)
    proc = subprocess.run([cli, "unpack", archive, os.path.join(root, odd)], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    check(proc.returncode == 0, "(f) unpack: exit %d %r" % (proc.returncode, proc.stderr))
    check(proc.stdout == ("wrote 3 files into %s/%s\n" % (root, escaped)).encode(), "(f) unpack printed %r" % proc.stdout)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--cli", required=True)
    args = parser.parse_args()
    cli = os.path.abspath(args.cli)
    with tempfile.TemporaryDirectory(prefix="cli_writes.") as tmp:
        test_pack_signals(cli, tmp)
        archive = make_archive(cli, tmp)
        test_unpack_crc(cli, tmp, archive)
        test_unpack_force(cli, tmp, archive)
        test_pack_into_its_input(cli, tmp)
        test_unpack_over_its_archive(cli, tmp, archive)
        test_success_lines_are_escaped(cli, tmp, archive)
    if FAILURES:
        print("%d check(s) failed" % len(FAILURES), file=sys.stderr)
        return 1
    print("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())

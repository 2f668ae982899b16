#!/usr/bin/env python3
"""Makes hostile torchconform checkpoints from a valid one, for the resilience test.

Usage: make_hostile_checkpoints.py VALID.ckpt OUTDIR CANARY

Each output is a torchconform.checkpoint/2 file whose first line carries the SHA-256 and size of
its (modified) body, recomputed here, so that it passes torchconform's integrity check and reaches
LibTorch's zip reader and unpickler: the test then shows what those and our own bounds check do.

  rezipped_unchanged.ckpt     the same records rewritten by this script, unchanged (a control)
  global_os_system.ckpt       data.pkl replaced by a pickle calling os.system("touch CANARY")
  global_builtins_eval.ckpt   data.pkl replaced by a pickle calling builtins.eval("open(CANARY...)")
  storage_short_data.ckpt     the largest tensor storage record cut to half its bytes: the pickle
                              still declares the tensor's full size (declared size > data)
  view_past_storage.ckpt      data.pkl with the first tensor's storage offset set to 2^30 elements:
                              storages and records agree, but the view reaches past its storage

Before writing them it proves that the two pickles are live: Python's own pickle.loads of each,
with a proof canary of its own, in a child process, creates that file (else exit 1). So a test that
sees CANARY absent has shown that the loader refused a pickle that really runs code, not a dud.
Standard library only (no torch needed).
"""
import hashlib
import io
import os
import struct
import subprocess
import sys
import tempfile
import zipfile

FORMAT = b"torchconform.checkpoint/2"


def split_checkpoint(data: bytes) -> bytes:
    line, sep, body = data.partition(b"\n")
    fields = line.split(b" ")
    if not sep or fields[0] != FORMAT or len(fields) != 3:
        sys.exit(f"not a {FORMAT.decode()} file")
    if hashlib.sha256(body).hexdigest().encode() != fields[1].removeprefix(b"sha256="):
        sys.exit("the valid checkpoint's hash does not match (corrupt input)")
    return body


def checkpoint_file(body: bytes) -> bytes:
    return FORMAT + b" sha256=" + hashlib.sha256(body).hexdigest().encode() + \
        b" bytes=" + str(len(body)).encode() + b"\n" + body


def binunicode(s: str) -> bytes:
    b = s.encode()
    return b"X" + struct.pack("<I", len(b)) + b


def call_global_pickle(module: str, name: str, arg: str) -> bytes:
    # PROTO 2, GLOBAL module.name, BINUNICODE arg, TUPLE1, REDUCE, STOP: unpickling calls name(arg).
    return b"\x80\x02" + b"c" + module.encode() + b"\n" + name.encode() + b"\n" + binunicode(arg) + \
        b"\x85" + b"R" + b"."


def os_system_pickle(canary: str) -> bytes:
    return call_global_pickle("os", "system", f"touch '{canary}'")


def eval_pickle(canary: str) -> bytes:
    return call_global_pickle("builtins", "eval", f"open({canary!r}, 'w').close()")


def rezip(body: bytes, replace=None) -> bytes:
    """The archive with the same records in the same order, some replaced (name -> bytes)."""
    replace = replace or {}
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(body)) as src, zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as dst:
        for info in src.infolist():
            data = replace.get(info.filename, None)
            if data is None:
                data = src.read(info.filename)
            dst.writestr(zipfile.ZipInfo(info.filename, date_time=info.date_time), data)
    return out.getvalue()


def view_past_storage(pkl: bytes) -> bytes:
    """The pickle with the storage offset of its first tensor (the int right after the first
    BINPERSID and its memo put, in _rebuild_tensor_v2's arguments) replaced by 2^30. Protocol 2 has no frames, so
    the opcode may change length."""
    import pickletools

    ops = list(pickletools.genops(pkl))
    for i, (op, _arg, pos) in enumerate(ops):
        if op.name == "BINPERSID":
            j = i + 1
            while ops[j][0].name in ("BINPUT", "LONG_BINPUT", "MEMOIZE"):  # the storage memoised
                j += 1
            nop, narg, npos = ops[j]
            if nop.name not in ("BININT1", "BININT2", "BININT") or narg != 0:
                sys.exit(f"unexpected pickle: {nop.name} {narg!r} after the first BINPERSID")
            end = ops[j + 1][2]
            return pkl[:npos] + b"J" + struct.pack("<i", 1 << 30) + pkl[end:]
    sys.exit("unexpected pickle: no BINPERSID (no tensor)")


def prove_live(make_pickle, what: str) -> None:
    with tempfile.TemporaryDirectory() as d:
        proof = os.path.join(d, "proof-canary")
        code = "import pickle, sys; pickle.loads(open(sys.argv[1], 'rb').read())"
        pkl = os.path.join(d, "p.pkl")
        with open(pkl, "wb") as f:
            f.write(make_pickle(proof))
        subprocess.run([sys.executable, "-c", code, pkl], check=False, stdout=subprocess.DEVNULL)
        if not os.path.exists(proof):
            sys.exit(f"the {what} pickle did not run its code under Python's pickle: not a real test")
        print(f"proof: Python's pickle.loads of the {what} pickle created its canary file")


def main() -> int:
    valid, outdir, canary = sys.argv[1], sys.argv[2], sys.argv[3]
    with open(valid, "rb") as f:
        body = split_checkpoint(f.read())
    with zipfile.ZipFile(io.BytesIO(body)) as z:
        names = z.namelist()
        sizes = {i.filename: i.file_size for i in z.infolist()}
    pkl = [n for n in names if n.endswith("/data.pkl")]
    storages = [n for n in names if "/data/" in n and not n.endswith("/")]
    if len(pkl) != 1 or not storages:
        sys.exit(f"unexpected archive layout: {names}")
    prove_live(os_system_pickle, "os.system")
    prove_live(eval_pickle, "builtins.eval")
    largest = max(storages, key=lambda n: sizes[n])
    with zipfile.ZipFile(io.BytesIO(body)) as z:
        short = z.read(largest)[: sizes[largest] // 2]
    os.makedirs(outdir, exist_ok=True)
    outputs = {
        "rezipped_unchanged.ckpt": rezip(body),  # control: must load as the valid file does
        "global_os_system.ckpt": rezip(body, {pkl[0]: os_system_pickle(canary)}),
        "global_builtins_eval.ckpt": rezip(body, {pkl[0]: eval_pickle(canary)}),
        "storage_short_data.ckpt": rezip(body, {largest: short}),
    }
    with zipfile.ZipFile(io.BytesIO(body)) as z:
        outputs["view_past_storage.ckpt"] = rezip(body, {pkl[0]: view_past_storage(z.read(pkl[0]))})
    for name, new_body in outputs.items():
        with open(os.path.join(outdir, name), "wb") as f:
            f.write(checkpoint_file(new_body))
        print(f"wrote {name} ({len(new_body)} bytes of archive, hash recomputed)")
    print(f"storage_short_data.ckpt: {largest} cut from {sizes[largest]} to {len(short)} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())

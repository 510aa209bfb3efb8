"""Read a profmap recording from Python (bench scripts): version 2 (`profile.pmr`, see
src/profile/pmr/mod.rs for the layout) or version 1 (gzip or plain JSON), as the dict
the version-1 JSON holds (samples as dicts with pid, tid, time_ns, stack, weight_ns,
kind, and waker when present), and the waits table (`waits`: sample, fd, arg0, resource)
from a version-2 recording's WAIT chunks.

    import pmr; rec = pmr.load("out/profile.pmr")
    pmr.recording("out")  # the folder's profile.pmr, else its profile.json.gz
"""
import gzip
import json
import os
import struct
import zlib

MAGIC = b"\x89PMREC\r\n"
STATES = {1: "sleeping", 2: "uninterruptible", 3: "preempted", 4: "other"}


def recording(folder):
    for name in ("profile.pmr", "profile.json.gz"):
        p = os.path.join(folder, name)
        if os.path.exists(p):
            return p
    raise FileNotFoundError(f"no recording in {folder}")


def load(path):
    with open(path, "rb") as f:
        data = f.read()
    if not data.startswith(MAGIC):
        return json.loads(gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data)
    at, rec, samples, waits, first = 12, None, [], [], 0
    while at + 16 <= len(data):
        tag, raw_len, stored_len, crc = struct.unpack_from("<4sIII", data, at)
        stored = data[at + 16: at + 16 + stored_len]
        at += 16 + stored_len
        if len(stored) < stored_len or zlib.crc32(stored) != crc:
            break  # cut off or damaged: keep what came before, as profmap does
        raw = zlib.decompress(stored, -15)
        if tag == b"META":
            rec = json.loads(raw)
        elif tag == b"SMPL":
            first = len(samples)
            samples.extend(_block(raw))
        elif tag == b"WAIT":
            waits.extend(_waits(raw, first))
        elif tag == b"END.":
            break
    if rec is None:
        raise ValueError(f"{path}: no tables")
    if rec.get("sampled") is not None:
        rec["sampled"]["samples"] = samples
        if waits:
            rec["sampled"]["waits"] = waits
    return rec


def _varints(b):
    out, v, shift = [], 0, 0
    for byte in b:
        v |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            out.append(v)
            v, shift = 0, 0
    return out


def _zz(z):
    return (z >> 1) ^ -(z & 1)


def _columns(raw, count):
    at, cols = 0, []

    def varint():
        nonlocal at
        v, shift = 0, 0
        while True:
            byte = raw[at]
            at += 1
            v |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                return v

    n = varint()
    for _ in range(count):
        ln = varint()
        cols.append(raw[at: at + ln])
        at += ln
    return n, cols


def _waits(raw, first):
    """A WAIT chunk (src/profile/pmr/waits.rs): the blocked calls of the block whose
    first sample is `first`."""
    n, cols = _columns(raw, 4)
    sample, fd, arg0, res = (_varints(c) for c in cols)
    out, at = [], first
    for i in range(n):
        at += sample[i]
        w = {"sample": at, "arg0": arg0[i]}
        if fd[i]:
            w["fd"] = _zz(fd[i] - 1)
        if res[i]:
            w["resource"] = res[i] - 1
        out.append(w)
    return out


def _block(raw):
    n, cols = _columns(raw, 7)
    pid, tid, time, stack, weight = (_varints(c) for c in cols[:5])
    kind, wakers = cols[5], iter(_varints(cols[6]))
    p = t = tm = 0
    out = []
    for i in range(n):
        p, t, tm = p + _zz(pid[i]), t + _zz(tid[i]), tm + _zz(time[i])
        code = kind[i]
        s = {"pid": p, "tid": t, "time_ns": tm % (1 << 64),
             "stack": stack[i] - 1 if stack[i] else None, "weight_ns": weight[i],
             "kind": {"kind": "on_cpu"} if code & 7 == 0
             else {"kind": "off_cpu", "state": STATES.get(code & 7, "other")}}
        if code & 8:
            wp, wt, wtm, ws = (next(wakers) for _ in range(4))
            s["waker"] = {"pid": p + _zz(wp), "tid": t + _zz(wt), "time_ns": tm + _zz(wtm),
                          "stack": ws - 1 if ws else None}
        out.append(s)
    return out

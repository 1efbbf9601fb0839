"""An oracle for the safetensors files dtfm-run writes, independent of
dtfm's reader (struct, json, numpy and torch only).

  check FILE DTYPE MODEL      the layout: the header's length and the data
                              8-byte aligned, "__metadata__" with format pt
                              and dtfm.model MODEL, every tensor of DTYPE,
                              in name order, tiling the data exactly
  narrow F32FILE FILE DTYPE   FILE's values are F32FILE's rounded to DTYPE
                              (F16, BF16) as torch rounds them, bit for bit
  close A B TOL               the same names and shapes, values within TOL
  hostile GOOD DIR            writes DIR/<case>.safetensors: GOOD with its
                              header made to lie, one way each
  negate GOOD OUT NAME        GOOD with the F32 tensor NAME negated
  drop GOOD OUT NAME          GOOD without the tensor NAME (and its bytes)
"""
import json
import os
import struct
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "python"))
from dtfm_oracle import read_safetensors  # noqa: E402


def parts(path):
    data = open(path, "rb").read()
    (length,) = struct.unpack_from("<Q", data, 0)
    return length, json.loads(data[8:8 + length]), data[8 + length:]


def write(path, header, buffer):
    text = json.dumps(header, separators=(",", ":")).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + buffer)


def main():
    mode = sys.argv[1]
    if mode == "check":
        path, dtype, model = sys.argv[2:5]
        length, header, buffer = parts(path)
        assert (8 + length) % 8 == 0, "the data is not 8-byte aligned"
        meta = header.pop("__metadata__")
        assert meta["format"] == "pt" and meta["dtfm.model"] == model, meta
        names = list(header)
        assert names == sorted(names), "tensors not in name order"
        end = 0
        size = {"F32": 4, "F16": 2, "BF16": 2}[dtype]
        for name in names:
            e = header[name]
            assert e["dtype"] == dtype, (name, e)
            begin, stop = e["data_offsets"]
            assert begin == end, (name, begin, end)
            assert stop - begin == size * int(np.prod(e["shape"])), name
            end = stop
        assert end == len(buffer), (end, len(buffer))
        print(f"{path.split('/')[-1]}: {len(names)} tensors of {dtype}, "
              f"aligned, in name order, tiling the data; metadata {meta}")
    elif mode == "narrow":
        import torch

        wide, narrow, dtype = sys.argv[2:5]
        a, _ = read_safetensors(wide)
        b, _ = read_safetensors(narrow)
        kind = {"F16": torch.float16, "BF16": torch.bfloat16}[dtype]
        for name in a:
            want = torch.from_numpy(a[name].copy()).to(kind).float().numpy()
            assert np.array_equal(want.view(np.uint32),
                                  b[name].view(np.uint32)), name
        print(f"{dtype}: {len(a)} tensors rounded as torch rounds them")
    elif mode == "close":
        a, _ = read_safetensors(sys.argv[2])
        b, _ = read_safetensors(sys.argv[3])
        tol = float(sys.argv[4])
        assert sorted(a) == sorted(b), (sorted(a), sorted(b))
        worst = 0.0
        for name in a:
            assert a[name].shape == b[name].shape, name
            worst = max(worst, float(np.max(np.abs(a[name] - b[name]),
                                            initial=0)))
        assert worst <= tol, worst
        print(f"{len(a)} tensors, whole, same shapes; values within {tol}")
    elif mode == "negate":
        good, out, name = sys.argv[2:5]
        length, header, buffer = parts(good)
        begin, end = header[name]["data_offsets"]
        values = np.frombuffer(buffer[begin:end], dtype="<f4")
        buffer = buffer[:begin] + (-values).tobytes() + buffer[end:]
        write(out, header, buffer)
        print(f"{name} negated")
    elif mode == "drop":
        good, out, name = sys.argv[2:5]
        _, header, buffer = parts(good)
        begin, end = header.pop(name)["data_offsets"]
        for e in header.values():
            if isinstance(e, dict) and "data_offsets" in e and \
                    e["data_offsets"][0] >= end:
                e["data_offsets"] = [e["data_offsets"][0] - (end - begin),
                                     e["data_offsets"][1] - (end - begin)]
        write(out, header, buffer[:begin] + buffer[end:])
        print(f"{name} dropped")
    elif mode == "hostile":
        good, out = sys.argv[2:4]
        _, header, buffer = parts(good)
        meta = header.pop("__metadata__")
        names = sorted(header)
        first, second = names[0], names[1]

        def case(name, h, b=buffer):
            full = dict(h)
            full["__metadata__"] = meta
            write(os.path.join(out, name + ".safetensors"), full, b)

        h = json.loads(json.dumps(header))
        h[names[-1]]["data_offsets"][1] += 4
        case("past-end", h)
        h = json.loads(json.dumps(header))
        s0, e0 = h[second]["data_offsets"]
        h[second]["data_offsets"] = [s0 - 4, e0 - 4]
        case("overlap", h)
        h = json.loads(json.dumps(header))
        h[first]["dtype"] = "F16"
        case("dtype", h)
        h = json.loads(json.dumps(header))
        h[first]["dtype"] = "I64"
        case("int64", h)
        # A tensor left out (its bytes too), one added, one reshaped.
        h = json.loads(json.dumps(header))
        s0, e0 = h.pop(first)["data_offsets"]
        for e in h.values():
            e["data_offsets"] = [e["data_offsets"][0] - (e0 - s0),
                                 e["data_offsets"][1] - (e0 - s0)]
        case("missing", h, buffer[e0 - s0:] if s0 == 0 else None)
        h = json.loads(json.dumps(header))
        h["zz.extra.weight"] = {"dtype": "F32", "shape": [1],
                                "data_offsets": [len(buffer),
                                                 len(buffer) + 4]}
        case("extra", h, buffer + b"\0\0\0\0")
        h = json.loads(json.dumps(header))
        shape = h[first]["shape"]
        h[first]["shape"] = [shape[0] * shape[1]] if len(shape) == 2 else \
            [1] + shape
        case("shape", h)
        with open(os.path.join(out, "huge.safetensors"), "wb") as f:
            f.write(struct.pack("<Q", 100_000_001) + b"{}")
        with open(os.path.join(out, "garbled.safetensors"), "wb") as f:
            text = b'{"a":{"dtype":"F32",}}'
            f.write(struct.pack("<Q", len(text)) + text)
        print(f"hostile files written (first tensor {first})")


main()

"""Writes ONNX models whose tensors live in files beside them (ONNX's
external data, as torch.onnx.export writes models over 2 GB), for
import-onnx-external.test: external_models.py DIR.

  inline/model.onnx     a Linear-ReLU-Linear with a reshape whose target is
                        computed from Shape (int64 initializers in the
                        computation), all tensors inside the model
  one-file/model.onnx   the same, every tensor (int64 ones included) in
                        one file, weights.data, at offsets
  per-tensor/model.onnx the same, one file per tensor in a subfolder, with
                        no offset or length (as torch writes them)
  hostile/NAME.onnx     the one-file model (its file NAME.data) with its
                        first weight's entries made hostile in one way
                        each (see HOSTILE), and both.onnx: a weight both
                        in the model and in a file
"""
import os
import sys

import onnx
import torch
from onnx import TensorProto

HOSTILE = {
    # name: (key/value pairs replacing the first weight's entries)
    "parent": {"location": "../secret.data"},
    "absolute": {"location": "/etc/passwd"},
    "symlink": {"location": "escape.data"},
    "missing": {"location": "nowhere.data"},
    "folder": {"location": "sub"},
    "no-location": {"offset": "0"},
    "past-end": {"location": "weights.data", "offset": "100000"},
    "short": {"location": "weights.data", "offset": "0", "length": "12"},
    # 512 bytes from 16 before the end of the file
    "overrun": {"location": "weights.data", "offset": "END-16",
                "length": "512"},
    "signed": {"location": "weights.data", "offset": "-4", "length": "512"},
    "unknown-key": {"location": "weights.data", "basepath": "/"},
}


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(8, 16)
        self.fc2 = torch.nn.Linear(16, 4)

    def forward(self, x):
        h = torch.relu(self.fc1(x.view(x.size(0), -1)))
        return self.fc2(h)


def write(model, path):
    """The model as it is: onnx.save would write a tensor's raw data out to
    its external file."""
    with open(path, "wb") as f:
        f.write(model.SerializeToString())


def main():
    d = sys.argv[1]
    torch.manual_seed(0)
    for sub in ("inline", "one-file", "per-tensor/data", "hostile/sub"):
        os.makedirs(os.path.join(d, sub), exist_ok=True)
    inline = os.path.join(d, "inline", "model.onnx")
    torch.onnx.export(Net(), torch.randn(2, 2, 4), inline, opset_version=14,
                      input_names=["x"], output_names=["y"])
    # The exporter's Constant nodes become initializers: the int64 ones
    # (the reshape's pieces) then go to the files too.
    model = onnx.load(inline)
    for node in list(model.graph.node):
        if node.op_type == "Constant":
            value = onnx.helper.get_attribute_value(node.attribute[0])
            value.name = node.output[0]
            model.graph.initializer.append(value)
            model.graph.node.remove(node)
    assert any(t.data_type == TensorProto.INT64
               for t in model.graph.initializer)
    onnx.save(model, inline)
    onnx.save_model(onnx.load(inline), os.path.join(d, "one-file",
                                                    "model.onnx"),
                    save_as_external_data=True, all_tensors_to_one_file=True,
                    location="weights.data", size_threshold=0)
    per = onnx.load(inline)
    for t in per.graph.initializer:
        data = t.raw_data
        name = t.name.strip("/").replace(".", "_").replace("/", "_") + ".bin"
        with open(os.path.join(d, "per-tensor", "data", name), "wb") as f:
            f.write(data)
        t.ClearField("raw_data")
        t.data_location = TensorProto.EXTERNAL
        e = t.external_data.add()
        e.key, e.value = "location", "data/" + name
    onnx.save(per, os.path.join(d, "per-tensor", "model.onnx"))

    hostile = os.path.join(d, "hostile")
    with open(os.path.join(d, "secret.data"), "wb") as f:
        f.write(bytes(512))
    os.symlink(os.path.join(d, "secret.data"),
               os.path.join(hostile, "escape.data"))
    for name, entries in HOSTILE.items():
        model = onnx.load(inline)
        onnx.save_model(model, os.path.join(hostile, name + ".onnx"),
                        save_as_external_data=True,
                        all_tensors_to_one_file=True,
                        location=name + ".data", size_threshold=0)
        model = onnx.load(os.path.join(hostile, name + ".onnx"),
                          load_external_data=False)
        first = next(t for t in model.graph.initializer
                     if t.name == "fc1.weight")
        del first.external_data[:]
        own = name + ".data"
        size = os.path.getsize(os.path.join(hostile, own))
        for key, value in entries.items():
            e = first.external_data.add()
            e.key = key
            e.value = value.replace("END-16", str(size - 16)).replace(
                "weights.data", own)
        write(model, os.path.join(hostile, name + ".onnx"))
    # Both inside the model and in a file.
    model = onnx.load(os.path.join(hostile, "short.onnx"),
                      load_external_data=False)
    first = next(t for t in model.graph.initializer if t.name == "fc1.weight")
    del first.external_data[:]
    e = first.external_data.add()
    e.key, e.value = "location", "short.data"
    first.raw_data = bytes(512)
    write(model, os.path.join(hostile, "both.onnx"))
    # Two tensors on one region of a file: a small file would stand for
    # any number of tensors (a 422-byte model once made a 1 GiB weights
    # file of an 8 KB one).
    overlap = os.path.join(hostile, "overlap.onnx")
    onnx.save_model(onnx.load(inline), overlap, save_as_external_data=True,
                    all_tensors_to_one_file=True, location="overlap.data",
                    size_threshold=0)
    model = onnx.load(overlap, load_external_data=False)
    first = next(t for t in model.graph.initializer if t.name == "fc1.weight")
    copy = model.graph.initializer.add()
    copy.CopyFrom(first)
    copy.name = "fc1.copy"
    write(model, overlap)


if __name__ == "__main__":
    main()

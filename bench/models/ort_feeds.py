#!/usr/bin/python3
"""The feed shapes onnxruntime-node is given for a model: BINDING as is, or with '-' (a static model)
each graph input's shape from the file, as NAME=D1xD2... words on one line.

    bench/models/ort_feeds.py MODEL BINDING
"""
import sys

import onnx

model, binding = sys.argv[1], sys.argv[2]
if binding != "-":
    print(binding)
else:
    m = onnx.load(model, load_external_data=False)
    inits = {i.name for i in m.graph.initializer}
    print(" ".join(i.name + "=" + "x".join(str(d.dim_value) for d in i.type.tensor_type.shape.dim)
                   for i in m.graph.input if i.name not in inits))

#!/usr/bin/env python3
"""Build an ONNX graph of a BERT encoder from a sentence-transformers model
directory (config.json + model.safetensors), without torch.

    python3 scripts/build_onnx.py MODEL_DIR OUT.onnx [--check]

The graph is the plain BERT forward pass, written out op by op with the `onnx`
helper API: Gather embeddings (word + position + token type) and LayerNorm;
per layer MatMul/Add for Q, K, V, reshape/transpose to heads, scaled
dot-product with the additive attention mask, Softmax, output projection,
residual + LayerNorm, feed-forward with the exact (Erf) GELU, residual +
LayerNorm. Inputs `input_ids`, `attention_mask`, `token_type_ids` (int64,
[batch, sequence], both axes dynamic); output `last_hidden_state`
([batch, sequence, hidden], fp32). Pooling and normalisation are the
caller's (lam-encode's `OrtEncoder` pools in Rust, as `BertEncoder` does).

`--check` runs the graph with onnxruntime on random token ids (with padding)
and compares it with a numpy forward pass of the same weights.
"""
import json
import math
import struct
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17  # LayerNormalization is a standard op from 17 on


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, meta in header.items():
        if name == "__metadata__":
            continue
        a, b = meta["data_offsets"]
        raw = data[a:b]
        dt = meta["dtype"]
        if dt == "F32":
            arr = np.frombuffer(raw, dtype="<f4")
        elif dt == "F16":
            arr = np.frombuffer(raw, dtype="<f2").astype(np.float32)
        elif dt == "BF16":
            arr = (np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16).view(np.float32)
        elif dt == "I64":
            arr = np.frombuffer(raw, dtype="<i8")
        else:
            raise SystemExit(f"{path}: tensor {name}: unsupported dtype {dt}")
        out[name] = arr.reshape(meta["shape"])
    return out


class Weights:
    def __init__(self, tensors, path):
        self.t = tensors
        self.path = path
        # HF BertModel checkpoints name tensors "embeddings...", BertFor* ones "bert.embeddings...".
        self.prefix = "bert." if "bert.embeddings.word_embeddings.weight" in tensors else ""

    def __call__(self, name):
        key = self.prefix + name
        if key not in self.t:
            raise SystemExit(f"{self.path}: missing tensor {key}")
        return np.ascontiguousarray(self.t[key], dtype=np.float32)


def build(model_dir):
    cfg = json.load(open(f"{model_dir}/config.json"))
    w = Weights(read_safetensors(f"{model_dir}/model.safetensors"), f"{model_dir}/model.safetensors")
    h = cfg["hidden_size"]
    nh = cfg["num_attention_heads"]
    dh = h // nh
    layers = cfg["num_hidden_layers"]
    eps = float(cfg.get("layer_norm_eps", 1e-12))
    act = cfg.get("hidden_act", "gelu")
    if act != "gelu":
        raise SystemExit(f"{model_dir}/config.json: hidden_act {act!r} is not supported (only exact gelu)")
    if cfg.get("position_embedding_type", "absolute") != "absolute":
        raise SystemExit(f"{model_dir}/config.json: only absolute position embeddings are supported")

    inits = []
    nodes = []
    counter = [0]

    def const(name, arr):
        inits.append(numpy_helper.from_array(np.asarray(arr), name))
        return name

    def node(op, inputs, **attrs):
        counter[0] += 1
        out = f"{op.lower()}_{counter[0]}"
        nodes.append(helper.make_node(op, inputs, [out], name=out, **attrs))
        return out

    def linear(x, prefix):
        # torch Linear: y = x W^T + b; store W^T so the graph is a plain MatMul.
        wt = const(f"{prefix}.weight_t", w(f"{prefix}.weight").T.copy())
        b = const(f"{prefix}.bias", w(f"{prefix}.bias"))
        return node("Add", [node("MatMul", [x, wt]), b])

    def layer_norm(x, prefix):
        g = const(f"{prefix}.weight", w(f"{prefix}.weight"))
        b = const(f"{prefix}.bias", w(f"{prefix}.bias"))
        return node("LayerNormalization", [x, g, b], axis=-1, epsilon=eps)

    # Embeddings.
    word = node("Gather", [const("embeddings.word_embeddings.weight", w("embeddings.word_embeddings.weight")), "input_ids"])
    seq = node("Gather", [node("Shape", ["input_ids"]), const("one_i64", np.array(1, dtype=np.int64))])
    pos_ids = node("Range", [const("zero_i64", np.array(0, dtype=np.int64)), seq, "one_i64"])
    pos = node("Gather", [const("embeddings.position_embeddings.weight", w("embeddings.position_embeddings.weight")), pos_ids])
    tt = node("Gather", [const("embeddings.token_type_embeddings.weight", w("embeddings.token_type_embeddings.weight")), "token_type_ids"])
    x = layer_norm(node("Add", [node("Add", [word, pos]), tt]), "embeddings.LayerNorm")

    # Additive mask as in transformers: (1 - mask) * finfo(float32).min, shape [B, 1, 1, S].
    m = node("Cast", ["attention_mask"], to=TensorProto.FLOAT)
    neg = node("Mul", [node("Sub", [const("one_f32", np.array(1.0, dtype=np.float32)), m]),
                       const("mask_min", np.array(np.finfo(np.float32).min, dtype=np.float32))])
    mask = node("Unsqueeze", [neg, const("axes_1_2", np.array([1, 2], dtype=np.int64))])

    heads_shape = const("heads_shape", np.array([0, 0, nh, dh], dtype=np.int64))
    merge_shape = const("merge_shape", np.array([0, 0, h], dtype=np.int64))
    scale = const("attn_scale", np.array(1.0 / math.sqrt(dh), dtype=np.float32))
    inv_sqrt2 = const("inv_sqrt2", np.array(1.0 / math.sqrt(2.0), dtype=np.float32))
    half = const("half_f32", np.array(0.5, dtype=np.float32))

    for i in range(layers):
        p = f"encoder.layer.{i}."
        q = node("Transpose", [node("Reshape", [linear(x, p + "attention.self.query"), heads_shape])], perm=[0, 2, 1, 3])
        k = node("Transpose", [node("Reshape", [linear(x, p + "attention.self.key"), heads_shape])], perm=[0, 2, 3, 1])
        v = node("Transpose", [node("Reshape", [linear(x, p + "attention.self.value"), heads_shape])], perm=[0, 2, 1, 3])
        scores = node("Add", [node("Mul", [node("MatMul", [q, k]), scale]), mask])
        probs = node("Softmax", [scores], axis=-1)
        ctx = node("Reshape", [node("Transpose", [node("MatMul", [probs, v])], perm=[0, 2, 1, 3]), merge_shape])
        x = layer_norm(node("Add", [linear(ctx, p + "attention.output.dense"), x]), p + "attention.output.LayerNorm")
        inter = linear(x, p + "intermediate.dense")
        gelu = node("Mul", [node("Mul", [inter, half]),
                            node("Add", [node("Erf", [node("Mul", [inter, inv_sqrt2])]), "one_f32"])])
        x = layer_norm(node("Add", [linear(gelu, p + "output.dense"), x]), p + "output.LayerNorm")

    nodes.append(helper.make_node("Identity", [x], ["last_hidden_state"], name="output"))
    ids_in = [helper.make_tensor_value_info(n, TensorProto.INT64, ["batch", "sequence"])
              for n in ("input_ids", "attention_mask", "token_type_ids")]
    out = [helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT, ["batch", "sequence", h])]
    graph = helper.make_graph(nodes, "bert", ids_in, out, initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="lam scripts/build_onnx.py")
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model, cfg


def numpy_forward(model_dir, ids, mask):
    """Reference BERT forward in numpy (float64) for --check."""
    cfg = json.load(open(f"{model_dir}/config.json"))
    w = Weights(read_safetensors(f"{model_dir}/model.safetensors"), model_dir)
    h, nh = cfg["hidden_size"], cfg["num_attention_heads"]
    dh, eps = h // nh, float(cfg.get("layer_norm_eps", 1e-12))
    f = lambda n: w(n).astype(np.float64)

    def ln(x, p):
        mu = x.mean(-1, keepdims=True)
        var = ((x - mu) ** 2).mean(-1, keepdims=True)
        return (x - mu) / np.sqrt(var + eps) * f(p + ".weight") + f(p + ".bias")

    lin = lambda x, p: x @ f(p + ".weight").T + f(p + ".bias")
    from math import erf
    verf = np.vectorize(erf)
    b, s = ids.shape
    x = f("embeddings.word_embeddings.weight")[ids] + f("embeddings.position_embeddings.weight")[:s][None] + f("embeddings.token_type_embeddings.weight")[0]
    x = ln(x, "embeddings.LayerNorm")
    add = ((1.0 - mask) * -1e30)[:, None, None, :]
    for i in range(cfg["num_hidden_layers"]):
        p = f"encoder.layer.{i}."
        sp = lambda t: t.reshape(b, s, nh, dh).transpose(0, 2, 1, 3)
        q, k, v = (sp(lin(x, p + "attention.self." + n)) for n in ("query", "key", "value"))
        sc = q @ k.transpose(0, 1, 3, 2) / math.sqrt(dh) + add
        sc = np.exp(sc - sc.max(-1, keepdims=True))
        sc /= sc.sum(-1, keepdims=True)
        ctx = (sc @ v).transpose(0, 2, 1, 3).reshape(b, s, h)
        x = ln(lin(ctx, p + "attention.output.dense") + x, p + "attention.output.LayerNorm")
        it = lin(x, p + "intermediate.dense")
        it = 0.5 * it * (1.0 + verf(it / math.sqrt(2.0)))
        x = ln(lin(it, p + "output.dense") + x, p + "output.LayerNorm")
    return x


def check(model_dir, path):
    import onnxruntime as ort
    cfg = json.load(open(f"{model_dir}/config.json"))
    rng = np.random.default_rng(0)
    ids = rng.integers(1000, cfg["vocab_size"], size=(2, 24)).astype(np.int64)
    mask = np.ones_like(ids)
    mask[1, 15:] = 0
    ids[1, 15:] = 0
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    got = sess.run(None, {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)})[0]
    want = numpy_forward(model_dir, ids, mask.astype(np.float64))
    real = mask.astype(bool)
    diff = np.abs(got[real] - want[real]).max()
    print(f"check: max abs diff onnxruntime vs numpy float64 over real tokens: {diff:.3e}", file=sys.stderr)
    if not diff <= 1e-4:
        raise SystemExit(f"{path}: graph does not match the numpy forward pass (max abs diff {diff})")


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    if len(args) != 2:
        raise SystemExit(__doc__)
    model_dir, out = args
    model, _ = build(model_dir)
    tmp = out + ".tmp"
    onnx.save(model, tmp)
    if "--check" in sys.argv:
        check(model_dir, tmp)
    import os
    os.replace(tmp, out)
    print(out)


if __name__ == "__main__":
    main()

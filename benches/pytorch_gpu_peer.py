#!/usr/bin/env python3
"""PyTorch sentence-transformers peer for `xtask gpu-bench` (GPU bundle).

usage: pytorch_gpu_peer.py MINILM_DIR BGE_DIR WINDOWS256.json WINDOWS512.json OUT.json MIN_TOKENS

Same windows as the Rust side ({"ids": [[...]], "texts": [...]}, [CLS]/[SEP]
included), repeated until a pass holds MIN_TOKENS tokens, sorted by length and
padded per batch with an attention mask (what sentence-transformers does).
Measures, on CUDA, tokens/s of:
  - minilm_bf16_tok_s / minilm_fp32_tok_s: the model only (Transformer ->
    Pooling -> Normalize on token ids), weights in bf16 / fp32 (TF32 off);
  - minilm_e2e_fp16_tok_s: `SentenceTransformer.encode` on the texts (tokenisation
    included) with the model in fp16, as users call it;
  - bge_bf16_tok_s: BGE_DIR's bge-base-shaped model (random weights: timing only).
Best of three passes after a warm-up, torch.cuda.synchronize() around each.
"""
import json
import sys
import time

import torch
from sentence_transformers import SentenceTransformer


def tiled(items, tokens_per_copy, min_tokens):
    copies = max(1, -(-min_tokens // max(1, tokens_per_copy)))
    return items * copies


def batches(wins, max_tokens=32768):
    order = sorted(range(len(wins)), key=lambda i: -len(wins[i]))
    out, cur = [], []
    for i in order:
        longest = len(wins[cur[0]]) if cur else len(wins[i])
        if cur and (len(cur) + 1) * longest > max_tokens:
            out.append(cur)
            cur = []
        cur.append(i)
    if cur:
        out.append(cur)
    return out


def model_only(model, wins, dtype):
    model = model.to(dtype)
    groups = []
    for g in batches(wins):
        n = max(len(wins[i]) for i in g)
        ids = torch.zeros((len(g), n), dtype=torch.long)
        mask = torch.zeros_like(ids)
        for r, i in enumerate(g):
            ids[r, : len(wins[i])] = torch.tensor(wins[i])
            mask[r, : len(wins[i])] = 1
        groups.append({"input_ids": ids.cuda(), "attention_mask": mask.cuda(), "token_type_ids": torch.zeros_like(ids).cuda()})
    tokens = sum(len(w) for w in wins)

    def run():
        with torch.inference_mode():
            for f in groups:
                model(dict(f))["sentence_embedding"]
        torch.cuda.synchronize()

    return tokens / best(run)


def best(run):
    run()
    b = float("inf")
    for _ in range(3):
        torch.cuda.synchronize()
        t = time.perf_counter()
        run()
        b = min(b, time.perf_counter() - t)
    return b


def main(minilm_dir, bge_dir, w256_path, w512_path, out_path, min_tokens):
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    w256 = json.load(open(w256_path))
    w512 = json.load(open(w512_path))
    t256 = sum(len(w) for w in w256["ids"])
    t512 = sum(len(w) for w in w512["ids"])
    ids256 = tiled(w256["ids"], t256, min_tokens)
    ids512 = tiled(w512["ids"], t512, min_tokens)
    texts = tiled(w256["texts"], t256, min_tokens)
    e2e_tokens = t256 * (len(texts) // max(1, len(w256["texts"])))
    res = {"torch": torch.__version__, "device": torch.cuda.get_device_name(0)}
    m = SentenceTransformer(minilm_dir, device="cuda")
    m.max_seq_length = 256
    m.eval()
    res["minilm_fp32_tok_s"] = model_only(m, ids256, torch.float32)
    res["minilm_bf16_tok_s"] = model_only(m, ids256, torch.bfloat16)
    m = SentenceTransformer(minilm_dir, device="cuda").half()
    m.max_seq_length = 256

    def e2e():
        m.encode(texts, batch_size=128, convert_to_numpy=True, normalize_embeddings=True)
        torch.cuda.synchronize()

    res["minilm_e2e_fp16_tok_s"] = e2e_tokens / best(e2e)
    del m
    b = SentenceTransformer(bge_dir, device="cuda")
    b.max_seq_length = 512
    b.eval()
    res["bge_bf16_tok_s"] = model_only(b, ids512, torch.bfloat16)
    json.dump(res, open(out_path, "w"))
    print(json.dumps(res))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5], int(sys.argv[6]))

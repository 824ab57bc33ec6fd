#!/usr/bin/env python3
"""PyTorch sentence-transformers peer for `cargo xtask bench-encoder`.

usage: pytorch_peer.py MODEL_DIR WINDOWS.json THREADS BATCH

WINDOWS.json is {"ids": [[...]], "texts": [...]}. Embeds the token-id windows
([CLS]/[SEP] included) with
sentence-transformers' own modules (Transformer -> Pooling -> Normalize),
tokenisation excluded as on the Rust side, and prints one JSON object:
{"tok_per_s": ..., "e2e_tok_per_s": ..., "embeddings": [[...], ...],
"torch": version}; e2e is `SentenceTransformer.encode` on the window texts.
"""
import json
import sys
import time

import torch
from sentence_transformers import SentenceTransformer


def main(model_dir, windows_path, threads, batch):
    torch.set_num_threads(threads)
    model = SentenceTransformer(model_dir, device="cpu")
    model.max_seq_length = 512
    model.eval()
    data = json.load(open(windows_path))
    wins, texts = data["ids"], data["texts"]
    tokens = sum(len(w) for w in wins)

    def run(group):
        n = max(len(w) for w in group)
        ids = torch.zeros((len(group), n), dtype=torch.long)
        mask = torch.zeros_like(ids)
        for i, w in enumerate(group):
            ids[i, : len(w)] = torch.tensor(w)
            mask[i, : len(w)] = 1
        feats = {"input_ids": ids, "attention_mask": mask, "token_type_ids": torch.zeros_like(ids)}
        with torch.inference_mode():
            return model(feats)["sentence_embedding"]

    run(wins[:batch])  # warm-up
    t = time.perf_counter()
    out = [run(wins[i : i + batch]) for i in range(0, len(wins), batch)]
    dt = time.perf_counter() - t
    emb = torch.cat(out)
    # End to end (tokenisation included), as users call it.
    t = time.perf_counter()
    model.encode(texts, batch_size=batch, convert_to_numpy=True, normalize_embeddings=True)
    e2e = time.perf_counter() - t
    print(json.dumps({"tok_per_s": tokens / dt, "e2e_tok_per_s": tokens / e2e, "embeddings": emb.tolist(), "torch": torch.__version__}))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))

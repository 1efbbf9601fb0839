"""Samples text from a byte-level model dtfm-run trained and saved with
--save-params model.safetensors --weight-names hf (README, "Train a model on
your data"):

    python3 examples/python/sample.py model.safetensors --prompt "The " \
        --tokens 200 [--temperature 0.8] [--top-k 40] [--seed 0]

Each byte of the prompt is a token (dtfm-data --text); the model sees at
most its context (n_positions / max_position_embeddings) of the latest
tokens. Needs torch and numpy (python3-torch on Debian).
"""
import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hf_models import load  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("weights")
    parser.add_argument("--prompt", default="\n")
    parser.add_argument("--tokens", type=int, default=200)
    parser.add_argument("--temperature", type=float, default=0.8)
    parser.add_argument("--top-k", type=int, default=40)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if args.tokens < 0 or args.temperature <= 0 or args.top_k < 1:
        parser.error("--tokens >= 0, --temperature > 0 and --top-k >= 1")
    try:
        model, config = load(args.weights)
    except (OSError, ValueError, KeyError) as e:
        sys.exit(f"sample.py: error: {e}")
    if config["vocab_size"] < 256:
        sys.exit(f"sample.py: error: {args.weights}: a vocabulary of "
                 f"{config['vocab_size']}, not a byte-level model's 256")
    context = config.get("n_positions") or config["max_position_embeddings"]
    torch.manual_seed(args.seed)
    ids = list(args.prompt.encode("utf-8")) or [10]
    with torch.no_grad():
        for _ in range(args.tokens):
            window = torch.tensor([ids[-context:]])
            logits = model(window)[0, -1, :256] / args.temperature
            top = torch.topk(logits, min(args.top_k, 256))
            choice = torch.multinomial(torch.softmax(top.values, -1), 1)
            ids.append(int(top.indices[choice]))
    sys.stdout.write(bytes(ids).decode("utf-8", errors="replace") + "\n")


main()

"""Send completions to a vLLM server started with --enable-per-request-metrics and save every response body as the
server sent it, one JSON line each: the whole body of a non-streamed response, and the last chunk of a streamed one
(with stream_options.include_usage vLLM puts the usage and the per-request metrics on that chunk).

    python client.py URL OUT.jsonl N RATE SEED

N requests, Poisson arrivals at RATE per second, each from its own thread; even-numbered requests streamed. Prompts
are random words (64 to 256), 16 to 64 output tokens (ignore_eos). Standard library only.
"""

from __future__ import annotations

import json
import random
import sys
import threading
import time
import urllib.request

WORDS = "the of and to in is it you that he was for on are with as his they be at one have this from or had by".split()


def one(url: str, i: int, rng: random.Random, out: list) -> None:
    prompt = " ".join(rng.choice(WORDS) for _ in range(rng.randint(64, 256)))
    body = {"model": "tiny-llama", "prompt": prompt, "max_tokens": rng.randint(16, 64), "ignore_eos": True}
    stream = i % 2 == 0
    if stream:
        body |= {"stream": True, "stream_options": {"include_usage": True}}
    req = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=300) as resp:
        if not stream:
            out.append((i, json.loads(resp.read())))
            return
        last = None
        for raw in resp:
            line = raw.decode().strip()
            if line.startswith("data: ") and line != "data: [DONE]":
                last = json.loads(line[6:])
        out.append((i, last))


def main(url: str, path: str, n: int, rate: float, seed: int) -> None:
    rng = random.Random(seed)
    out: list = []
    threads = []
    for i in range(n):
        t = threading.Thread(target=one, args=(url, i, random.Random(rng.random()), out))
        t.start()
        threads.append(t)
        time.sleep(rng.expovariate(rate))
    for t in threads:
        t.join(timeout=600)
    with open(path, "w") as f:
        for _, body in sorted(out, key=lambda x: x[0]):
            f.write(json.dumps(body) + "\n")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5]))

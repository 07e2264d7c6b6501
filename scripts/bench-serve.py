#!/usr/bin/env python3
"""Load test of a running OpenAI-compatible server (`tandem serve`, or llama-server for a side-by-side): N
concurrent clients each send REQUESTS streamed chat requests with a tool (tool_choice auto) and report
requests/s, time to first token (p50/p99) and generated tokens/s (from the usage of the last chunk).
Standard library only.

Usage: scripts/bench-serve.py BASE_URL MODEL [--clients 1,4,16] [--requests 2] [--max-tokens 48] [--key KEY]
"""

import argparse
import json
import statistics
import threading
import time
import urllib.request

WEATHER = {"type": "function", "function": {"name": "get_weather", "description": "Current weather of a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}
QUESTIONS = ["What is the weather in Paris?", "Write one sentence about rivers.", "What is the weather in Lima?",
             "Name three prime numbers.", "What is the weather in Oslo?", "Say hello in French."]


def one(base, model, key, question, max_tokens):
    body = {"model": model, "max_tokens": max_tokens, "temperature": 0, "stream": True,
            "stream_options": {"include_usage": True}, "tools": [WEATHER],
            "messages": [{"role": "user", "content": question}]}
    request = urllib.request.Request(base + "/chat/completions", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json", "Authorization": f"Bearer {key}"})
    started = time.monotonic()
    first = None
    tokens = 0
    with urllib.request.urlopen(request, timeout=600) as response:
        for line in response:
            line = line.decode().strip()
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            chunk = json.loads(line[6:])
            delta = chunk["choices"][0]["delta"] if chunk.get("choices") else {}
            if first is None and (delta.get("content") or delta.get("tool_calls")):
                first = time.monotonic() - started
            if chunk.get("usage"):
                tokens = chunk["usage"]["completion_tokens"]
    return first if first is not None else time.monotonic() - started, tokens


def run(base, model, key, clients, requests, max_tokens):
    ttfts, tokens, lock = [], [], threading.Lock()

    def client(i):
        for r in range(requests):
            t, n = one(base, model, key, QUESTIONS[(i + r) % len(QUESTIONS)], max_tokens)
            with lock:
                ttfts.append(t)
                tokens.append(n)

    started = time.monotonic()
    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.monotonic() - started
    ttfts.sort()
    p99 = ttfts[min(len(ttfts) - 1, int(round(0.99 * (len(ttfts) - 1))))]
    return {"clients": clients, "requests": len(ttfts), "wall_s": round(wall, 2),
            "requests_per_s": round(len(ttfts) / wall, 3), "ttft_p50_s": round(statistics.median(ttfts), 3),
            "ttft_p99_s": round(p99, 3), "tokens_per_s": round(sum(tokens) / wall, 2)}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("base")
    parser.add_argument("model")
    parser.add_argument("--clients", default="1,4,16")
    parser.add_argument("--requests", type=int, default=2)
    parser.add_argument("--max-tokens", type=int, default=48)
    parser.add_argument("--key", default="none")
    args = parser.parse_args()
    for n in [int(c) for c in args.clients.split(",")]:
        print(json.dumps(run(args.base.rstrip("/"), args.model, args.key, n, args.requests, args.max_tokens)),
              flush=True)


if __name__ == "__main__":
    main()

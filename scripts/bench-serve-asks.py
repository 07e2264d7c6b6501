#!/usr/bin/env python3
"""BFCL-layout questions (such as benches/dev-parallel) asked of a running `tandem serve` through the real `openai`
client, with the listing pass on (the server's default) or off (`"asks": false`); the calls come back as records
`tandem bench rescore` scores with BFCL's checker (the same one `tandem bench bfcl` uses).

Usage: bench-serve-asks.py BASE_URL MODEL DATA_DIR OUT_DIR {list|off} [LIMIT]
then:  tandem bench rescore OUT_DIR
Run it with the client scripts/install-openai-client.sh installs (target/openai-client/venv/bin/python).
Function names are sent with `.` as `_` (the API's names are letters, digits, `_` and `-`) and read back."""
import json
import os
import sys
import time

from openai import OpenAI

CATEGORIES = {"parallel": "Parallel", "parallel_multiple": "ParallelMultiple"}


def lines(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def main():
    base, model, data, out, mode = sys.argv[1:6]
    limit = int(sys.argv[6]) if len(sys.argv) > 6 else None
    client = OpenAI(base_url=base, api_key=os.environ.get("TANDEM_API_KEY", "unused"))
    os.makedirs(out, exist_ok=True)
    records = []
    for name, variant in CATEGORIES.items():
        questions = lines(os.path.join(data, f"BFCL_v4_{name}.json"))[:limit]
        answers = {a["id"]: a for a in lines(os.path.join(data, "possible_answer", f"BFCL_v4_{name}.json"))}
        for q in questions:
            sent = {f["name"].replace(".", "_"): f["name"] for f in q["function"]}
            tools = [{"type": "function", "function": {"name": f["name"].replace(".", "_"),
                                                       "description": f.get("description", ""),
                                                       "parameters": f["parameters"]}} for f in q["function"]]
            messages = [m for turn in q["question"] for m in turn]
            started = time.time()
            answer = client.chat.completions.create(
                model=model, messages=messages, tools=tools, temperature=0, max_tokens=512,
                extra_body={} if mode == "list" else {"asks": False})
            calls = answer.choices[0].message.tool_calls or []
            prediction = [{"name": sent.get(c.function.name, c.function.name),
                           "arguments": json.loads(c.function.arguments)} for c in calls]
            expected = [{"name": fn, "accepted": [[k, v] for k, v in params.items()]}
                        for call in answers[q["id"]]["ground_truth"] for fn, params in call.items()]
            case = {"category": variant,
                    "question": {"id": q["id"], "turns": q["question"], "functions": q["function"]},
                    "answer": {"id": q["id"], "calls": expected}}
            records.append({"sample": q["id"], "category": name, "prediction": prediction, "case": case,
                            "tokens_in": answer.usage.prompt_tokens, "tokens_out": answer.usage.completion_tokens,
                            "ms": int((time.time() - started) * 1000)})
            print(q["id"], len(prediction), "call(s)", file=sys.stderr)
    with open(os.path.join(out, "samples.jsonl"), "w") as f:
        for record in records:
            f.write(json.dumps(record) + "\n")
    with open(os.path.join(out, "summary.json"), "w") as f:
        json.dump({"suite": "bfcl", "mode": mode, "samples": len(records)}, f)


if __name__ == "__main__":
    main()

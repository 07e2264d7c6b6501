#!/usr/bin/env python3
"""A plain llama.cpp baseline for NESTFUL, on the samples of a Tandem NESTFUL run.

For each record of a `tandem bench nestful` run directory (same goal, same catalogue: the gold tools and the
run's distractors) this asks llama.cpp's `llama-completion` for the call sequence in one shot: a short prompt (the
catalogue's tools as NESTFUL's spec file gives them, one worked example with tools of another domain, the goal)
in the model's own chat template (`--jinja`), greedy (`--temp 0`), constrained by a generic JSON schema (an array
of `{"name", "label", "arguments"}` calls, the same for every sample, `-jf`). The calls go into a run directory in
Tandem's layout (`samples.jsonl` and `summary.json`), so that `tandem bench rescore OUTDIR` scores them with
Tandem's NESTFUL scorer, next to Tandem's own run on the same samples.

  scripts/build-llama-completion.sh          # builds target/llama.cpp/build/bin/llama-completion
  scripts/nestful-llamacpp-baseline.py RUN_DIR --data ../shared/data/nestful \\
      --model ~/.cache/tandem/models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf \\
      --llama-completion target/llama.cpp/build/bin/llama-completion --threads 2 \\
      [--out bench-results] [--limit N] [--tandem target/release/tandem]
  target/release/tandem bench rescore OUTDIR

Each sample runs llama-completion once (the model is loaded per sample: `ms` is the child's wall time, load
included; the record's `llamacpp` field has llama.cpp's own prompt-eval and eval times). A child that fails, times
out or leaves no complete JSON array is recorded with an `error` and an empty prediction, and the run goes on.
`valid_plan` here means: a JSON array whose calls name catalogue tools, give every required parameter and no
unknown one, use distinct labels, and reference only earlier labels and their tool's output fields. Python 3
standard library only.
"""

import argparse
import datetime
import hashlib
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

# Tandem's plan budget (PLAN_TOKENS in src/bench/nestful/runner.rs).
PLAN_TOKENS = 768

# One schema for every sample: it fixes the shape of a call sequence, not the tools or their arguments.
CALLS_SCHEMA = {
    "type": "array",
    "minItems": 1,
    "items": {
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "label": {"type": "string"},
            "arguments": {"type": "object"},
        },
        "required": ["name", "label", "arguments"],
        "additionalProperties": False,
    },
}

INSTRUCTIONS = """You write the function calls that achieve a user's goal, in order, as a JSON array. Each call is
{"name": <function name>, "label": <"var1" for the first call, "var2" for the second, ...>, "arguments": {<parameter>: <value>}}.
When an argument is an output of an earlier call, write "$<label>.<output field>$" (for example "$var1.distance$") as the argument's whole value.
Use only the functions below. Copy values as the goal gives them; leave out optional parameters the goal does not mention.

Functions:
"""

EXAMPLE = """
Example (functions of another domain: count_words gives word_count, reading_time gives minutes, send_message gives message_id).
Goal: Count the words of chapter 3, estimate its reading time at 200 words a minute, and send the estimate to Ann.
Answer: [{"name": "count_words", "label": "var1", "arguments": {"chapter": 3}}, {"name": "reading_time", "label": "var2", "arguments": {"words": "$var1.word_count$", "words_per_minute": 200}}, {"name": "send_message", "label": "var3", "arguments": {"to": "Ann", "text": "$var2.minutes$"}}]
"""

REFERENCE = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*)\.([^$]*)\$")
# llama.cpp's own timings on stderr: "prompt eval time =  1675.19 ms /    58 tokens (...)".
PERF = re.compile(r"(load time|prompt eval time|eval time|total time)\s*=\s*([\d.]+) ms(?:\s*/\s*(\d+) (?:tokens|runs))?")


def fail(message):
    print(f"nestful-llamacpp-baseline: {message}", file=sys.stderr)
    sys.exit(2)


def parse_args(argv):
    p = argparse.ArgumentParser(
        description="Plain llama.cpp (llama-completion, -jf generic schema) baseline on the samples of a Tandem "
        "NESTFUL run; writes a run directory that `tandem bench rescore` scores.",
    )
    p.add_argument("run_dir", type=Path, help="a `tandem bench nestful` run directory (its samples.jsonl)")
    p.add_argument("--data", type=Path, required=True, help="the NESTFUL split's directory (its one *-spec.json)")
    p.add_argument("--model", type=Path, required=True, help="the GGUF file")
    p.add_argument("--llama-completion", type=Path, required=True, dest="binary",
                   help="llama.cpp's llama-completion (scripts/build-llama-completion.sh builds it)")
    p.add_argument("--threads", type=int, default=2, help="llama.cpp threads, -t (default 2)")
    p.add_argument("--n-predict", type=int, default=PLAN_TOKENS, help=f"token budget per sample (default {PLAN_TOKENS})")
    p.add_argument("--ctx", type=int, default=4096, help="context size, -c (default 4096)")
    p.add_argument("--timeout", type=float, default=600, help="seconds before a sample's child is killed (default 600)")
    p.add_argument("--limit", type=int, help="only the first N records")
    p.add_argument("--out", type=Path, default=Path("bench-results"),
                   help="where the fresh run directory goes (default bench-results)")
    p.add_argument("--resume", type=Path, help="continue this baseline run directory instead of starting one")
    p.add_argument("--retry-errors", action="store_true",
                   help="with --resume, run the samples recorded with an error again (a child killed by the "
                   "timeout while the machine was busy or paused)")
    p.add_argument("--tandem", type=Path, help="a tandem binary: run `tandem bench rescore` at the end and keep the "
                   "scores in summary.json")
    args = p.parse_args(argv)
    if not (args.run_dir / "samples.jsonl").is_file():
        fail(f"{args.run_dir} has no samples.jsonl: give a `tandem bench nestful` run directory")
    if not args.data.is_dir():
        fail(f"{args.data} is not a directory: give the NESTFUL split's directory with --data")
    if not args.model.is_file():
        fail(f"{args.model} is not a file: give the GGUF file with --model")
    if not (args.binary.is_file() and os.access(args.binary, os.X_OK)):
        fail(f"{args.binary} is not an executable: build it with scripts/build-llama-completion.sh")
    if args.threads < 1 or args.n_predict < 1 or args.ctx < 1:
        fail("--threads, --n-predict and --ctx must be at least 1")
    if args.retry_errors and args.resume is None:
        fail("--retry-errors needs --resume DIR")
    if args.tandem is not None and not os.access(args.tandem, os.X_OK):
        fail(f"{args.tandem} is not an executable tandem binary")
    # Absolute, so that a bare name is not looked up on PATH when the child is started.
    args.binary, args.model = args.binary.resolve(), args.model.resolve()
    if args.tandem is not None:
        args.tandem = args.tandem.resolve()
    return args


def read_jsonl(path):
    """The readable records of a JSONL file (a line cut short by a crash is skipped with a note)."""
    records = []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            print(f"{path}:{number}: unreadable record skipped", file=sys.stderr)
    return records


def load_spec(data_dir):
    """The split's tools by name, from its one *-spec.json."""
    specs = sorted(data_dir.glob("*-spec.json"))
    if len(specs) != 1:
        fail(f"{data_dir} must hold one *-spec.json file, found {len(specs)}")
    tools = json.loads(specs[0].read_text())
    if not isinstance(tools, list):
        fail(f"{specs[0]}: expected a JSON array of tools")
    return {t["name"]: t for t in tools if isinstance(t, dict) and "name" in t}


def system_prompt(catalogue, spec):
    """Instructions, the catalogue's tools as the spec file gives them, the example."""
    lines = []
    for name in catalogue:
        tool = spec.get(name)
        if tool is None:
            fail(f"the catalogue names {name}, which the spec file lacks: is --data the run's split?")
        lines.append(f"- {name}: {tool.get('description', '')}")
        lines.append(f"  parameters: {json.dumps(tool.get('query_parameters', {}), ensure_ascii=False)}")
        outputs = tool.get("output_parameters") or {}
        if outputs:
            lines.append(f"  output fields: {', '.join(outputs)}")
    return INSTRUCTIONS + "\n".join(lines) + "\n" + EXAMPLE


def first_array(text):
    """The first complete JSON array in the child's output (llama-completion appends `[end of text]`)."""
    start = text.find("[")
    if start < 0:
        return None
    try:
        value, _ = json.JSONDecoder().raw_decode(text[start:])
    except json.JSONDecodeError:
        return None
    return value if isinstance(value, list) else None


def to_calls(array):
    """NESTFUL's call format: name, arguments, label (what the model wrote, not repaired)."""
    calls = []
    for item in array:
        if not isinstance(item, dict):
            continue
        call = {"name": str(item.get("name", "")), "arguments": item.get("arguments") or {}}
        if not isinstance(call["arguments"], dict):
            call["arguments"] = {}
        if item.get("label") is not None:
            call["label"] = str(item["label"])
        calls.append(call)
    return calls


def strings_in(value):
    if isinstance(value, str):
        yield value
    elif isinstance(value, list):
        for item in value:
            yield from strings_in(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from strings_in(item)


def plan_problems(calls, catalogue, spec):
    """Why a sequence is not a valid plan over the catalogue (empty when it is)."""
    problems, outputs = [], {}
    if not calls:
        return ["no calls"]
    for i, call in enumerate(calls, 1):
        name, args = call["name"], call["arguments"]
        if name not in catalogue:
            problems.append(f"call {i}: {name} is not in the catalogue")
            continue
        params = spec[name].get("query_parameters") or {}
        missing = [p for p, d in params.items() if isinstance(d, dict) and d.get("required") and p not in args]
        unknown = [a for a in args if a not in params]
        if missing:
            problems.append(f"call {i}: {name} misses {', '.join(missing)}")
        if unknown:
            problems.append(f"call {i}: {name} has no parameter {', '.join(unknown)}")
        for text in strings_in(args):
            for label, field in REFERENCE.findall(text):
                if label not in outputs:
                    problems.append(f"call {i}: ${label}.{field}$ names no earlier call")
                elif field.split(".")[0] not in outputs[label]:
                    problems.append(f"call {i}: ${label}.{field}$ is no output field of its call")
        label = call.get("label")
        if label in outputs:
            problems.append(f"call {i}: label {label} is used twice")
        elif label:
            outputs[label] = set(spec[name].get("output_parameters") or {})
    return problems


def perf_of(stderr):
    """llama.cpp's timings of the run (milliseconds and token counts), from its log."""
    found = {}
    for kind, ms, count in PERF.findall(stderr):
        key = kind.replace(" time", "").replace(" ", "_")
        found[f"{key}_ms"] = float(ms)
        if count:
            found[f"{key}_tokens"] = int(count)
    return found


def run_sample(record, args, spec, schema_path, prompts_dir):
    """One sample through llama-completion: the record in Tandem's layout."""
    sample = record["sample"]
    catalogue = record.get("catalogue") or []
    base = {"sample": sample, "input": record["input"], "catalogue": catalogue, "gold": record["gold"],
            "grammar": True, "baseline": "llama-completion -jf generic call-array schema"}
    system_file = prompts_dir / f"{sample}.system.txt"
    user_file = prompts_dir / f"{sample}.user.txt"
    system_file.write_text(system_prompt(catalogue, spec))
    user_file.write_text(record["input"])
    command = [
        str(args.binary), "-m", str(args.model), "-t", str(args.threads), "-c", str(args.ctx),
        "-n", str(args.n_predict), "--temp", "0", "--seed", "0",
        # The model's own chat template (the GGUF's Jinja), one turn: system prompt, the goal, the answer.
        "--jinja", "-cnv", "-st", "-sysf", str(system_file), "-f", str(user_file),
        "-jf", str(schema_path), "--no-display-prompt", "--simple-io",
    ]
    # The machine's load when the sample started: its time is only as good as the machine was quiet.
    base["load_average"] = [round(x, 2) for x in os.getloadavg()]
    started = time.monotonic()
    try:
        child = subprocess.run(command, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                               timeout=args.timeout)
    except subprocess.TimeoutExpired:
        ms = int((time.monotonic() - started) * 1000)
        return {**base, "prediction": None, "valid_plan": False, "ms": ms,
                "error": f"llama-completion ran past {args.timeout:g} s and was killed"}
    except OSError as e:
        return {**base, "prediction": None, "valid_plan": False, "ms": int((time.monotonic() - started) * 1000),
                "error": f"could not start {args.binary}: {e}"}
    ms = int((time.monotonic() - started) * 1000)
    out = {**base, "raw": child.stdout, "ms": ms, "llamacpp": perf_of(child.stderr)}
    perf = out["llamacpp"]
    if "prompt_eval_tokens" in perf:
        out["tokens_in"] = perf["prompt_eval_tokens"]
    if "eval_tokens" in perf:
        out["tokens_out"] = perf["eval_tokens"] + 1  # llama.cpp counts the first token under prompt eval
    if child.returncode != 0:
        tail = "\n".join(child.stderr.strip().splitlines()[-5:])
        return {**out, "prediction": None, "valid_plan": False,
                "error": f"llama-completion exited with status {child.returncode}: {tail}"}
    array = first_array(child.stdout)
    if array is None:
        return {**out, "prediction": None, "valid_plan": False,
                "error": f"no complete JSON array in the output (token budget {args.n_predict} reached?)"}
    calls = to_calls(array)
    problems = plan_problems(calls, catalogue, spec)
    out.update({"prediction": calls, "valid_plan": not problems})
    if problems:
        out["plan_problems"] = problems
    return out


def sha256_of(path):
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def main(argv):
    args = parse_args(argv)
    spec = load_spec(args.data)
    records = [r for r in read_jsonl(args.run_dir / "samples.jsonl") if "sample" in r and "gold" in r]
    records.sort(key=lambda r: (str(type(r["sample"])), r["sample"]))
    if args.limit is not None:
        records = records[: args.limit]
    if not records:
        fail(f"{args.run_dir}/samples.jsonl holds no NESTFUL records")

    if args.resume:
        out_dir = args.resume
        if not (out_dir / "samples.jsonl").is_file():
            fail(f"{out_dir} has no samples.jsonl to resume")
    else:
        stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%d-%H%M%S")
        # "nestful-" first: `tandem bench rescore` also tells the suite from the directory's name.
        out_dir = args.out / f"nestful-llamacpp-{args.model.stem}-{stamp}"
        out_dir.mkdir(parents=True, exist_ok=False)
    prompts_dir = out_dir / "prompts"
    prompts_dir.mkdir(exist_ok=True)
    schema_path = out_dir / "calls.schema.json"
    schema_path.write_text(json.dumps(CALLS_SCHEMA, indent=1) + "\n")
    samples_path = out_dir / "samples.jsonl"
    kept = read_jsonl(samples_path) if samples_path.exists() else []
    if args.retry_errors:
        # The failed records go, so that each sample keeps one record; the others are written back as they were.
        kept = [r for r in kept if "error" not in r]
        fresh = samples_path.with_suffix(".tmp")
        fresh.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in kept))
        fresh.replace(samples_path)
    done = {json.dumps(r["sample"]) for r in kept}

    load_start = os.getloadavg()
    print(f"{len(records)} samples from {args.run_dir}; records in {out_dir}; load average {load_start[0]:.2f}",
          flush=True)
    with open(samples_path, "a") as sink:
        for n, record in enumerate(records, 1):
            if json.dumps(record["sample"]) in done:
                print(f"[{n}/{len(records)}] sample {record['sample']}: already recorded", flush=True)
                continue
            result = run_sample(record, args, spec, schema_path, prompts_dir)
            sink.write(json.dumps(result, ensure_ascii=False) + "\n")
            sink.flush()
            os.fsync(sink.fileno())
            state = result.get("error") or ("valid" if result["valid_plan"] else "invalid: " + "; ".join(
                result.get("plan_problems", [])[:2]))
            calls = len(result["prediction"] or [])
            print(f"[{n}/{len(records)}] sample {record['sample']}: {calls} calls, {result['ms'] / 1000:.1f} s, "
                  f"{state}", flush=True)

    summary = {
        "suite": "nestful",
        "baseline": "llama.cpp llama-completion, generic JSON-array-of-calls schema (-jf), greedy",
        "source_run": str(args.run_dir),
        "model": {"path": str(args.model), "sha256": sha256_of(args.model)},
        "llama_completion": str(args.binary),
        "threads": args.threads,
        "n_predict": args.n_predict,
        "command": [sys.executable, *sys.argv],
        "load_average": {"start": load_start, "end": os.getloadavg()},
        "finished": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    }
    summary_path = out_dir / "summary.json"
    summary_path.write_text(json.dumps(summary, indent=2) + "\n")
    if args.tandem:
        rescored = subprocess.run([str(args.tandem), "bench", "rescore", str(out_dir)], capture_output=True,
                                  text=True)
        if rescored.returncode != 0:
            print(rescored.stderr, file=sys.stderr)
            fail(f"`{args.tandem} bench rescore {out_dir}` failed (status {rescored.returncode})")
        summary["scores"] = json.loads(rescored.stdout)
        print(rescored.stdout, end="")
        summary_path.write_text(json.dumps(summary, indent=2) + "\n")
    print(out_dir)


if __name__ == "__main__":
    main(sys.argv[1:])

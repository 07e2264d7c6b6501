#!/usr/bin/env python3
"""Each rule of the rule book off alone, on a `tandem bench tasks` suite, without running the whole suite per rule.

A rule that did not act in a goal's run cannot change it: the runs are greedy, and a rule's only effect is where it
acts. Which rules acted is read off each run's log (`plan_written` events' `mends`, `rule_applied` events), so
only the goals a rule acted on are run again with it off; every other goal keeps its result.

  scripts/rule-ablation.py select RUN_DIR SUITE.toml OUT_DIR
      RUN_DIR: a `tandem bench tasks` run (its samples.jsonl) with every rule on. Writes OUT_DIR/RULE.toml, the
      suite's goals that RULE acted on, and prints the command that runs each with the rule off.
  scripts/rule-ablation.py table RUN_DIR OUT_DIR
      Prints the ablation as a Markdown table: per rule, the goals it acted on, their successes with the rule on
      and off, and the suite's success with the rule off.
"""

import glob
import json
import os
import sys


def samples(run_dir):
    path = os.path.join(run_dir, "samples.jsonl")
    if not os.path.exists(path):
        found = glob.glob(os.path.join(run_dir, "*", "samples.jsonl"))
        if len(found) != 1:
            sys.exit(f"{run_dir}: no samples.jsonl (or more than one below it)")
        path = found[0]
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def rules_that_acted(log_path):
    acted = set()
    try:
        with open(log_path) as f:
            for line in f:
                try:
                    event = json.loads(line)
                except json.JSONDecodeError:
                    continue
                if event.get("event") == "plan_written":
                    acted.update(m["rule"] for m in event.get("mends", []))
                elif event.get("event") == "rule_applied":
                    acted.add(event["rule"])
    except FileNotFoundError:
        sys.exit(f"{log_path}: the run log is gone; run the suite again")
    return acted


def task_blocks(suite_text):
    """The suite's text before its first task, and each task's block by id."""
    parts = suite_text.split("[[task]]\n")
    blocks = {}
    for part in parts[1:]:
        ident = next(l for l in part.splitlines() if l.startswith("id = ")).split("=", 1)[1].strip().strip('"')
        blocks[ident] = "[[task]]\n" + part.rstrip() + "\n\n"
    return parts[0], blocks


def acted_on(run_dir):
    by_rule = {}
    for sample in samples(run_dir):
        for rule in rules_that_acted(sample["run_log"]):
            by_rule.setdefault(rule, []).append(sample["sample"])
    return by_rule


def select(run_dir, suite, out_dir):
    with open(suite) as f:
        head, blocks = task_blocks(f.read())
    os.makedirs(out_dir, exist_ok=True)
    by_rule = acted_on(run_dir)
    for rule, ids in sorted(by_rule.items()):
        path = os.path.join(out_dir, f"{rule}.toml")
        with open(path, "w") as f:
            f.write(head + "".join(blocks[i] for i in ids))
        print(f"# {rule}: {len(ids)} goal(s)")
        print(f"tandem bench tasks --data {path} --threads 2 --mend general --rules-off {rule} "
              f"--out {os.path.join(out_dir, rule)}")


def table(run_dir, out_dir):
    base = {s["sample"]: bool(s["score"]["success"]) for s in samples(run_dir)}
    total = sum(base.values())
    print(f"all rules on: {total}/{len(base)}\n")
    print("| rule off | goals it acted on | their successes, on → off | suite |")
    print("| --- | --- | --- | --- |")
    for rule, ids in sorted(acted_on(run_dir).items()):
        rerun_dir = os.path.join(out_dir, rule)
        if not os.path.isdir(rerun_dir):
            print(f"| `{rule}` | {len(ids)} | not run | |")
            continue
        off = {s["sample"]: bool(s["score"]["success"]) for s in samples(rerun_dir)}
        if any(i not in off for i in ids):
            print(f"| `{rule}` | {len(ids)} | {sum(i in off for i in ids)} of {len(ids)} run | |")
            continue
        on_count = sum(base[i] for i in ids)
        off_count = sum(off.get(i, False) for i in ids)
        print(f"| `{rule}` | {len(ids)} | {on_count} → {off_count} | {total - on_count + off_count}/{len(base)} |")


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "select":
        select(*sys.argv[2:])
    elif len(sys.argv) == 4 and sys.argv[1] == "table":
        table(*sys.argv[2:])
    else:
        sys.exit(__doc__)

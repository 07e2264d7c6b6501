"""Asks `tandem serve` (through the real `openai` client) for one thing of one function in two places, plain and
streamed, with the listing pass on and with `"asks": false`; prints what came back as one JSON line.
Usage: openai_asks.py BASE_URL MODEL"""
import json
import sys

from openai import OpenAI

base, model = sys.argv[1:3]
client = OpenAI(base_url=base, api_key="unused")
tools = [{"type": "function", "function": {
    "name": "get_weather", "description": "The current weather in a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string", "description": "the city"}},
                   "required": ["city"]}}}]
messages = [{"role": "user", "content": "What is the weather in Paris and in Tokyo?"}]


def calls_of(message):
    return [{"name": c.function.name, "arguments": json.loads(c.function.arguments)} for c in message.tool_calls or []]


def plain(extra):
    answer = client.chat.completions.create(model=model, messages=messages, tools=tools, temperature=0,
                                            max_tokens=200, extra_body=extra)
    usage = answer.usage.model_dump()
    return {"calls": calls_of(answer.choices[0].message), "finish": answer.choices[0].finish_reason, "usage": usage}


def streamed(extra):
    calls, finish = {}, None
    stream = client.chat.completions.create(model=model, messages=messages, tools=tools, temperature=0,
                                            max_tokens=200, stream=True, extra_body=extra)
    for chunk in stream:
        for choice in chunk.choices:
            finish = choice.finish_reason or finish
            for delta in choice.delta.tool_calls or []:
                call = calls.setdefault(delta.index, {"name": "", "arguments": ""})
                call["name"] += delta.function.name or ""
                call["arguments"] += delta.function.arguments or ""
    return {"calls": [{"name": c["name"], "arguments": json.loads(c["arguments"])} for _, c in sorted(calls.items())],
            "finish": finish}


print(json.dumps({"listed": plain({}), "streamed": streamed({}), "unlisted": plain({"asks": False})}))

"""Drives a running `tandem serve` with the real `openai` Python client (installed by
scripts/install-openai-client.sh): models, chat, streaming with usage, tool calls (whole and streamed) and a
strict json_schema answer, and the client's own error types for a wrong key and an unknown model.

Usage: openai_client.py BASE_URL API_KEY MODEL. Prints one line per check; exits non-zero at the first failure.
"""

import json
import sys

import openai

base_url, api_key, model = sys.argv[1], sys.argv[2], sys.argv[3]
client = openai.OpenAI(base_url=base_url, api_key=api_key, max_retries=0, timeout=300)

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather of a city.",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "maxLength": 40},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
            },
            "required": ["city", "unit"],
            "additionalProperties": False,
        },
    },
}


def check(name, condition, detail):
    if not condition:
        print(f"FAIL {name}: {detail}")
        sys.exit(1)
    print(f"ok {name}")


ids = [m.id for m in client.models.list().data]
check("models", model in ids, ids)

question = [{"role": "user", "content": "Name one primary colour. One word."}]
whole = client.chat.completions.create(model=model, messages=question, max_tokens=8, temperature=0)
text = whole.choices[0].message.content
check("chat", isinstance(text, str) and text.strip() != "" and whole.usage.completion_tokens > 0, whole)

chunks = list(
    client.chat.completions.create(
        model=model, messages=question, max_tokens=8, temperature=0, stream=True,
        stream_options={"include_usage": True},
    )
)
streamed = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
check("stream text equals the whole answer", streamed == text, (streamed, text))
check("stream usage", chunks[-1].usage is not None and chunks[-1].usage.completion_tokens > 0, chunks[-1])

ask = [{"role": "user", "content": "What is the weather in Paris, in celsius?"}]
called = client.chat.completions.create(
    model=model, messages=ask, tools=[WEATHER], tool_choice="required", max_tokens=40, temperature=0
)
choice = called.choices[0]
calls = choice.message.tool_calls or []
check("tool call", choice.finish_reason == "tool_calls" and len(calls) >= 1, choice)
args = json.loads(calls[0].function.arguments)
check(
    "tool call arguments fit the schema",
    calls[0].function.name == "get_weather" and isinstance(args.get("city"), str)
    and args.get("unit") in ("celsius", "fahrenheit") and set(args) <= {"city", "unit"},
    calls[0],
)

parts = {}
for c in client.chat.completions.create(
    model=model, messages=ask, tools=[WEATHER], tool_choice="required", max_tokens=40, temperature=0, stream=True
):
    for delta in (c.choices[0].delta.tool_calls or []) if c.choices else []:
        part = parts.setdefault(delta.index, {"name": "", "arguments": ""})
        part["name"] += delta.function.name or ""
        part["arguments"] += delta.function.arguments or ""
check("streamed tool call", parts.get(0, {}).get("name") == "get_weather", parts)
check("streamed arguments equal the whole call's", json.loads(parts[0]["arguments"]) == args, parts)

# The SDK's own stream helper puts the argument parts together (and parses them partially as they come).
with client.chat.completions.stream(
    model=model, messages=ask, tools=[WEATHER], tool_choice="required", max_tokens=40, temperature=0
) as helper:
    kinds = [event.type for event in helper]
    final = helper.get_final_completion()
check(
    "the stream helper sees the arguments come in parts, then done",
    kinds.count("tool_calls.function.arguments.delta") > 1 and "tool_calls.function.arguments.done" in kinds,
    kinds,
)
helper_call = final.choices[0].message.tool_calls[0].function
check(
    "the stream helper's call equals the whole call",
    helper_call.name == "get_weather" and json.loads(helper_call.arguments) == args,
    final,
)

person = {
    "type": "object",
    "properties": {"name": {"type": "string", "maxLength": 20}, "age": {"type": "integer", "minimum": 0, "maximum": 120}},
    "required": ["name", "age"],
    "additionalProperties": False,
}
shaped = client.chat.completions.create(
    model=model,
    messages=[{"role": "user", "content": "Invent a person."}],
    response_format={"type": "json_schema", "json_schema": {"name": "person", "schema": person, "strict": True}},
    max_tokens=40,
    temperature=0,
)
value = json.loads(shaped.choices[0].message.content)
check(
    "json_schema",
    set(value) == {"name", "age"} and isinstance(value["name"], str) and isinstance(value["age"], int)
    and 0 <= value["age"] <= 120,
    value,
)

try:
    client.chat.completions.create(model="no-such-model", messages=question, max_tokens=4)
    check("unknown model", False, "no error")
except openai.NotFoundError as e:
    check("unknown model", e.status_code == 404, e)

try:
    openai.OpenAI(base_url=base_url, api_key="wrong", max_retries=0).models.list()
    check("wrong key", False, "no error")
except openai.AuthenticationError as e:
    check("wrong key", e.status_code == 401, e)

print("all checks passed")

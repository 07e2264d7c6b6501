"""Drives a running `tandem serve` with the real `openai` Python client through the APIs beside chat: text
completions (whole, streamed, with logprobs, echoed, n choices streamed), chat logprobs with top_logprobs, and the
Responses API (text, a json_schema answer, a function call round trip with function_call_output, and the SDK's stream helper).

Usage: openai_api.py BASE_URL API_KEY MODEL. Prints one line per check; exits non-zero at the first failure.
"""

import json
import sys

import openai

base_url, api_key, model = sys.argv[1], sys.argv[2], sys.argv[3]
client = openai.OpenAI(base_url=base_url, api_key=api_key, max_retries=0, timeout=300)


def check(name, condition, detail):
    if not condition:
        print(f"FAIL {name}: {detail}")
        sys.exit(1)
    print(f"ok {name}")


# Text completions: the prompt as it is, no chat template.
prompt = "def add(a, b):\n    return"
whole = client.completions.create(model=model, prompt=prompt, max_tokens=6, temperature=0, logprobs=2)
choice = whole.choices[0]
check("completion", isinstance(choice.text, str) and whole.usage.completion_tokens > 0, whole)
lp = choice.logprobs
check(
    "completion logprobs: one per token, adding up to the text",
    len(lp.tokens) == whole.usage.completion_tokens and "".join(lp.tokens).startswith(choice.text)
    and all(x <= 0 for x in lp.token_logprobs) and all(len(t) <= 2 for t in lp.top_logprobs),
    lp,
)
streamed = "".join(
    c.choices[0].text for c in client.completions.create(
        model=model, prompt=prompt, max_tokens=6, temperature=0, stream=True) if c.choices
)
check("streamed completion equals the whole one", streamed == choice.text, (streamed, choice.text))

# echo: the prompt first, its first token unscored; n choices streamed, each chunk naming its choice.
echoed = client.completions.create(model=model, prompt=prompt, max_tokens=6, temperature=0, logprobs=1, echo=True)
elp = echoed.choices[0].logprobs
check(
    "echoed completion: the prompt, then the same answer",
    echoed.choices[0].text == prompt + choice.text and elp.token_logprobs[0] is None
    and "".join(elp.tokens) == echoed.choices[0].text and len(elp.tokens) == echoed.usage.total_tokens,
    echoed,
)
texts = {}
for c in client.completions.create(model=model, prompt=prompt, max_tokens=6, temperature=0.8, seed=3, n=2,
                                   stream=True):
    for ch in c.choices:
        texts[ch.index] = texts.get(ch.index, "") + ch.text
several = client.completions.create(model=model, prompt=prompt, max_tokens=6, temperature=0.8, seed=3, n=2)
check(
    "n = 2 streamed: both choices, each the text the whole answer gives it",
    texts == {c.index: c.text for c in several.choices} and len(several.choices) == 2,
    (texts, several.choices),
)

# Chat logprobs: greedy, so the chosen token is the most likely one.
chat = client.chat.completions.create(
    model=model, messages=[{"role": "user", "content": "Name one primary colour. One word."}],
    max_tokens=4, temperature=0, logprobs=True, top_logprobs=3,
)
content = chat.choices[0].logprobs.content
check(
    "chat logprobs: one entry per token, three alternatives, the chosen one first",
    len(content) == chat.usage.completion_tokens
    and all(len(e.top_logprobs) == 3 and e.top_logprobs[0].token == e.token for e in content)
    and all(e.logprob <= 0 and abs(e.logprob - e.top_logprobs[0].logprob) < 1e-4 for e in content)
    and "".join(e.token for e in content).startswith(chat.choices[0].message.content),
    chat.choices[0],
)

# The Responses API.
text = client.responses.create(
    model=model, instructions="Answer in one word.", input="Name one primary colour.",
    max_output_tokens=8, temperature=0,
)
check(
    "responses text",
    text.output_text.strip() != "" and text.output[0].type == "message" and text.usage.output_tokens > 0,
    text,
)

person = {
    "type": "object",
    "properties": {"name": {"type": "string", "maxLength": 20}, "age": {"type": "integer", "minimum": 0, "maximum": 120}},
    "required": ["name", "age"],
    "additionalProperties": False,
}
shaped = client.responses.create(
    model=model, input=[{"role": "user", "content": [{"type": "input_text", "text": "Invent a person."}]}],
    text={"format": {"type": "json_schema", "name": "person", "schema": person, "strict": True}},
    max_output_tokens=40, temperature=0,
)
value = json.loads(shaped.output_text)
check(
    "responses json_schema",
    set(value) == {"name", "age"} and isinstance(value["name"], str) and 0 <= value["age"] <= 120,
    value,
)

WEATHER = {
    "type": "function",
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
    "strict": True,
}
ask = [{"role": "user", "content": "What is the weather in Paris, in celsius?"}]
called = client.responses.create(
    model=model, input=ask, tools=[WEATHER], tool_choice="required", max_output_tokens=40, temperature=0,
)
calls = [item for item in called.output if item.type == "function_call"]
check("responses function call", len(calls) >= 1 and calls[0].name == "get_weather", called.output)
args = json.loads(calls[0].arguments)
check(
    "function call arguments fit the schema",
    isinstance(args.get("city"), str) and args.get("unit") in ("celsius", "fahrenheit") and set(args) <= {"city", "unit"},
    args,
)
round_trip = ask + [c.model_dump() for c in calls] + [
    {"type": "function_call_output", "call_id": c.call_id, "output": json.dumps({"temperature": 18, "unit": "celsius"})}
    for c in calls
]
answered = client.responses.create(
    model=model, input=round_trip, tools=[WEATHER], tool_choice="none", max_output_tokens=24, temperature=0,
)
check(
    "the call's output comes back as an answer",
    answered.output[0].type == "message" and answered.output_text.strip() != "",
    answered,
)

with client.responses.stream(
    model=model, input=ask, tools=[WEATHER], tool_choice="required", max_output_tokens=40, temperature=0,
) as stream:
    kinds = [event.type for event in stream]
    final = stream.get_final_response()
check(
    "the stream helper sees the typed events in order",
    kinds[0] == "response.created" and kinds[-1] == "response.completed"
    and "response.output_item.added" in kinds and "response.function_call_arguments.delta" in kinds
    and "response.function_call_arguments.done" in kinds and "response.output_item.done" in kinds,
    kinds,
)
streamed_calls = [item for item in final.output if item.type == "function_call"]
check(
    "the streamed call equals the whole one",
    len(streamed_calls) >= 1 and streamed_calls[0].name == "get_weather"
    and json.loads(streamed_calls[0].arguments) == args,
    final.output,
)

# Cut by the token limit: the response and the message it was writing are incomplete, and say why.
cut = client.responses.create(
    model=model, input="Count from 1 to 50, one number per line.", max_output_tokens=3, temperature=0,
)
check(
    "a response cut by max_output_tokens is incomplete",
    cut.status == "incomplete" and cut.incomplete_details is not None
    and cut.incomplete_details.reason == "max_output_tokens" and cut.output[0].status == "incomplete",
    cut,
)

# A conversation continued by previous_response_id: the server keeps each response (store defaults to true).
first = client.responses.create(
    model=model, input="My name is Ada. Reply with the word OK.", max_output_tokens=4, temperature=0,
)
check("responses are stored by default", first.store is True, first)
second = client.responses.create(
    model=model, previous_response_id=first.id, input="What is my name? Answer with the name only.",
    max_output_tokens=6, temperature=0,
)
check(
    "the second turn sees the first",
    "Ada" in second.output_text and second.previous_response_id == first.id,
    second,
)
# A tool call answered by function_call_output alone, the call itself read from the stored response.
outputs = [
    {"type": "function_call_output", "call_id": c.call_id, "output": json.dumps({"temperature": 18, "unit": "celsius"})}
    for c in calls
]
continued = client.responses.create(
    model=model, previous_response_id=called.id, input=outputs, tools=[WEATHER], tool_choice="none",
    max_output_tokens=24, temperature=0,
)
check(
    "a stored call's output comes back as an answer",
    continued.output[0].type == "message" and continued.output_text.strip() != "",
    continued,
)
# store: false keeps nothing; an unknown id is a 400 that says what to do.
unstored = client.responses.create(model=model, input="hi", store=False, max_output_tokens=2, temperature=0)
for missing in (unstored.id, "resp_unknown"):
    try:
        client.responses.create(model=model, input="hi", previous_response_id=missing)
        check("an unstored previous_response_id is refused", False, "no error")
    except openai.BadRequestError as e:
        check(
            "an unstored previous_response_id is refused",
            e.status_code == 400 and "previous_response_id" in str(e) and "no stored response" in str(e),
            e,
        )

print("all checks passed")

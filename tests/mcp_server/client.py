"""A real MCP client (the MCP Python SDK) driving Tandem as an MCP server, for tests/it/mcp_server.rs.

    client.py stdio SCRIPT [--answer approve|reject] [--modern] -- COMMAND [ARGS...]
    client.py http SCRIPT [--answer approve|reject] URL [KEY]

SCRIPT is a JSON list of calls, each {"tool": NAME, "args": {...}}; an argument value "$run_id" is the run id of
the previous call's structured result. Prints one JSON object: the server's name, the protocol version agreed,
its tools (name, annotations, whether it has an output schema), each call's result (text, structured content,
is_error) with the progress messages it received, and the elicitations the server asked for.

--answer declares elicitation and answers every form with approve: true (approve) or false (reject), as a user
clicking yes or no would. --modern connects as mcp.Client does by default (protocol 2026-07-28 when the server
offers it: elicitation comes as an input_required result the client answers by calling again); without it, the
initialize handshake of earlier protocols (elicitation comes as a request from the server).
"""

import asyncio
import json
import sys
import time

import anyio

from mcp import Client, ClientSession, StdioServerParameters, stdio_client, types
from mcp.client.streamable_http import streamable_http_client


def answering(answer, elicited):
    """The elicitation callback of a user who answers every form `answer` (None: no elicitation declared)."""
    if answer is None:
        return None

    async def on_elicit(context, params):
        elicited.append({"message": params.message, "schema": params.requested_schema})
        return types.ElicitResult(action="accept", content={"approve": answer == "approve"})

    return on_elicit


async def drive(session, script, elicited):
    """Runs SCRIPT on a connected ClientSession or entered Client."""
    listed = await session.list_tools()
    report = {
        "server": session.server_info.name if session.server_info else None,
        "protocol": session.protocol_version,
        "elicited": elicited,
        "tools": [
            {
                "name": tool.name,
                "annotations": tool.annotations.model_dump(by_alias=True, exclude_none=True) if tool.annotations else None,
                "output_schema": tool.output_schema is not None,
                "required": (tool.input_schema or {}).get("required", []),
            }
            for tool in listed.tools
        ],
        "calls": [],
    }
    run_id = None
    for call in script:
        args = {k: (run_id if v == "$run_id" else v) for k, v in call.get("args", {}).items()}
        progress = []

        async def on_progress(value, total, message, progress=progress):
            progress.append(message)

        if "cancel_after" in call:
            # Abandon the request once a progress message starts with this: the SDK sends notifications/cancelled.
            seen = anyio.Event()

            async def on_progress(value, total, message, progress=progress, prefix=call["cancel_after"]):
                progress.append(message)
                if message.startswith(prefix):
                    seen.set()

            async with anyio.create_task_group() as group:
                group.start_soon(session.call_tool, call["tool"], args, None, on_progress)
                with anyio.fail_after(600):
                    await seen.wait()
                group.cancel_scope.cancel()
            run_id = progress[0].split()[1]
            report["calls"].append({"tool": call["tool"], "cancelled": True, "progress": progress, "run_id": run_id})
            continue
        if call.get("until_settled"):
            # get_run until the run is neither queued nor running (a cancelled one stops at its next event).
            for _ in range(600):
                result = await session.call_tool(call["tool"], args)
                if (result.structured_content or {}).get("status") not in ("queued", "running"):
                    break
                await anyio.sleep(0.2)
        else:
            started = time.monotonic()
            result = await session.call_tool(call["tool"], args, progress_callback=on_progress)
            call["seconds"] = round(time.monotonic() - started, 3)
        structured = result.structured_content
        if isinstance(structured, dict) and structured.get("run_id"):
            run_id = structured["run_id"]
        report["calls"].append(
            {
                "tool": call["tool"],
                "is_error": bool(result.is_error),
                "text": "\n".join(block.text for block in result.content if getattr(block, "text", None)),
                "structured": structured,
                "progress": progress,
                "seconds": call.get("seconds"),
            }
        )
    return report


def options(args):
    """Takes --answer VALUE and --modern out of ARGS (up to a "--"): (answer, modern, the rest)."""
    answer, modern, rest = None, False, []
    i = 0
    while i < len(args):
        if args[i] == "--":
            rest.extend(args[i:])
            break
        if args[i] == "--answer":
            answer = args[i + 1]
            i += 2
        elif args[i] == "--modern":
            modern = True
            i += 1
        else:
            rest.append(args[i])
            i += 1
    return answer, modern, rest


async def main():
    mode, script = sys.argv[1], json.loads(sys.argv[2])
    answer, modern, rest = options(sys.argv[3:])
    elicited = []
    on_elicit = answering(answer, elicited)
    if mode == "stdio":
        command = rest[rest.index("--") + 1 :]
        params = StdioServerParameters(command=command[0], args=command[1:])
        if modern:
            async with Client(params, elicitation_callback=on_elicit, read_timeout_seconds=600) as client:
                report = await drive(client, script, elicited)
        else:
            async with stdio_client(params) as (read, write):
                async with ClientSession(read, write, elicitation_callback=on_elicit) as session:
                    await session.initialize()
                    report = await drive(session, script, elicited)
    else:
        import httpx2

        url = rest[0]
        headers = {"Authorization": f"Bearer {rest[1]}"} if len(rest) > 1 else {}
        async with httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(600.0)) as http:
            async with streamable_http_client(url, http_client=http) as streams:
                read, write = streams[0], streams[1]
                async with ClientSession(read, write, elicitation_callback=on_elicit) as session:
                    await session.initialize()
                    report = await drive(session, script, elicited)
    print(json.dumps(report))


asyncio.run(main())

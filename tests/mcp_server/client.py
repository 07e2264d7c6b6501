"""A real MCP client (the MCP Python SDK) driving Tandem as an MCP server, for tests/it/mcp_server.rs.

    client.py stdio SCRIPT -- COMMAND [ARGS...]
    client.py http SCRIPT URL [KEY]

SCRIPT is a JSON list of calls, each {"tool": NAME, "args": {...}}; an argument value "$run_id" is the run id of
the previous call's structured result. Prints one JSON object: the server's name, its tools (name, annotations,
whether it has an output schema), and each call's result (text, structured content, is_error) with the progress
messages it received.
"""

import asyncio
import json
import sys
import time

import anyio

from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client


async def drive(session, script):
    init = await session.initialize()
    listed = await session.list_tools()
    report = {
        "server": init.server_info.name,
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


async def main():
    mode, script = sys.argv[1], json.loads(sys.argv[2])
    if mode == "stdio":
        command = sys.argv[sys.argv.index("--") + 1 :]
        params = StdioServerParameters(command=command[0], args=command[1:])
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write) as session:
                report = await drive(session, script)
    else:
        import httpx2

        url = sys.argv[3]
        headers = {"Authorization": f"Bearer {sys.argv[4]}"} if len(sys.argv) > 4 else {}
        async with httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(600.0)) as http:
            async with streamable_http_client(url, http_client=http) as streams:
                read, write = streams[0], streams[1]
                async with ClientSession(read, write) as session:
                    report = await drive(session, script)
    print(json.dumps(report))


asyncio.run(main())

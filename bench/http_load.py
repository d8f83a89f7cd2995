"""`python -m bench.http_load HOST PORT CONCURRENCY < requests.jsonl`: an HTTP/1.1 load generator of its own
process, so its CPU is counted apart from the server's.

Each input line is one request, `[method, path, {header: value}, body or null]`; CONCURRENCY asyncio tasks
take them in order, one connection per request (gunicorn's sync workers close every connection), and the
result is one JSON line: the status counts, the wall seconds from the first request to the last answer,
this process's CPU seconds and the slowest answers' latencies. Standard library only: the benchmark's
client must cost little and must not depend on what it measures.
"""

from __future__ import annotations

import asyncio
import json
import resource
import sys
import time
from collections import Counter
from typing import Any

Request = tuple[str, str, dict[str, str], str | None]


def _encode(host: str, request: Request) -> bytes:
    method, path, headers, body = request
    data = (body or "").encode()
    lines = [f"{method} {path} HTTP/1.1", f"Host: {host}", "Connection: close"]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    if body is not None:
        lines += ["Content-Type: application/json", f"Content-Length: {len(data)}"]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + data


async def _run(host: str, port: int, concurrency: int, requests: list[Request]) -> dict[str, Any]:
    encoded = [_encode(host, r) for r in requests]
    statuses: Counter[int] = Counter()
    latencies: list[float] = []
    todo = iter(encoded)

    async def worker() -> None:
        for raw in todo:
            started = time.perf_counter()
            reader, writer = await asyncio.open_connection(host, port)
            writer.write(raw)
            response = await reader.read()  # the server closes the connection after its answer
            writer.close()
            latencies.append(time.perf_counter() - started)
            statuses[int(response[9:12] or 0)] += 1

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    seconds = time.perf_counter() - started
    latencies.sort()
    return {
        "statuses": {str(k): v for k, v in statuses.items()},
        "seconds": seconds,
        "p50_ms": latencies[len(latencies) // 2] * 1000 if latencies else None,
        "p99_ms": latencies[int(len(latencies) * 0.99)] * 1000 if latencies else None,
    }


def main() -> int:
    host, port, concurrency = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    requests = [tuple(json.loads(line)) for line in sys.stdin if line.strip()]
    usage = resource.getrusage(resource.RUSAGE_SELF)
    cpu = usage.ru_utime + usage.ru_stime
    result = asyncio.run(_run(host, port, concurrency, requests))
    usage = resource.getrusage(resource.RUSAGE_SELF)
    result["cpu"] = usage.ru_utime + usage.ru_stime - cpu
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())

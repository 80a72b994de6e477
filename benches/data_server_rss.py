#!/usr/bin/env python3
"""What a `mnemo serve --data` server costs as it holds more stores: resident memory, threads and
open descriptors, read from /proc, after each step of creating and writing N stores.

Usage: benches/data_server_rss.py MNEMO [STORES [MAX_OPEN]]

MNEMO is a mnemo binary built with `--features serve` (a release build for figures to quote).
The server runs on loopback in a temporary directory, removed afterwards. Each store gets one
`create` of a 120-byte file. Prints one line per checkpoint: stores made, open stores, RSS (MiB),
threads, descriptors; and the cost of one open store (RSS growth over the stores open).
"""

import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request


def status(pid):
    rss = threads = 0
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1])
            elif line.startswith("Threads:"):
                threads = int(line.split()[1])
    return rss, threads, len(os.listdir(f"/proc/{pid}/fd"))


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    mnemo = sys.argv[1]
    stores = int(sys.argv[2]) if len(sys.argv) > 2 else 1000
    max_open = int(sys.argv[3]) if len(sys.argv) > 3 else 100
    with tempfile.TemporaryDirectory() as tmp:
        data = os.path.join(tmp, "data")
        server = subprocess.Popen(
            [mnemo, "serve", "--data", data, "--max-open-stores", str(max_open)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            path = os.path.join(data, "mnemo-server.json")
            deadline = time.time() + 30
            while not os.path.exists(path):
                if time.time() > deadline or server.poll() is not None:
                    sys.exit("the server did not start")
                time.sleep(0.05)
            time.sleep(0.2)
            with open(path) as f:
                file = json.load(f)

            def call(method, route, body):
                request = urllib.request.Request(
                    file["url"] + route,
                    data=json.dumps(body).encode(),
                    method=method,
                    headers={
                        "Authorization": "Bearer " + file["token"],
                        "Content-Type": "application/json",
                    },
                )
                with urllib.request.urlopen(request) as answer:
                    return answer.read()

            base = status(server.pid)
            print("stores  open  rss_mib  threads  fds")
            print(f"{0:6}  {0:4}  {base[0] / 1024:7.1f}  {base[1]:7}  {base[2]:3}")
            every = max(1, stores // 10)
            for i in range(stores):
                name = f"s{i:06d}"
                call("POST", "/v1/stores", {"name": name})
                call(
                    "POST",
                    f"/v1/stores/{name}/memory",
                    {"command": "create", "path": "/memories/a.md", "file_text": "hello\n" * 20},
                )
                if (i + 1) % every == 0 or i + 1 == stores:
                    rss, threads, fds = status(server.pid)
                    open_now = min(i + 1, max_open)
                    print(f"{i + 1:6}  {open_now:4}  {rss / 1024:7.1f}  {threads:7}  {fds:3}")
            rss, _, _ = status(server.pid)
            print(f"one open store: {(rss - base[0]) / min(stores, max_open) / 1024:.1f} MiB")
        finally:
            server.terminate()
            server.wait()


if __name__ == "__main__":
    main()
